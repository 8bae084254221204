"""New rows of company-owned tables written as Core statements, not ORM objects, in the session's
own transaction: many rows of one table in one go (`insert_rows`: COPY on PostgreSQL from COPY_FROM
rows, an executemany otherwise), or one row unless a unique constraint refuses it
(`insert_unless_taken`, the single creates' hot path).

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

The COPY's text is written here, a line per row (`_column_text`), rather than row by row through
psycopg's `write_row`: each bound value becomes the text psycopg's text dumper would send
(timestamps in ISO 8601 with their offset, decimals as `str`), except JSON, which is
serialized in Rust (pydantic_core, a third of `json.dumps`'s time: the events of a 10,000-row
import carry 15,000 rendered devices), and once for the events of one device, which share its data.
The text is the same JSON, compact and UTF-8 (the columns are `json`: read back, it is equal).
UUID columns take the 32 digits without hyphens, which PostgreSQL reads as well.
"""

from __future__ import annotations

import functools
import gc
import operator
import threading
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from pydantic_core import to_json
from sqlalchemy import JSON, ColumnElement, Dialect, Insert, Table, Uuid, any_, bindparam
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import QueryableAttribute, Session
from sqlalchemy.types import TypeEngine

from outfitter.core.tenancy import TenantScopeError, company_named
from outfitter.db.session import unless_conflicting

# Below this many rows one INSERT costs less than a COPY's two round trips.
COPY_FROM = 20
COPY_CHUNK_ROWS = 2000  # rows of text handed to the COPY at a time


def insert_rows(session: Session, model: type[Any], rows: Sequence[Mapping[str, Any]]) -> None:
    """Write `rows` (dicts with the same keys, each naming its company) into `model`'s table."""
    if not rows:
        return
    table: Table = model.__table__
    _check_companies(session, table, rows)
    names = list(rows[0])
    missing = [column.name for column in table.c if column.default is not None and column.name not in names]
    if missing:
        raise ValueError(f"rows of {table.name} leave out {', '.join(missing)}, which have defaults")
    session.flush()  # what the ORM holds (the rows these may refer to) is written first
    connection = session.connection()
    dialect = connection.dialect
    if len(rows) == 1:  # one row: a plain execute, not an executemany's batching
        connection.execute(table.insert(), dict(rows[0]))
        return
    if dialect.name != "postgresql" or len(rows) < COPY_FROM:
        connection.execute(table.insert(), list(rows))
        return
    columns = [_column_text(table.c[name].type, dialect) for name in names]
    quote = dialect.identifier_preparer.quote
    statement = (
        f"COPY {dialect.identifier_preparer.format_table(table)} "
        f"({', '.join(quote(name) for name in names)}) FROM STDIN"
    )
    driver = connection.connection.driver_connection
    assert driver is not None
    try:
        with driver.cursor() as cursor:
            connection.dispatch.before_cursor_execute(connection, cursor, statement, (), None, False)
            with cursor.copy(statement) as copy:
                for chunk in _copy_chunks(rows, names, columns):
                    copy.write(chunk)
    except dialect.loaded_dbapi.Error as error:  # raised as SQLAlchemy raises it for an INSERT
        raise DBAPIError.instance(statement, None, error, dialect.loaded_dbapi.Error) from error


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


@functools.cache
def _insert_unless_taken(table: Table, unique: tuple[str, ...], dialect: str) -> Insert:
    statement: Insert = unless_conflicting(table, dialect, list(unique)).returning(table.c.id)
    return statement


def _copy_chunks(
    rows: Sequence[Mapping[str, Any]], names: list[str], columns: list[CopyText]
) -> Iterator[str]:
    """The rows as COPY text (a line each, the columns `names`), COPY_CHUNK_ROWS lines at a time."""
    values = operator.itemgetter(*names) if len(names) > 1 else lambda row: (row[names[0]],)
    for start in range(0, len(rows), COPY_CHUNK_ROWS):
        yield "".join(
            [
                "\t".join([text(value) for text, value in zip(columns, values(row), strict=True)]) + "\n"
                for row in rows[start : start + COPY_CHUNK_ROWS]
            ]
        )


def one_of(session: Session, column: QueryableAttribute[Any], values: Collection[Any]) -> ColumnElement[bool]:
    """`column IN values` for a batch's values: one array parameter on PostgreSQL, where an IN of
    10,000 bound values costs more to compile and send than the query costs to run."""
    if session.get_bind().dialect.name == "postgresql":
        return column == any_(bindparam(None, list(values), type_=ARRAY(column.type)))
    return column.in_(values)


_paused_batches = 0
_collector_was_enabled = False
_pause_lock = threading.Lock()


@contextmanager
def collection_paused() -> Iterator[None]:
    """Hold the cyclic garbage collector off while a batch builds its rows and answers. Those are
    hundreds of thousands of live objects, none of them cyclic garbage (reference counting frees
    them), and every full collection would walk them all again: a fifth of a 10,000-row import's
    CPU. The collector runs again once the last batch under way in the process has ended."""
    global _paused_batches, _collector_was_enabled
    with _pause_lock:
        if _paused_batches == 0:
            _collector_was_enabled = gc.isenabled()
            gc.disable()
        _paused_batches += 1
    try:
        yield
    finally:
        with _pause_lock:
            _paused_batches -= 1
            if _paused_batches == 0 and _collector_was_enabled:
                gc.enable()


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


def _column_text(column_type: TypeEngine[Any], dialect: Dialect) -> CopyText:
    """A column's values as COPY text, each through the column type's bind processing (if any).
    A JSON value that the row before also held (the events of one device, in a row) is not
    serialized again; the rows hold it for as long as the COPY runs, so its id is not reused."""
    process = column_type._cached_bind_processor(dialect)
    if process is None:
        return _uuid_text if isinstance(column_type, Uuid) else _text
    if not isinstance(column_type, JSON):
        return lambda value: _text(process(value))
    last_id, last_text = 0, ""

    def json_text(value: Any) -> str:
        nonlocal last_id, last_text
        wrapped = process(value)  # psycopg's Json, or None for SQL NULL
        if wrapped is None:
            return _NULL
        if id(wrapped.obj) != last_id:
            last_id, last_text = id(wrapped.obj), _escaped(to_json(wrapped.obj).decode())
        return last_text

    return json_text
