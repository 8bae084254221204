"""Spreadsheet imports: a CSV file read into rows, each validated like the JSON body it stands for.

The file is UTF-8, with or without a BOM (Excel writes one), its separator a comma, a semicolon
(Excel's in many locales) or a tab (cells copied from a spreadsheet), guessed from the header line.
The header names the columns as the fields of the JSON body, nested ones dotted (`specs.memory`),
at most MAX_IMPORT_COLUMNS of them. A cell is the JSON body's string as it stands (spaces and tabs
included: the body's own rules strip what they strip); an empty or blank cell leaves its field out;
a cell that our export escaped (`'=...`, `''...`: one `'` before a formula's first character or
another `'`) is read back unescaped, so an export imports back exactly. Every error is keyed
`rows.<line>.<column>`, `<line>` the file's own line number (the header is line 1), so that a
person can find it in their spreadsheet; a quoted cell never closed is named by the line its row
starts on.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Query, Request
from pydantic import TypeAdapter, ValidationError
from sqlalchemy.orm import Session
from starlette.datastructures import UploadFile

from outfitter.core.errors import ValidationFailed, validation_message
from outfitter.core.schemas import QueryBool, Schema, counted
from outfitter.csvio.writer import ESCAPED_STARTS

MAX_IMPORT_BYTES = 10 * 1024 * 1024
# The csv module refuses a cell over 128 KiB by default, which an exported device's `other_details`
# (100 texts) can pass: any cell that fits in a file is read, and the fields' own limits judge it.
csv.field_size_limit(MAX_IMPORT_BYTES)
MAX_IMPORT_ROWS = 10_000
# Blank lines (or rows of empty cells) are skipped, but each costs a turn of the reader: a file of
# nothing else (10 MiB of newlines: 13 s of a server's CPU) is refused past this many.
MAX_BLANK_LINES = MAX_IMPORT_ROWS
MAX_IMPORT_COLUMNS = 200
MAX_HEADER_PROBLEMS = 20  # listed one by one; the rest are counted
MAX_CELL_NESTING = 32  # arrays and objects inside a JSON cell (`other_details`)
UPLOAD_FIELD = "file"
DELIMITERS = (",", ";", "\t")  # in order of preference when the header has as many of each


def csv_request_body(example: str) -> dict[str, Any]:
    """The import's body in the OpenAPI document, with `example`, a file the import accepts."""
    return {
        "requestBody": {
            "required": True,
            "description": (
                "A CSV file (UTF-8; comma, semicolon or tab) whose header names the create body's fields: "
                f"the body itself (text/csv), or a form upload in the field `{UPLOAD_FIELD}`"
            ),
            "content": {
                # A file: generated clients take it as bytes (openapi-python-client's File).
                "text/csv": {"schema": {"type": "string", "format": "binary"}, "example": example},
                # The form every HTTP client and generator knows (openapi-python-client keeps it).
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {
                            UPLOAD_FIELD: {
                                "type": "string",
                                "format": "binary",
                                "description": "The CSV file",
                            }
                        },
                        "required": [UPLOAD_FIELD],
                    }
                },
            },
        }
    }


ModelT = TypeVar("ModelT")


class ImportResult(Schema):
    """What an import created, or with `dry_run` would create (and then `ids` is empty)."""

    dry_run: bool
    count: int
    ids: list[uuid.UUID]


Progress = Callable[[int], None]


@dataclass(frozen=True)
class CsvRow:
    line: int  # where the row starts in the file (the header is line 1)
    fields: dict[str, Any]  # the non-empty cells, nested by their dotted column names

    @property
    def path(self) -> str:
        return f"rows.{self.line}"


def _text(data: bytes) -> str:
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValidationFailed.field(
            f"rows.{line}",
            "The file must be UTF-8 (with or without BOM): this line holds a byte that is not; "
            "save the spreadsheet as 'CSV UTF-8'.",
        ) from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise ValidationFailed.field(f"rows.{line}", "Must not contain NUL characters (\\u0000).")
    return text


def _cell(value: str) -> str:
    if value.startswith("'") and value[1:].startswith(ESCAPED_STARTS):
        return value[1:]  # our own export's escape, read back
    return value


def _nest(fields: dict[str, Any], column: str, value: str) -> None:
    *parents, name = column.split(".")
    for parent in parents:
        fields = fields.setdefault(parent, {})
    fields[name] = value


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def nesting_depth(text: str) -> int:
    """How deep the arrays and objects of a JSON text nest, counted without parsing it (a parser
    recurses, and a cell a thousand levels deep would exhaust the stack)."""
    depth = deepest = 0
    for bracket in _JSON_BRACKET.findall(_JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def read_rows(
    data: bytes, columns: Collection[str], progress: Progress | None = None, *, required: Collection[str] = ()
) -> list[CsvRow]:
    """The file's data rows (blank lines skipped); 422 for a file that is not UTF-8, has no header,
    names an unknown column or too many, lacks a `required` one, has a row with more cells than the
    header, a quoted cell never closed, too many rows or too many blank lines."""
    text = _text(data)
    header_line = text.split("\n", 1)[0]
    # the separator the header uses most: a comma unless semicolons (Excel in many locales) or tabs
    # (a spreadsheet's cells copied and pasted) outnumber it
    delimiter = max(DELIMITERS, key=header_line.count)
    # strict: a quote left open is an error at the end of the file, not a cell swallowing the rest
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    started = _LineTracker(reader)
    try:
        return _rows(reader, columns, required, progress, started)
    except csv.Error as error:  # a cell over the csv module's field size limit, and the like
        if "unexpected end of data" in str(error):
            raise ValidationFailed.field(
                f"rows.{started.line}",
                'This row opens a quoted cell (") that is never closed: close it, or double a quote '
                'that belongs to the text ("").',
            ) from None
        raise ValidationFailed.field(
            f"rows.{reader.line_num}", f"This line cannot be read as CSV: {error}."
        ) from None


class _LineTracker:
    """The line the row being read starts on (the reader's `line_num` is where it ends)."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.line = 1

    def __iter__(self) -> Iterator[list[str]]:
        while True:
            self.line = self.reader.line_num + 1
            cells = next(self.reader, None)
            if cells is None:
                return
            yield cells


def _header_errors(
    header: list[str], columns: Collection[str], required: Collection[str]
) -> dict[str, list[str]]:
    """What is wrong with the header (one pass: a header of thousands of columns costs its length),
    the first MAX_HEADER_PROBLEMS problems listed and the others counted. A required column missing
    is said once, here, rather than on every row."""
    known = ", ".join(columns)
    if len(header) > MAX_IMPORT_COLUMNS:
        return {
            "rows.1": [
                f"At most {MAX_IMPORT_COLUMNS} columns; this header names {len(header):,}. "
                f"The columns are: {known}."
            ]
        }
    problems: list[tuple[str, str]] = []
    counts = Counter(header)
    for position, name in enumerate(header, start=1):
        if not name:
            problems.append(("rows.1", f"Column {position} has no name; the columns are: {known}."))
        elif name not in columns:
            problems.append((f"rows.1.{name}", f"Unknown column {name!r}; the columns are: {known}."))
        elif counts[name] > 1:
            problems.append((f"rows.1.{name}", "This column is named twice."))
    for name in required:
        if name not in counts:
            problems.append((f"rows.1.{name}", f"The file has no {name!r} column, which every row needs."))
    errors: dict[str, list[str]] = {}
    for path, message in problems[:MAX_HEADER_PROBLEMS]:
        if message not in errors.get(path, []):
            errors.setdefault(path, []).append(message)
    if len(problems) > MAX_HEADER_PROBLEMS:
        rest = len(problems) - MAX_HEADER_PROBLEMS
        errors.setdefault("rows.1", []).append(f"And {rest:,} more problems in the header like these.")
    return errors


def _rows(
    reader: Any,
    columns: Collection[str],
    required: Collection[str],
    progress: Progress | None,
    lines: _LineTracker,
) -> list[CsvRow]:
    header = [name.strip() for name in next(reader, [])]
    if not any(header):
        raise ValidationFailed.field("rows.1", "The file is empty: give a header row naming the columns.")
    errors = _header_errors(header, columns, required)
    if errors:
        raise ValidationFailed.fields(errors)

    rows: list[CsvRow] = []
    blank = 0
    for cells in lines:
        line = lines.line
        if not any(cell.strip() for cell in cells):
            blank += 1
            if blank > MAX_BLANK_LINES:
                raise ValidationFailed.field(
                    "rows",
                    f"At most {MAX_BLANK_LINES:,} blank lines (or rows of empty cells) a file; this one "
                    f"has more (from line {line}): delete them.",
                )
        else:
            if len(cells) > len(header):
                errors[f"rows.{line}"] = [f"This row has {len(cells)} cells; the header names {len(header)}."]
            fields: dict[str, Any] = {}
            for name, value in zip(header, cells, strict=False):
                if value.strip():
                    _nest(fields, name, _cell(value))
            rows.append(CsvRow(line, fields))
            if len(rows) > MAX_IMPORT_ROWS:
                raise ValidationFailed.field(
                    "rows", f"At most {MAX_IMPORT_ROWS:,} rows a file; this one has more (from line {line})."
                )
            if progress is not None:
                progress(1)
    if errors:
        raise ValidationFailed.fields(errors)
    if not rows:
        raise ValidationFailed.field("rows", "The file has a header but no rows.")
    return rows


def validate_rows(
    rows: list[CsvRow], adapter: TypeAdapter[ModelT], columns: Collection[str]
) -> tuple[list[tuple[str, ModelT]], dict[str, list[str]]]:
    """Each row validated as the create body, keyed by its path: the valid ones, and the errors of
    the others keyed `rows.<line>.<column>`."""
    valid: list[tuple[str, ModelT]] = []
    errors: dict[str, list[str]] = {}
    for row in rows:
        try:
            valid.append((row.path, adapter.validate_python(row.fields)))
        except ValidationError as error:
            for detail in error.errors():
                location = [str(part) for part in detail["loc"]]
                column, message = ".".join(location), validation_message(detail)
                if column not in columns:  # an item of a list column: keyed by the column, named
                    message = f"{column}: {message}"  # in the message (`other_details.2: ...`)
                    column = location[0] if location else "row"
                errors.setdefault(f"{row.path}.{column}", []).append(message)
    return valid, errors


def merged(errors: dict[str, list[str]], failure: ValidationFailed | None) -> dict[str, list[str]]:
    """`errors` with those of `failure` (the batch rules), ordered by line."""
    combined = dict(errors)
    for path, messages in (failure.errors or {}).items() if failure else ():
        combined.setdefault(path, []).extend(messages)

    def line_of(path: str) -> int:
        part = path.split(".")[1] if path.count(".") else ""
        return int(part) if part.isdigit() else 0

    return dict(sorted(combined.items(), key=lambda item: line_of(item[0])))


async def _csv_body(request: Request) -> bytes:
    """The file: the raw body, or the form field `file` of a multipart upload (BodyLimitMiddleware
    has already held the body to these two types and to MAX_IMPORT_BYTES)."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "multipart/form-data":
        return await request.body()
    async with request.form(max_files=1, max_fields=10) as form:
        upload = form.get(UPLOAD_FIELD)
        if not isinstance(upload, UploadFile):
            raise ValidationFailed.field(
                UPLOAD_FIELD, f"Send the CSV file as the form's file field {UPLOAD_FIELD!r}."
            )
        return await upload.read()


CsvBody = Annotated[bytes, Depends(_csv_body)]
DryRun = Annotated[QueryBool, Query(description="Check every row and write nothing")]


# An import of at least this many rows, and a tenth of what the table's statistics count, has its
# table analyzed before it commits (below).
ANALYZE_FROM_ROWS = 1_000


def analyze_if_many(session: Session, model: type[Any], rows: int) -> None:
    """ANALYZE the table an import of `rows` rows wrote, on PostgreSQL, when they are many for what
    its statistics know: the planner then counts them at commit. A table never analyzed (a new
    company's first import, autovacuum not yet round) is planned as nearly empty: an export of
    10,000 devices just after importing 10,000 employees scanned the company's employees once per
    device. ANALYZE reads a sample (docs/equipment-performance.md has its cost); a large table,
    whose statistics a tenth more rows hardly move, is left to autovacuum (migration 0013). It
    blocks no read or write (only another ANALYZE of the table, until this commits)."""
    if rows < ANALYZE_FROM_ROWS or session.get_bind().dialect.name != "postgresql":
        return
    connection = session.connection()
    table = model.__tablename__
    known = connection.exec_driver_sql(
        f"SELECT reltuples FROM pg_class WHERE oid = '{table}'::regclass"
    ).scalar()
    if known is None or known < 0 or rows >= known / 10:  # -1: never analyzed
        connection.exec_driver_sql(f"ANALYZE {table}")


def import_message(result: dict[str, Any], one: str, many: str) -> str:
    """The answer's message: how many records of the noun (`one`, or `many`) were, or would be, created."""
    records = counted(result["count"], one, many)
    if result["dry_run"]:
        return f"Dry run: {records} would be created; nothing was written."
    return f"{records} created successfully."
