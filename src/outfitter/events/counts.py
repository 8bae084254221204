"""The kept count of a company's events, which answers the log's unfiltered `total` on PostgreSQL.

Statement triggers on `events` (migration 0010) append one delta per (statement, company) to the
append-only `event_count_deltas`: a write takes no row lock for it and costs no round trip. The
worker folds the deltas into `event_counts` (`fold_event_counts`); the total is the folded count
plus the company's unfolded deltas, read in one statement. A fold deletes deltas and adds them to
the counts in one transaction, and one statement reads one snapshot, so the total is exact at
every moment, whatever is being written or folded. SQLite has no triggers here: it counts the log.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, ColumnElement, Connection, cast, func, select, text

from outfitter.models.events import EventCount, EventCountDelta

# Deltas of a company deleted meanwhile are dropped (its count went with it: ON DELETE CASCADE).
# Concurrent folds cannot count a delta twice: a DELETE skips the rows another one deleted.
_FOLD = text(
    """
    WITH folded AS (DELETE FROM event_count_deltas RETURNING company_id, delta)
    INSERT INTO event_counts AS kept (company_id, events)
    SELECT folded.company_id, sum(folded.delta)
    FROM folded JOIN companies ON companies.id = folded.company_id
    GROUP BY folded.company_id
    ON CONFLICT (company_id) DO UPDATE SET events = kept.events + excluded.events
    """
)


def kept_total() -> ColumnElement[int]:
    """The company's number of events: its folded count plus its unfolded deltas. Run it through a
    session bound to the company, which scopes both subqueries."""
    folded = select(EventCount.events).scalar_subquery()
    # sum() of bigints is numeric on PostgreSQL: the total is an integer.
    unfolded = select(cast(func.sum(EventCountDelta.delta), BigInteger)).scalar_subquery()
    return func.coalesce(folded, 0) + func.coalesce(unfolded, 0)


# Built once: the session scopes a statement object once (db.tenancy), so reuse it.
KEPT_TOTAL = select(kept_total())


def fold_event_counts(connection: Connection) -> int:
    """Move every committed delta into the counts, in one statement; answers how many companies'
    counts changed. PostgreSQL only (SQLite has no deltas)."""
    if connection.dialect.name != "postgresql":
        return 0
    return int(getattr(connection.execute(_FOLD), "rowcount", 0))
