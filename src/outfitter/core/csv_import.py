"""Spreadsheet imports: a CSV file read into rows, each validated like the JSON body it stands for.

The file is UTF-8, with or without a BOM (Excel writes one), its separator a comma or a semicolon
(Excel's in many locales), guessed from the header line. The header names the columns as the
fields of the JSON body, nested ones dotted (`specs.memory`). An empty cell leaves its field out;
a cell that our export escaped against formula injection (`'=...`) is read back unescaped. Every
error is keyed `rows.<line>.<column>`, `<line>` the file's own line number (the header is line 1),
so that a person can find it in their spreadsheet.
"""

from __future__ import annotations

import codecs
import csv
import io
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Query, Request
from pydantic import TypeAdapter, ValidationError

from outfitter.core.csv_export import FORMULA_STARTS
from outfitter.core.errors import ValidationFailed
from outfitter.core.schemas import QueryBool, Schema

MAX_IMPORT_BYTES = 10 * 1024 * 1024
MAX_IMPORT_ROWS = 10_000
CSV_REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "A CSV file (UTF-8, comma or semicolon) whose header names the create body's fields",
        # A file: generated clients take it as bytes (openapi-python-client's File).
        "content": {"text/csv": {"schema": {"type": "string", "format": "binary"}}},
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
    value = value.strip()
    if value.startswith("'") and value[1:].startswith(FORMULA_STARTS):
        return value[1:]  # our own export's escape, read back
    return value


def _nest(fields: dict[str, Any], column: str, value: str) -> None:
    *parents, name = column.split(".")
    for parent in parents:
        fields = fields.setdefault(parent, {})
    fields[name] = value


def read_rows(data: bytes, columns: Collection[str], progress: Progress | None = None) -> list[CsvRow]:
    """The file's data rows (blank lines skipped); 422 for a file that is not UTF-8, has no header,
    names an unknown column, has a row with more cells than the header, or too many rows."""
    text = _text(data)
    header_line = text.split("\n", 1)[0]
    delimiter = ";" if header_line.count(";") > header_line.count(",") else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        return _rows(reader, columns, progress)
    except csv.Error as error:  # a cell over the csv module's field size limit, and the like
        raise ValidationFailed.field(
            f"rows.{reader.line_num}", f"This line cannot be read as CSV: {error}."
        ) from None


def _rows(reader: Any, columns: Collection[str], progress: Progress | None) -> list[CsvRow]:
    header = [name.strip() for name in next(reader, [])]
    if not any(header):
        raise ValidationFailed.field("rows.1", "The file is empty: give a header row naming the columns.")
    errors: dict[str, list[str]] = {}
    known = ", ".join(columns)
    for position, name in enumerate(header, start=1):
        if not name:
            errors["rows.1"] = [f"Column {position} has no name; the columns are: {known}."]
        elif name not in columns:
            errors[f"rows.1.{name}"] = [f"Unknown column {name!r}; the columns are: {known}."]
        elif header.count(name) > 1:
            errors[f"rows.1.{name}"] = ["This column is named twice."]
    if errors:
        raise ValidationFailed.fields(errors)

    rows: list[CsvRow] = []
    line = reader.line_num + 1
    for cells in reader:
        if any(cell.strip() for cell in cells):
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
        line = reader.line_num + 1
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
                column = ".".join(location)
                if column not in columns:  # an item of a list column (`other_details.0`)
                    column = location[0] if location else "row"
                message = str(detail["msg"]).removeprefix("Value error, ")
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
    """The raw file (BodyLimitMiddleware has already held it to text/csv and MAX_IMPORT_BYTES)."""
    return await request.body()


CsvBody = Annotated[bytes, Depends(_csv_body)]
DryRun = Annotated[QueryBool, Query(description="Check every row and write nothing")]


def import_message(result: dict[str, Any], noun: str) -> str:
    if result["dry_run"]:
        return f"Dry run: {result['count']} {noun} would be created; nothing was written."
    return f"{result['count']} {noun} created successfully."
