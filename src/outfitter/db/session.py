"""Engine and the request's unit of work: one database transaction per request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker


def make_engine(database_url: str, **kwargs: Any) -> Engine:
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

        @event.listens_for(engine, "begin")
        def _sqlite_begin_immediate(conn: Any) -> None:
            # Take SQLite's write lock at BEGIN, so two writers queue instead of failing with a
            # deadlock when both upgrade a read lock; PostgreSQL uses row locks instead.
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    return create_engine(database_url, pool_size=10, max_overflow=20, pool_pre_ping=True, **kwargs)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False, autoflush=True)


def get_session(request: Request) -> Iterator[Session]:
    """Commit when the handler returns, roll back when anything raises. Services only flush."""
    factory: sessionmaker[Session] = request.app.state.sessionmaker
    with factory() as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


# scope="function": the commit runs when the endpoint returns, before the response is sent,
# so a failing commit becomes the error response instead of a lost write behind a 200.
DbSession = Annotated[Session, Depends(get_session, scope="function")]
