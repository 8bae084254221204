"""Engine and the request's unit of work: one database transaction per request."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.routing import APIRoute
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.dialects import postgresql, sqlite
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
    kwargs.setdefault("pool_size", 5)
    kwargs.setdefault("max_overflow", 5)
    return create_engine(database_url, pool_pre_ping=True, **kwargs)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False, autoflush=True)


def get_session(request: Request) -> Iterator[Session]:
    """Commit when the handler returns, roll back when anything raises. Services only flush.

    With `UnitOfWorkRoute` the commit has already happened in the handler's thread when this
    resumes, and the commit here finds nothing left to do; the rollback path is the same."""
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


class UnitOfWorkRoute(APIRoute):
    """Commits the request's session in the handler's own worker thread, the moment it returns.

    FastAPI validates a sync handler's response in another worker thread before the session
    dependency resumes. A handler holding a row lock (a wallet, a transaction) would keep it until
    a worker is free to validate its answer; when every worker waits on that lock, nobody frees
    it. Committing before the handler's thread is released ends the transaction, and its locks,
    first. Every router of the API uses this route class.
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        if not inspect.iscoroutinefunction(endpoint):
            endpoint = _commit_on_return(endpoint)
        super().__init__(path, endpoint, **kwargs)


def _commit_on_return(endpoint: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(endpoint)  # FastAPI reads the signature through __wrapped__
    def handler(*args: Any, **kwargs: Any) -> Any:
        result = endpoint(*args, **kwargs)
        for value in kwargs.values():
            if isinstance(value, Session):
                value.commit()
        return result

    return handler


def insert_if_absent(session: Session, model: type[Any], values: dict[str, Any], unique_on: list[str]) -> Any:
    """INSERT ... ON CONFLICT (unique_on) DO NOTHING, on PostgreSQL and SQLite alike.

    Race-free "create unless it exists": of concurrent callers exactly one inserts. The statement is
    returned unexecuted, so a caller can add RETURNING."""
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    return insert(model).values(**values).on_conflict_do_nothing(index_elements=unique_on)
