"""The employee list as a CSV file: the list's fields, one row per employee; `departments` holds
the names of the employee's departments separated by "; ". What an employee holds and ordered
(`equipment`, `orders`) are not columns: the single retrieve shows them."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from outfitter.csvio.writer import CHUNK_ROWS, csv_text, record_cells, stream_chunks
from outfitter.customfields.cells import custom_cells
from outfitter.people.repository import EmployeeRepository
from outfitter.people.service import EmployeeFilters, employee_out

COLUMNS = (
    "id",
    "first_name",
    "last_name",
    "email",
    "personal_email",
    "phone",
    "country",
    "country_code",
    "currency_code",
    "landmark",
    "last_login",
    "job_title",
    "tax_number",
    "employment_type",
    "level",
    "status",
    "address",
    "departments",
    "created_at",
)
Keyset = tuple[datetime, uuid.UUID]


def employee_chunks(
    open_session: Callable[[], Session],
    filters: EmployeeFilters,
    custom_keys: Sequence[str] = (),
    sensitive_keys: Sequence[str] = (),
) -> Iterator[str]:
    """The filtered list, newest first, chunk by chunk (each its own short read), as CSV text; a
    column per custom field after the list's (`custom_keys`, then `sensitive_keys` if any)."""

    def read(session: Session, after: Keyset | None) -> tuple[list[Mapping[str, Any]], Keyset | None]:
        repository = EmployeeRepository(session)
        listing = repository.listing(
            filters.country_id, filters.department_id, filters.search, filters.custom
        )
        employees = repository.chunk(listing, after, CHUNK_ROWS)
        departments = repository.departments_of([employee.id for employee in employees])
        records: list[Mapping[str, Any]] = []
        for employee in employees:
            held = departments.get(employee.id, [])
            record = employee_out(employee, employee.country, held).model_dump()
            record["departments"] = "; ".join(department.name for department in held)
            record["custom_cells"] = custom_cells(employee.custom_fields, custom_keys) + (
                custom_cells(employee.sensitive_fields, sensitive_keys) if sensitive_keys else []
            )
            records.append(record)
        last = (employees[-1].created_at, employees[-1].id) if len(employees) == CHUNK_ROWS else None
        return records, last

    def render(records: Sequence[Mapping[str, Any]]) -> str:
        cells = record_cells(COLUMNS, records)
        return csv_text(row + record["custom_cells"] for row, record in zip(cells, records, strict=True))

    return stream_chunks(open_session, read, render)
