"""Employees from a CSV file: each row the body of POST /client/employees, the rules of the bulk
create (`bulk.create_validated`, the same code), all or nothing."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter
from sqlalchemy.orm import Session

from outfitter.core.errors import ValidationFailed
from outfitter.csvio.reader import Progress, analyze_if_many, merged, read_rows, validate_rows
from outfitter.models import Employee
from outfitter.people import bulk
from outfitter.people.schemas import EmployeeCreate
from outfitter.people.service import employee_fields
from outfitter.tenants.actor import Actor

COLUMNS = tuple(name for name in EmployeeCreate.model_fields if name != "custom_fields")
_ROW = TypeAdapter(EmployeeCreate)
REQUIRED = tuple(name for name, field in EmployeeCreate.model_fields.items() if field.is_required())
# A file the import takes, for the OpenAPI document.
EXAMPLE = (
    "first_name,last_name,email,country_id,phone,address\n"
    "Ada,Obi,ada.obi@example.com,NG,+234 801 234 5678,1 Marina\n"
    "Wanjiru,Kamau,wanjiru.kamau@example.com,Kenya,+254 700 000000,2 Moi Avenue\n"
)


def import_employees(
    session: Session, actor: Actor, data: bytes, *, dry_run: bool, progress: Progress | None = None
) -> dict[str, Any]:
    """Create the file's employees, or with `dry_run` only check them: what was (would be) created."""
    # A column per custom field (`custom_fields.badge`), each cell read as text ("42", "true", "a|b").
    columns = (*COLUMNS, *(f"custom_fields.{key}" for key in employee_fields(session).definitions))
    rows = read_rows(data, columns, progress, required=REQUIRED)
    valid, errors = validate_rows(rows, _ROW, columns)
    try:
        created = bulk.create_validated(
            session, valid, errors, write=not dry_run, actor=actor.name, from_text=True
        )
    except ValidationFailed as failure:
        raise ValidationFailed.fields(merged({}, failure)) from None
    if dry_run:
        return {"dry_run": True, "count": len(valid), "ids": []}
    analyze_if_many(session, Employee, len(created))
    return {"dry_run": False, "count": len(created), "ids": [employee.id for employee in created]}
