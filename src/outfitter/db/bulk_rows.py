"""New rows of company-owned tables written as Core statements, not ORM objects, in the session's
own transaction: many rows of one table in one go (`insert_rows`: COPY on PostgreSQL from COPY_FROM
rows, an executemany otherwise), the same while the caller goes on with other work
(`rows_written_meanwhile`: the bulk registration renders its answers as its rows are written), or
one row unless a unique constraint refuses it (`insert_unless_taken`, the single creates' hot path).
A company's batches of one table take turns (`take_turn`), so that two naming the same unique
values never deadlock.

The batch writers (CSV imports, bulk creation, the events they record) build their rows as dicts
and write them here, not through ORM objects: for 10,000 devices the unit of work's bookkeeping
and one bound statement per row cost seconds, COPY a fraction of that. COPY passes by the
session's statement hooks, so the tenancy rule is kept here: in a session bound to a company every
row must name that company (`company_id`, set explicitly by the caller; a row naming another is a
TenantScopeError, as a new ORM object naming another company is); a session working across
companies (the worker, a gateway webhook) names each row's. Each value goes through its column type's bind
processing (JSON, money, UTC timestamps; None in a JSON column is JSON null), as an INSERT's
would. Rows are complete: COPY runs no Python-side column defaults, so a row leaving out a column
that has one is refused. The COPY is announced to the engine's `before_cursor_execute` listeners
like any statement (statement counts see it).

The COPY's text is made here, a column at a time (`_copy_chunks`, `_column_text`), rather than row
by row through psycopg's `write_row` (slower for a batch's devices), and once for
each distinct object in a column (`_texts`: the company, None, an enum member, shared data): each
bound value becomes the text psycopg's text dumper would send (timestamps in ISO 8601 with their
offset, by `format_timestamp` when in UTC, decimals as `str`), except JSON, which is
serialized in Rust (pydantic_core, a third of `json.dumps`'s time: the events of a 10,000-row
import carry 15,000 rendered devices), once for the events of one device, which share its data,
and not at all when the value is JSON text already (`JsonText`: an event's data is its subject's
rendered answer, a delivery's payload embeds it). The text is the same JSON, compact and UTF-8
(the columns are `json`: read back, it is equal).
UUID columns take the 32 digits without hyphens, which PostgreSQL reads as well.
"""

from __future__ import annotations

import functools
import itertools
import operator
import queue
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, Final

from pydantic_core import to_json
from sqlalchemy import JSON, Connection, Dialect, Insert, Row, Table, Uuid, bindparam, func, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import QueryableAttribute, Session
from sqlalchemy.types import TypeEngine

from outfitter.core.timestamps import format_timestamp
from outfitter.db.base import Base, UTCDateTime
from outfitter.db.session import JsonText, unless_conflicting
from outfitter.db.tenancy import TenantScopeError, company_named, company_of

# Below this many rows one INSERT costs less than a COPY's two round trips.
COPY_FROM = 20
COPY_CHUNK_ROWS = 250  # rows of text handed to the COPY at a time: the server starts on the first
# The first chunk of rows a generator makes is smaller: the server waits for it, idle, while the
# caller's thread makes it.
FIRST_CHUNK_ROWS = 50


def insert_rows(session: Session, model: type[Any], rows: Sequence[Mapping[str, Any]]) -> None:
    """Write `rows` (dicts with the same keys, each naming its company) into `model`'s table."""
    if not rows:
        return
    table, names = _checked(session, model, rows)
    session.flush()  # what the ORM holds (the rows these may refer to) is written first
    connection = session.connection()
    if not _copied(connection, rows):
        _insert(connection, table, rows)
        return
    statement = _copy_statement(connection.dialect, table, names)
    with _copying(connection, statement) as copy:
        for chunk in _copy_chunks(connection.dialect, table, names, rows):
            copy.write(chunk)


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
        """Queue `rows` for `model`'s table, checked here as `insert_rows` checks them (tenancy
        included); the caller must not change them any more. On PostgreSQL they are taken
        FIRST_CHUNK_ROWS, then COPY_CHUNK_ROWS at a time: rows that a generator makes are sent as
        it makes the next ones.
        Raises at once what writing an earlier batch raised."""
        if self._failure is not None:
            raise self._failure
        if self._thread is None:
            if rows := list(rows):
                _insert(self._connection, _checked(self._session, model, rows)[0], rows)
            return
        chunks = _chunked(rows, FIRST_CHUNK_ROWS, COPY_CHUNK_ROWS)
        first = next(chunks, None)
        if first is None:
            return
        table, names = _checked(self._session, model, first)
        if not _copied(self._connection, first):  # the only chunk, and a small one
            self._queue.put((table, first))
            return
        columns = _column_texts(self._connection.dialect, table, names)
        self._queue.put(_Copy(_copy_statement(self._connection.dialect, table, names)))
        try:
            self._queue.put(_copy_text(columns, first))
            for chunk in chunks:
                _checked(self._session, model, chunk)
                self._queue.put(_copy_text(columns, chunk))
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
                    with _copying(self._connection, item.statement) as copy:
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
) -> tuple[Table, list[str]]:
    """`model`'s table and the rows' column names, once the rows are proven writable: each names
    the session's company, and none leaves out a column with a default (COPY runs no Python-side
    default)."""
    table: Table = model.__table__
    _check_companies(session, table, rows)
    names = list(rows[0])
    missing = [column.name for column in table.c if column.default is not None and column.name not in names]
    if missing:
        raise ValueError(f"rows of {table.name} leave out {', '.join(missing)}, which have defaults")
    return table, names


def _copied(connection: Connection, rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether `rows` are written by COPY rather than an INSERT."""
    return connection.dialect.name == "postgresql" and len(rows) >= COPY_FROM


def _insert(connection: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    if len(rows) == 1:  # one row: a plain execute, not an executemany's batching
        connection.execute(table.insert(), dict(rows[0]))
    else:
        connection.execute(table.insert(), list(rows))


def _copy_statement(dialect: Dialect, table: Table, names: list[str]) -> str:
    quote = dialect.identifier_preparer.quote
    return (
        f"COPY {dialect.identifier_preparer.format_table(table)} "
        f"({', '.join(quote(name) for name in names)}) FROM STDIN"
    )


@contextmanager
def _copying(connection: Connection, statement: str) -> Iterator[Any]:
    """psycopg's COPY FROM STDIN on the session's connection, in its transaction (SQLAlchemy has no
    COPY): announced to the engine's `before_cursor_execute` listeners like any statement (statement
    counts see it), and a driver's error raised as SQLAlchemy raises an INSERT's (wrapped, with it as
    the cause; a connection found lost is invalidated), through public API only."""
    driver = connection.connection.driver_connection
    dialect = connection.dialect
    assert driver is not None and dialect.loaded_dbapi is not None
    try:
        with driver.cursor() as cursor:
            connection.dispatch.before_cursor_execute(connection, cursor, statement, (), None, False)
            with cursor.copy(statement) as copy:
                yield copy
    except dialect.loaded_dbapi.Error as error:
        lost = dialect.is_disconnect(error, driver, None)
        if lost:
            connection.invalidate(error)
        raise DBAPIError.instance(
            statement,
            (),
            error,
            dialect.loaded_dbapi.Error,
            hide_parameters=connection.engine.hide_parameters,
            connection_invalidated=lost,
            dialect=dialect,
        ) from error


def insert_unless_taken(
    session: Session, model: type[Any], row: Mapping[str, Any], unique: tuple[str, ...]
) -> bool:
    """Write one row (naming its company) unless it would break the unique constraint on `unique`:
    whether it was written. `INSERT ... ON CONFLICT DO NOTHING`: the constraint decides, with no read
    first and no failed statement (PostgreSQL's transaction stays usable for the 409's answer)."""
    table: Table = model.__table__
    _check_companies(session, table, [row])
    session.flush()
    connection = session.connection()
    statement = _insert_unless_taken(table, unique, connection.dialect.name)
    return connection.execute(statement, dict(row)).first() is not None


def written_unless_taken(table: Table, columns: tuple[str, ...], unique: tuple[str, ...]) -> Insert:
    """PostgreSQL: `INSERT INTO table (columns) VALUES (...) ON CONFLICT (unique) DO NOTHING
    RETURNING id, company_id`, its parameters named as the columns: the CTE of a create that the
    rows announcing it (history, events) are selected from, so that a taken value writes none."""
    statement: Insert = (
        unless_conflicting(table, "postgresql", list(unique))
        .values({name: bindparam(name, type_=table.c[name].type) for name in columns})
        .returning(table.c.id, table.c.company_id)
    )
    return statement


@functools.cache
def _insert_unless_taken(table: Table, unique: tuple[str, ...], dialect: str) -> Insert:
    statement: Insert = unless_conflicting(table, dialect, list(unique)).returning(table.c.id)
    return statement


def _copy_chunks(
    dialect: Dialect, table: Table, names: list[str], rows: Sequence[Mapping[str, Any]]
) -> Iterator[str]:
    """The rows as COPY text (a line each, the columns `names`), COPY_CHUNK_ROWS lines at a time."""
    columns = _column_texts(dialect, table, names)
    for start in range(0, len(rows), COPY_CHUNK_ROWS):
        yield _copy_text(columns, rows[start : start + COPY_CHUNK_ROWS])


def _column_texts(dialect: Dialect, table: Table, names: list[str]) -> _Columns:
    """For each of the columns `names`, how a row's value is taken and made COPY text."""
    return [(operator.itemgetter(name), _column_text(table.c[name].type, dialect)) for name in names]


def _copy_text(columns: _Columns, rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as COPY text, made a column at a time: each column's values through its own text
    function, then the lines joined by C code (`map`, `zip`, `str.join`), with no Python loop per
    row."""
    texts = [_texts(text, list(map(value, rows))) for value, text in columns]
    return "\n".join(map("\t".join, zip(*texts, strict=True))) + "\n"


def _texts(text: CopyText, values: list[Any]) -> Iterable[str]:
    """`text` of each of a column's values, made once for each distinct object: a batch's rows
    share most of theirs (the company, None, enum members, a device's data in each of its events;
    half a batch's values). The objects are told apart by `id`, in C; `values` keeps them alive."""
    keys = list(map(id, values))
    distinct = dict(zip(keys, values, strict=True))
    if len(distinct) == len(keys):
        return map(text, values)
    made = dict(zip(distinct, map(text, distinct.values()), strict=True))
    return map(made.__getitem__, keys)


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


def _check_companies(session: Session, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Each row names its company: the bound one in a bound session, any in a session across
    companies; a session bound to none writes nothing (`company_named` says which)."""
    for company in {row.get("company_id") for row in rows}:
        if company is None:
            raise TenantScopeError(f"a new row of {table.name} names no company")
        company_named(session, company)


_NULL = "\\N"


def _escaped(text: str) -> str:
    """`text` as a value of COPY's text format, whose separators and escape are backslashed."""
    if "\\" in text or "\t" in text or "\n" in text or "\r" in text:
        return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return text


def _boolean(value: bool) -> str:
    return "t" if value else "f"


# The COPY text of a bound value, by its type (as psycopg's text dumpers write it).
_TEXT_OF: dict[type, Callable[[Any], str]] = {
    str: _escaped,
    uuid.UUID: str,
    int: str,
    float: repr,
    Decimal: str,
    bool: _boolean,
    datetime: datetime.isoformat,
    date: date.isoformat,
}


def _text(value: Any) -> str:
    """The COPY text of a bound value (None is NULL; a str enum member, its value)."""
    if value is None:
        return _NULL
    text_of = _TEXT_OF.get(type(value))
    if text_of is None:
        text_of = next((text_of for kind, text_of in _TEXT_OF.items() if isinstance(value, kind)), None)
        if text_of is None:
            raise TypeError(f"no COPY text for a value of type {type(value).__name__}")
    return text_of(value)


def _uuid_text(value: Any) -> str:
    """A UUID column's value: its 32 digits, which PostgreSQL reads without hyphens too."""
    return value.hex if type(value) is uuid.UUID else _text(value)


CopyText = Callable[[Any], str]
# For each column of a COPY: how a row's value is taken, and how it is made COPY text.
_Columns = list[tuple[Callable[[Mapping[str, Any]], Any], CopyText]]


_EMPTY_JSON: dict[type, str] = {list: "[]", dict: "{}"}


def take_turn(session: Session, model: type[Base]) -> None:
    """Wait until no other batch of this session's company is writing rows of `model` (held until the
    transaction ends; PostgreSQL only: SQLite's writers take turns anyway). Two batches naming the
    same unique values in different orders (serial numbers, emails) would otherwise each wait for
    the other's row of the unique index, a deadlock: one was undone and answered 503, not the 422
    its taken values call for. Taking turns, the second finds the first's rows and says which."""
    if session.get_bind().dialect.name == "postgresql":
        key = f"bulk:{model.__tablename__}:{company_of(session)}"
        session.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(key, 0))))


def _column_text(column_type: TypeEngine[Any], dialect: Dialect) -> CopyText:
    """A column's values as COPY text, each through the column type's bind processing (if any)."""
    process = column_type.dialect_impl(dialect).bind_processor(dialect)
    if process is None:
        return _uuid_text if isinstance(column_type, Uuid) else _text
    if isinstance(column_type, UTCDateTime):

        def utc_text(value: Any) -> str:
            # A time in UTC already (every time the service makes) is its own bound value, written
            # as the answers write it (format_timestamp's fast path), which PostgreSQL reads too.
            if type(value) is datetime and value.tzinfo is UTC:
                return format_timestamp(value)
            return _text(process(value))

        return utc_text
    if not isinstance(column_type, JSON):
        return lambda value: _text(process(value))

    def json_text(value: Any) -> str:
        if not value and type(value) in _EMPTY_JSON:  # most documents and other details
            return _EMPTY_JSON[type(value)]
        wrapped = process(value)  # psycopg's Json, or None for SQL NULL
        if wrapped is None:
            return _NULL
        obj = wrapped.obj
        return _escaped(obj.text if type(obj) is JsonText else to_json(obj).decode())

    return json_text
