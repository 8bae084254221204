"""Engines (SQLite for the embedded default, PostgreSQL in production) and sessions."""

from __future__ import annotations

import json
import zlib
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker


class JsonText:
    """JSON text already made, which a JSON column stores as it is (`json_text` sends it for an
    INSERT, a COPY writes it: db.bulk_rows) rather than a value parsed from it and serialized
    again: an event's data is its subject's answer, already rendered, and a webhook delivery's
    payload embeds that text (outbox). Never parsed on the way in; read back, the column is
    the JSON value as any other."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"JsonText({self.text[:60]!r}{'...' if len(self.text) > 60 else ''})"


def json_text(value: Any) -> str:
    """A JSON column's value as the text sent for it (the engine's serializer): a JsonText's own,
    else the standard library's."""
    if type(value) is JsonText:
        return value.text
    return json.dumps(value)


# What the service's PostgreSQL connections set for their session, unless the database URL gives
# libpq `options` itself (`?options=-c%20random_page_cost%3D4`):
# - random_page_cost 1.1 rather than 4: PostgreSQL's default prices a random page read at four
#   sequential ones, a figure for spinning disks; its documentation suggests 1.1 for solid-state
#   storage or data held in memory. At 4 the foreign-key check of each row written scans the whole
#   of a small table (countries, currencies: three pages) rather than looking its key up
#   (docs/equipment-performance.md has the cost).
# - TimeZone UTC, the zone of every time the service stores and answers: psycopg then gives
#   `timestamptz` values in `datetime.UTC` itself, which UTCDateTime and the answers take as
#   they are instead of converting each (an export of 100,000 devices converts 200,000).
CONNECTION_OPTIONS = "-c random_page_cost=1.1 -c timezone=UTC"


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def make_engine(database_url: str, **kwargs: Any) -> Engine:
    kwargs.setdefault("json_serializer", json_text)
    # A statement's values are people's data (searches, names, emails) and token digests: an error
    # (and so the stack trace of a 500 in the log, kept far longer than a request) names the
    # statement, never them.
    kwargs.setdefault("hide_parameters", True)
    if database_url.startswith("sqlite"):
        engine = create_engine(
            database_url, connect_args={"check_same_thread": False, "timeout": 30}, **kwargs
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
            # Let SQLAlchemy emit BEGIN itself (see _sqlite_begin_immediate) instead of pysqlite.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()
            # SQLite's own lower() folds A-Z only; the searches (`search_text`) compare in any case
            # as PostgreSQL's does, so "ZOË" finds "Zoë" here too. No SQLite index is of lower().
            dbapi_connection.create_function("lower", 1, _lower, deterministic=True)

        @event.listens_for(engine, "begin")
        def _sqlite_begin_immediate(conn: Any) -> None:
            # Take SQLite's write lock at BEGIN, so two writers queue instead of failing with a
            # deadlock when both upgrade a read lock; PostgreSQL uses row locks instead.
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    if "options" not in make_url(database_url).query:  # an operator's own options win
        kwargs.setdefault("connect_args", {}).setdefault("options", CONNECTION_OPTIONS)
    # No pre-ping: it costs a round trip per request. A connection that died since its last use
    # fails that one request with 503 (http.handlers) and SQLAlchemy then replaces the pool's.
    return create_engine(database_url, **kwargs)


def watch_pool(engine: Engine, max_overflow: int = 0) -> None:
    """Count the pool's connections in use, and each checkout that takes its last free one, in the
    metrics (core.metrics) when they are on: two listeners, one write each per checkout and checkin."""
    from sqlalchemy.pool import QueuePool

    from outfitter.core import metrics

    pool = engine.pool
    if not isinstance(pool, QueuePool) or metrics.active is None:
        return
    recorder = metrics.active
    capacity = pool.size() + max_overflow  # the pool has no public accessor of its overflow
    recorder.pool_capacity.inc(capacity)

    @event.listens_for(pool, "checkout")
    def _checked_out(*_args: Any) -> None:
        recorder.pool_in_use.inc()
        if pool.checkedout() >= capacity:
            recorder.pool_exhausted.inc()

    @event.listens_for(pool, "checkin")
    def _checked_in(*_args: Any) -> None:
        recorder.pool_in_use.dec()


def make_sessionmaker(engine: Engine, session_class: type[Session] = Session) -> sessionmaker[Session]:
    return sessionmaker(engine, class_=session_class, expire_on_commit=False, autoflush=True)


def insert_if_absent(session: Session, model: type[Any], values: dict[str, Any], unique_on: list[str]) -> Any:
    """INSERT ... ON CONFLICT (unique_on) DO NOTHING, on PostgreSQL and SQLite alike.

    Race-free "create unless it exists": of concurrent callers exactly one inserts. The statement is
    returned unexecuted, so a caller can add RETURNING. For tables of no company: a company's rows
    take db.company_writes' `company_insert(..., unique=...)`."""
    return unless_conflicting(model, session.get_bind().dialect.name, unique_on).values(**values)


def unless_conflicting(target: Any, dialect: str, unique_on: list[str]) -> Any:
    """`INSERT INTO target ... ON CONFLICT (unique_on) DO NOTHING` in `dialect`'s syntax, no values yet."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    return insert(target).on_conflict_do_nothing(index_elements=unique_on)


def one_at_a_time(connection: Connection, purpose: str) -> None:
    """Wait until no other transaction on this database holds `purpose`, then hold it until this
    one ends: a PostgreSQL advisory lock, for work that two operators (or two hosts' start
    scripts) may run at once and that must not interleave, such as a migration. SQLite has one
    writer at a time already."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": zlib.crc32(purpose.encode())})
