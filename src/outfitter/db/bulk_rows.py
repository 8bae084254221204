"""Batches of new company rows written while the caller goes on (`rows_written_meanwhile`: the bulk
registration renders its answers as its rows are written), and the reads a batch makes first
(`values_taken`, `rows_holding`). A company's batches of one table take turns (`take_turn`), so
that two naming the same unique values never deadlock.

The rows are bound to the session's company as `company_insert` binds them (db.company_writes,
the one path of company rows) and written by the same statement or COPY (db.copy_rows).
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Final

from sqlalchemy import Connection, Row, Table, bindparam, func, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import QueryableAttribute, Session

from outfitter.db.base import Base
from outfitter.db.company_writes import bound_rows, rows_statement
from outfitter.db.copy_rows import (
    COPY_CHUNK_ROWS,
    column_texts,
    complete_columns,
    copied,
    copy_statement,
    copy_text,
    copying,
)
from outfitter.db.tenancy import company_of

# The first chunk of rows a generator makes is smaller: the server waits for it, idle, while the
# caller's thread makes it.
FIRST_CHUNK_ROWS = 50


class _Copy:
    """A COPY's statement, then its text chunk by chunk (as the queue of `RowsMeanwhile` holds it)."""

    def __init__(self, statement: str) -> None:
        self.statement = statement


class _Finished:
    """The last item of a writer's queue."""


class _Abandoned(Exception):
    """In a writer's queue, in place of a COPY's end: the caller stopped half-way through the rows
    (making them raised), so the COPY fails rather than keep part of them. A new one each time:
    raised in the writer's thread, it holds that thread's frames."""


_FINISHED: Final = _Finished()
# What a writer's queue holds: an INSERT's rows, or a COPY then its chunks then None (or _Abandoned).
_Queued = _Copy | str | tuple[Table, Sequence[Mapping[str, Any]]] | None | _Abandoned | _Finished


class RowsMeanwhile:
    """Batches of new rows written, in the order given, while the caller goes on with work that
    needs no database (`rows_written_meanwhile`).

    The caller's thread checks each batch and makes its COPY text, a chunk at a time; a thread of
    this writer's own sends it and waits for the server. So the server inserts the first rows
    (indexes, foreign-key checks) while the text of the next is being made, and the caller's
    thread, which holds the GIL for the Python work, seldom waits for the thread that waits on
    the socket."""

    def __init__(self, session: Session) -> None:
        session.flush()
        self._session = session
        self._connection = session.connection()
        self._queue: queue.SimpleQueue[_Queued] = queue.SimpleQueue()
        self._failure: BaseException | None = None
        self._thread: threading.Thread | None = None
        # Only PostgreSQL's COPY leaves the GIL free for long; elsewhere each batch is written
        # at once (the same rows, in the same order, in the same transaction).
        if self._connection.dialect.name == "postgresql":
            self._thread = threading.Thread(target=self._send, name="outfitter-rows", daemon=True)
            self._thread.start()

    def write(self, model: type[Any], rows: Iterable[Mapping[str, Any]]) -> None:
        """Queue `rows` for `model`'s table, bound to the session's company here as
        `company_insert` binds them; the caller must not change them any more. On PostgreSQL they
        are taken FIRST_CHUNK_ROWS, then COPY_CHUNK_ROWS at a time: rows that a generator makes are
        sent as it makes the next ones.
        Raises at once what writing an earlier batch raised."""
        if self._failure is not None:
            raise self._failure
        if self._thread is None:
            if rows := list(rows):
                table, names, rows = _checked(self._session, model, rows)
                _insert(self._connection, table, rows)
            return
        chunks = _chunked(rows, FIRST_CHUNK_ROWS, COPY_CHUNK_ROWS)
        given = next(chunks, None)
        if given is None:
            return
        table, names, first = _checked(self._session, model, given)
        if not copied(self._connection, first):  # the only chunk, and a small one
            self._queue.put((table, first))
            return
        columns = column_texts(self._connection.dialect, table, names)
        self._queue.put(_Copy(copy_statement(self._connection.dialect, table, names)))
        try:
            self._queue.put(copy_text(columns, first))
            for chunk in chunks:
                self._queue.put(copy_text(columns, _checked(self._session, model, chunk)[2]))
        except BaseException:
            self._queue.put(_Abandoned("the rows stopped half-way"))
            raise
        self._queue.put(None)

    def _send(self) -> None:
        """The writer's thread: each queued INSERT or COPY in turn, until `finish` says no more."""
        while (item := self._queue.get()) is not _FINISHED:
            if self._failure is not None:  # the transaction is lost: the rest is dropped
                continue
            try:
                if isinstance(item, _Copy):
                    with copying(self._connection, item.statement) as copy:
                        while isinstance(chunk := self._queue.get(), str):
                            copy.write(chunk)
                        if isinstance(chunk, _Abandoned):
                            raise chunk  # psycopg ends the COPY with a failure
                elif isinstance(item, tuple):
                    _insert(self._connection, *item)
            except BaseException as failure:  # raised in the caller's thread (`write`, `finish`)
                self._failure = failure

    def finish(self, *, raising: bool = True) -> None:
        """Wait for every queued batch to be written; raise what writing one raised."""
        if self._thread is not None:
            self._queue.put(_FINISHED)
            self._thread.join()
        if raising and self._failure is not None:
            raise self._failure


@contextmanager
def rows_written_meanwhile(session: Session) -> Iterator[RowsMeanwhile]:
    """Write a batch's rows (`RowsMeanwhile.write`) from a thread of their own while this one goes
    on, in the session's transaction: on PostgreSQL the server inserts them (indexes, foreign-key
    checks: most of a 1,000-device batch's time there) on its own core while this thread renders
    the answers. The body must not use the session until the block ends; the block ends when the
    rows are written, raising what writing them raised (elsewhere than on PostgreSQL, each batch
    is written, or refused, where it is given)."""
    writer = RowsMeanwhile(session)
    try:
        yield writer
    except BaseException:  # the thread must be done with the connection before any rollback
        writer.finish(raising=False)
        raise
    writer.finish()


def _checked(
    session: Session, model: type[Any], rows: Sequence[Mapping[str, Any]]
) -> tuple[Table, list[str], Sequence[Mapping[str, Any]]]:
    """`model`'s table, the rows' column names and the rows bound to the session's company
    (`bound_rows`, which refuses another), once none is found to leave out a column with a default
    (COPY runs no Python-side default)."""
    table: Table = model.__table__
    rows = bound_rows(session, table, rows)
    return table, complete_columns(table, rows), rows


def _insert(connection: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """The rows by the path's own INSERT (db.company_writes), as `company_insert` writes them."""
    statement = rows_statement(table, connection.dialect.name, (), ())
    connection.execute(statement, dict(rows[0]) if len(rows) == 1 else list(rows))


def _chunked(rows: Iterable[Mapping[str, Any]], first: int, size: int) -> Iterator[list[Mapping[str, Any]]]:
    """`rows` in lists: `first` of them, then `size` at a time."""
    iterator = iter(rows)
    if chunk := list(itertools.islice(iterator, first)):
        yield chunk
        while chunk := list(itertools.islice(iterator, size)):
            yield chunk


def values_taken(session: Session, column: QueryableAttribute[Any], values: Collection[Any]) -> set[Any]:
    """Which of `values` the session's company already holds in `column` (serial numbers, emails):
    one statement for a whole batch (the tenancy hook adds the company filter); `rows_holding`."""
    return set(rows_holding(session, column, values))


def rows_holding(
    session: Session, column: QueryableAttribute[Any], values: Collection[Any], *also: QueryableAttribute[Any]
) -> dict[Any, Row[Any]]:
    """The session's company's rows holding any of `values` in `column`, by value: each row is the
    value, then the columns `also` names. One statement for a whole batch (the tenancy hook adds
    the company filter).

    On PostgreSQL the values are one array parameter, unnested and joined to the table, so that
    each is looked up in the company's unique index (as `column IN (...)` a file's check would
    compile and send 10,000 parameters). No other index serves `column = value`: the column's
    trigram index is of `lower(column)` (db.base.trigram_index). Elsewhere it is an IN."""
    if not values:
        return {}
    if session.get_bind().dialect.name == "postgresql":
        array = bindparam(None, list(values), type_=ARRAY(column.type))
        given = func.unnest(array).table_valued("value").render_derived()
        statement = select(column, *also).join(given, column == given.c.value)
    else:
        statement = select(column, *also).where(column.in_(values))
    return {row[0]: row for row in session.execute(statement)}


def take_turn(session: Session, model: type[Base]) -> None:
    """Wait until no other batch of this session's company is writing rows of `model` (held until the
    transaction ends; PostgreSQL only: SQLite's writers take turns anyway). Two batches naming the
    same unique values in different orders (serial numbers, emails) would otherwise each wait for
    the other's row of the unique index, a deadlock: one was undone and answered 503, not the 422
    its taken values call for. Taking turns, the second finds the first's rows and says which."""
    if session.get_bind().dialect.name == "postgresql":
        key = f"bulk:{model.__tablename__}:{company_of(session)}"
        session.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(key, 0))))
