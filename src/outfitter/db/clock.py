"""The times changes are stamped with, and the horizon an `updated_since` walk stops at."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Integer, Interval, String, column, select, text
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session

from outfitter.db.base import UTCDateTime, utcnow


class _SyncHorizon(ColumnElement[datetime]):
    """The time before which no transaction still in flight can have stamped a change: the start
    of the oldest open transaction that has written (holds a transaction id) of another client of
    this database, or now. A session idle in a transaction that has only read (a console, a report)
    never holds it back. On SQLite, which runs one writer at a time and shows a reader only
    committed data, NULL (no horizon).

    Sound because a change is stamped only once its transaction holds an id (`change_time`, and
    `db.tenancy.claim_transaction_id` as a session that may write begins): a transaction without
    one has stamped nothing yet, and whatever it stamps later is later than this statement's start.

    `backend_xid` is shown for every role's sessions; the start of another role's transaction is
    not (without pg_read_all_stats): such a writer holds the whole feed (the epoch) until it ends,
    since its changes may be stamped at any time after a start this statement cannot see."""

    type = UTCDateTime()
    inherit_cache = True


_WRITERS = (
    " FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    # another role's backend shows no backend_type: counted, as it may be a client's
    " AND (backend_type = 'client backend' OR backend_type IS NULL) AND backend_xid IS NOT NULL"
)


@compiles(_SyncHorizon, "postgresql")
def _horizon_on_postgresql(_element: _SyncHorizon, _compiler: Any, **_kw: Any) -> str:
    # statement_timestamp(), not clock_timestamp(): it precedes this statement's reading of the
    # sessions, so a transaction given its id meanwhile stamps after it.
    return (
        "(SELECT CASE WHEN bool_or(xact_start IS NULL) THEN to_timestamp(0)"
        " ELSE least(min(xact_start), statement_timestamp()) END" + _WRITERS + ")"
    )


@compiles(_SyncHorizon)
def _no_horizon(_element: _SyncHorizon, _compiler: Any, **_kw: Any) -> str:
    return "NULL"


class _TransactionId(ColumnElement[Any]):
    """On PostgreSQL, the session's transaction id, given it now if it has none (which makes the
    transaction one the horizon waits for); elsewhere 1."""

    type = Integer()
    inherit_cache = True


@compiles(_TransactionId, "postgresql")
def _transaction_id_on_postgresql(_element: _TransactionId, _compiler: Any, **_kw: Any) -> str:
    return "pg_current_xact_id()::text::bigint"


@compiles(_TransactionId)
def _no_transaction_id(_element: _TransactionId, _compiler: Any, **_kw: Any) -> str:
    return "1"


def change_time(session: Session) -> datetime:
    """The time to stamp a change with, taken once the session's transaction holds an id in the
    database (so the horizon waits for it). A request that ended its reads to call another system
    (`ClientWork.end_reads`) begins its next transaction here first."""
    session.execute(_TRANSACTION_BEGUN)
    return utcnow()


_TRANSACTION_BEGUN = select(_TransactionId())
# Read in a statement of its own BEFORE the page: a transaction that commits between the two is
# then either counted in the horizon or visible to the page (PostgreSQL's READ COMMITTED gives
# each statement a new snapshot), never neither.
SYNC_HORIZON = select(_SyncHorizon().label("horizon"))
NO_HORIZON = datetime(9999, 12, 31, tzinfo=UTC)

# How long a writer may hold the feed before each sync read logs it (docs/operations.md).
HELD_TOO_LONG = timedelta(seconds=60)
# The writers holding the feed, oldest first (the second statement of a sync read held too long).
FEED_HOLDERS = text(
    "SELECT pid, application_name, usename, xact_start, clock_timestamp() - xact_start AS held_for"
    + _WRITERS
    + " ORDER BY xact_start NULLS FIRST"
).columns(
    column("pid", Integer()),
    column("application_name", String()),
    column("usename", String()),
    column("xact_start", UTCDateTime()),
    column("held_for", Interval()),
)
_log = logging.getLogger("outfitter.sync")


def held_too_long(horizon: datetime | None) -> bool:
    """Whether a horizon just read is older than HELD_TOO_LONG (then read FEED_HOLDERS, warn_held)."""
    return horizon is not None and horizon < utcnow() - HELD_TOO_LONG


def warn_held(holders: Sequence[Any]) -> None:
    """Log who holds the `updated_since` feed: each writer's pid, application, role and for how long
    (unknown for another role's, whose start this role cannot see)."""
    for holder in holders:
        held = (
            f"for {holder.held_for}" if holder.held_for is not None else "since a start this role cannot see"
        )
        _log.warning(
            "the updated_since feed is held by backend pid %s (application %r, role %s), in a "
            "transaction that has written, %s: set idle_in_transaction_session_timeout (docs/operations.md)",
            holder.pid,
            holder.application_name,
            holder.usename,
            held,
        )


def sync_horizon(session: Session) -> datetime:
    """The horizon now, in a statement of its own (see SYNC_HORIZON); far in the future on SQLite.
    Held longer than HELD_TOO_LONG, it logs the writers holding it."""
    horizon = session.scalar(SYNC_HORIZON)
    if held_too_long(horizon):
        warn_held(session.execute(FEED_HOLDERS).all())
    return horizon or NO_HORIZON
