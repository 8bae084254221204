"""Spreadsheet exports: records streamed as CSV, chunk after chunk, in constant memory.

The request's unit of work has committed and closed its session before the first byte is sent
(http.unit_of_work), so a streamed answer reads through sessions of its own: `stream_chunks`
opens one per chunk (a short read, bound to the token's company like the request's), closes it,
and yields the chunk's CSV lines, reading the next chunk meanwhile. Chunks follow each other by
keyset (the last row's sort key), so each costs the same whatever its depth, and the memory held
is two chunks', whatever the total. Each chunk is its own snapshot: a row written meanwhile may
or may not appear.

Python's `csv` module writes the lines (quoting, embedded separators and line breaks). A cell a
spreadsheet would run as a formula (starting with `=`, `+`, `-`, `@`, a tab or a carriage return,
as OWASP lists them) is written with a leading `'`, which spreadsheets show as text. A cell that
itself starts with `'` gets one too, so that the import, which drops one leading `'` before either,
reads back exactly what was exported (`'=` is written `''=`).
"""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from decimal import Decimal
from enum import Enum
from typing import Any, TypeVar

from fastapi.responses import StreamingResponse
from sqlalchemy.orm import Session

from outfitter.core.timestamps import format_timestamp

CHUNK_ROWS = 1000
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
ESCAPED_STARTS = (*FORMULA_STARTS, "'")  # the cells written behind a `'`
CSV_MEDIA_TYPE = "text/csv; charset=utf-8"
# The 200 of an export operation in the OpenAPI document.
CSV_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A CSV file: a header row, then one row per record",
        "content": {"text/csv": {"schema": {"type": "string"}}},
    }
}

CursorT = TypeVar("CursorT")
RowT = TypeVar("RowT")


def cell(value: Any) -> str:
    """A value as the API writes it in JSON, as one CSV cell, safe against formula injection."""
    if isinstance(value, str):  # most cells: checked first, the export's hot path
        text = value
    elif value is None:
        text = ""
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, datetime):
        text = format_timestamp(value)
    elif isinstance(value, Decimal):
        text = format(value, "f")
    elif isinstance(value, Enum):
        text = str(value.value)
    elif isinstance(value, uuid.UUID | int | float):
        text = str(value)
    else:
        text = json.dumps(value, default=str)
    return "'" + text if text.startswith(ESCAPED_STARTS) else text


def flattened(record: Mapping[str, Any], path: Sequence[str]) -> Any:
    """`record`'s value at a column's path (`("specs", "memory")`); None if absent."""
    value: Any = record
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


_ESCAPED_FIRST = frozenset(ESCAPED_STARTS)


def escaped(text: str | None) -> str:
    """`cell` for a value already written as text (None: an empty cell): the export's hot path,
    one test per cell."""
    if not text:
        return ""
    return "'" + text if text[0] in _ESCAPED_FIRST else text


def record_cells(columns: Sequence[str], records: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Records (as the API writes them in JSON) as CSV rows, each column's value found by its
    dotted path (`specs.memory` is specs, then memory)."""
    paths = [tuple(column.split(".")) for column in columns]
    return [[cell(flattened(record, path)) for path in paths] for record in records]


def csv_text(rows: Iterable[Sequence[str]]) -> str:
    """Rows of cells (see `cell`) as CSV lines, each ended by CRLF."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(rows)
    return buffer.getvalue()


def csv_lines(columns: Sequence[str], chunks: Iterator[str]) -> Iterator[bytes]:
    """The header row, then each chunk's lines (see `csv_text`) as one piece of UTF-8."""
    yield csv_text([columns]).encode()
    for chunk in chunks:
        yield chunk.encode()


def stream_chunks(
    open_session: Callable[[], Session],
    read_chunk: Callable[[Session, CursorT | None], tuple[Sequence[RowT], CursorT | None]],
    render: Callable[[Sequence[RowT]], str],
) -> Iterator[str]:
    """Chunks read by `read_chunk(session, after)` (which answers its rows and the cursor of the
    next chunk, None at the end), each in a session of its own, closed before the rows are
    rendered as CSV lines by `render`.

    The next chunk is read while this one is rendered: a thread of the export's own reads it, so
    the database's part of each chunk (a third of an export's time) overlaps the CSV writing of
    the one before (docs/equipment-performance.md has the figures). The
    rows are independent of their session (plain rows, or records made in it), and at most two
    chunks are held at a time, whatever the total."""

    def read(after: CursorT | None) -> tuple[Sequence[RowT], CursorT | None]:
        with open_session() as session:
            return read_chunk(session, after)

    reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="outfitter-export")
    try:
        pending = reader.submit(read, None)
        while True:
            rows, after = pending.result()
            if after is not None:
                pending = reader.submit(read, after)
            if rows:
                yield render(rows)
            if after is None:
                return
    finally:
        # A stream closed early (the client went away) lets the read under way end on its own,
        # closing its session: whichever thread closes the stream (the event loop's) does not wait.
        reader.shutdown(wait=False, cancel_futures=True)


def csv_response(filename: str, columns: Sequence[str], chunks: Iterator[str]) -> StreamingResponse:
    return StreamingResponse(
        csv_lines(columns, chunks),
        media_type=CSV_MEDIA_TYPE,
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
