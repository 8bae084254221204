"""Equipment from a CSV file: each row the body of POST /client/equipment, the rules of the bulk
registration (checked for every row before anything is written), all or nothing."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy.orm import Session

from outfitter.core.errors import ValidationFailed
from outfitter.csvio.reader import (
    MAX_CELL_NESTING,
    Progress,
    analyze_if_many,
    merged,
    nesting_depth,
    read_rows,
    validate_rows,
)
from outfitter.equipment import bulk, service
from outfitter.equipment.schemas import EquipmentCreate, SpecsIn
from outfitter.models import Equipment
from outfitter.tenants.actor import Actor

COLUMNS = (
    *(name for name in EquipmentCreate.model_fields if name not in ("specs", "custom_fields")),
    *(f"specs.{name}" for name in SpecsIn.model_fields),
)
_ROW = TypeAdapter(EquipmentCreate)
REQUIRED = tuple(name for name, field in EquipmentCreate.model_fields.items() if field.is_required())
# A file the import takes, for the OpenAPI document.
EXAMPLE = (
    "title,serial_number,type,country,currency,purchase_price,specs.memory,status\n"
    "MacBook Pro 14,C02XK0ABJGH5,Laptop,NG,USD,1999.00,16GB,Unassigned\n"
    "iPhone 15,F2LZK1ABN72Q,Phones,Kenya,USD,799.00,,In_Storage\n"
)


def _other_details(fields: dict[str, Any]) -> str | None:
    """`other_details` is a list: a cell holds a JSON array (as the export writes it) or one item.
    Answers what is wrong with a cell nested too deep to be read (and drops it), else None."""
    value = fields.get("other_details")
    if not isinstance(value, str) or not value.lstrip().startswith("["):
        if isinstance(value, str):
            fields["other_details"] = [value]
        return None
    depth = nesting_depth(value)
    if depth > MAX_CELL_NESTING:
        del fields["other_details"]
        return (
            f"This cell's JSON is nested {depth:,} levels deep; give a list of texts "
            f'such as ["charger", "bag"] (at most {MAX_CELL_NESTING} levels).'
        )
    with contextlib.suppress(ValueError):  # left a string: validation says a list is expected
        fields["other_details"] = json.loads(value)
    return None


def import_equipment(
    session: Session, actor: Actor, data: bytes, *, dry_run: bool, progress: Progress | None = None
) -> dict[str, Any]:
    """Register the file's devices, or with `dry_run` only check them: what was (would be) created."""
    return _import(session, actor.name, data, dry_run=dry_run, progress=progress)


def _import(
    session: Session, actor: str, data: bytes, *, dry_run: bool, progress: Progress | None
) -> dict[str, Any]:
    # A column per custom field (`custom_fields.imei`), each cell read as text ("42", "true", "a|b").
    columns = (*COLUMNS, *(f"custom_fields.{key}" for key in service.device_fields(session).definitions))
    rows = read_rows(data, columns, progress, required=REQUIRED)
    unreadable: dict[str, list[str]] = {}
    for row in rows:
        problem = _other_details(row.fields)
        if problem is not None:
            unreadable[f"{row.path}.other_details"] = [problem]
    valid, errors = validate_rows(rows, _ROW, columns)
    errors = {**unreadable, **errors}
    try:  # the numbers already taken are left to the write, unless there is something to report
        checked = bulk.check_devices(session, valid, serials_taken=dry_run or bool(errors), from_text=True)
    except ValidationFailed as failure:
        raise ValidationFailed.fields(merged(errors, failure)) from None
    if errors:
        raise ValidationFailed.fields(merged(errors, None))
    if dry_run:
        return {"dry_run": True, "count": len(checked), "ids": []}
    ids = bulk.insert_devices(session, actor, checked)
    analyze_if_many(session, Equipment, len(ids))
    return {"dry_run": False, "count": len(ids), "ids": ids}
