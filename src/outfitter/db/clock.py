"""The times changes are stamped with, and the horizon an `updated_since` walk stops at."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, literal, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session

from outfitter.db.base import UTCDateTime, utcnow


class _SyncHorizon(ColumnElement[datetime]):
    """The time before which no transaction still in flight can have stamped a change: the start
    of the oldest open transaction of another client of this database (our writes stamp
    `updated_at` after their transaction began), or now. On SQLite, which runs one writer at a
    time and shows a reader only committed data, NULL (no horizon)."""

    type = UTCDateTime()
    inherit_cache = True


@compiles(_SyncHorizon, "postgresql")
def _horizon_on_postgresql(_element: _SyncHorizon, _compiler: Any, **_kw: Any) -> str:
    return (
        "(SELECT least(min(xact_start), clock_timestamp()) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND backend_type = 'client backend' AND xact_start IS NOT NULL)"
    )


@compiles(_SyncHorizon)
def _no_horizon(_element: _SyncHorizon, _compiler: Any, **_kw: Any) -> str:
    return "NULL"


def change_time(session: Session) -> datetime:
    """The time to stamp a change with, taken once the session's transaction has begun in the
    database. The horizon trusts that no change still uncommitted is stamped before its
    transaction's start; a transaction begins at its first statement, so a request that ended its
    reads to call another system (`ClientWork.end_reads`) begins its next one here first."""
    session.execute(_TRANSACTION_BEGUN)
    return utcnow()


_TRANSACTION_BEGUN = select(literal(1))


# Read in a statement of its own BEFORE the page: a transaction that commits between the two is
# then either counted in the horizon or visible to the page (PostgreSQL's READ COMMITTED gives
# each statement a new snapshot), never neither.
SYNC_HORIZON = select(_SyncHorizon().label("horizon"))
NO_HORIZON = datetime(9999, 12, 31, tzinfo=UTC)


def sync_horizon(session: Session) -> datetime:
    """The horizon now, in a statement of its own (see SYNC_HORIZON); far in the future on SQLite."""
    return session.scalar(SYNC_HORIZON) or NO_HORIZON
