"""COPY on PostgreSQL: a batch of rows of one table as COPY text, and the COPY that writes it.

The text is made here, a column at a time (`column_text`), rather than row by row through
psycopg's `write_row`, and once for each distinct object in a column (`_texts`: the company, None,
an enum member, shared data): each bound value becomes the text psycopg's text dumper would send
(timestamps in ISO 8601 with their offset, by `format_timestamp` when in UTC, decimals as `str`),
except JSON, which is serialized in Rust (pydantic_core), once for the events of one device, which
share its data, and not at all when the value is JSON text already (`JsonText`: an event's data is
its subject's rendered answer, a delivery's payload embeds it). The text is the same JSON, compact
and UTF-8 (the columns are `json`: read back, it is equal). UUID columns take the 32 digits without
hyphens, which PostgreSQL reads as well. docs/equipment-performance.md has what each choice saves.

Rows are complete: COPY runs no Python-side column defaults (`complete_columns`). The COPY is
announced to the engine's `before_cursor_execute` listeners like any statement (statement counts
see it). Which rows may be written is db.company_writes' to say: this module only writes them.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from pydantic_core import to_json
from sqlalchemy import JSON, Connection, Dialect, Table, Uuid
from sqlalchemy.exc import DBAPIError
from sqlalchemy.types import TypeEngine

from outfitter.core.timestamps import format_timestamp
from outfitter.db.base import UTCDateTime
from outfitter.db.session import JsonText

# Below this many rows one INSERT costs less than a COPY's two round trips.
COPY_FROM = 20
COPY_CHUNK_ROWS = 250  # rows of text handed to the COPY at a time: the server starts on the first


def copied(connection: Connection, rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether `rows` are written by COPY rather than an INSERT."""
    return connection.dialect.name == "postgresql" and len(rows) >= COPY_FROM


def complete_columns(table: Table, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The rows' column names, once none is found to leave out a column with a default (which
    COPY would not run)."""
    names = list(rows[0])
    missing = [column.name for column in table.c if column.default is not None and column.name not in names]
    if missing:
        raise ValueError(f"rows of {table.name} leave out {', '.join(missing)}, which have defaults")
    return names


def copy_rows(
    connection: Connection, table: Table, names: list[str], rows: Sequence[Mapping[str, Any]]
) -> None:
    """Write `rows` (their columns `names`) into `table` by one COPY."""
    with copying(connection, copy_statement(connection.dialect, table, names)) as copy:
        for chunk in copy_chunks(connection.dialect, table, names, rows):
            copy.write(chunk)


def copy_statement(dialect: Dialect, table: Table, names: list[str]) -> str:
    quote = dialect.identifier_preparer.quote
    return (
        f"COPY {dialect.identifier_preparer.format_table(table)} "
        f"({', '.join(quote(name) for name in names)}) FROM STDIN"
    )


@contextmanager
def copying(connection: Connection, statement: str) -> Iterator[Any]:
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


def copy_chunks(
    dialect: Dialect, table: Table, names: list[str], rows: Sequence[Mapping[str, Any]]
) -> Iterator[str]:
    """The rows as COPY text (a line each, the columns `names`), COPY_CHUNK_ROWS lines at a time."""
    columns = column_texts(dialect, table, names)
    for start in range(0, len(rows), COPY_CHUNK_ROWS):
        yield copy_text(columns, rows[start : start + COPY_CHUNK_ROWS])


def column_texts(dialect: Dialect, table: Table, names: list[str]) -> CopyColumns:
    """For each of the columns `names`, how a row's value is taken and made COPY text."""
    return [(operator.itemgetter(name), _column_text(table.c[name].type, dialect)) for name in names]


def copy_text(columns: CopyColumns, rows: Sequence[Mapping[str, Any]]) -> str:
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
CopyColumns = list[tuple[Callable[[Mapping[str, Any]], Any], CopyText]]


_EMPTY_JSON: dict[type, str] = {list: "[]", dict: "{}"}


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
