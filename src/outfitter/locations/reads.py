"""What the equipment list reads of locations, as read plans (db.reads): the path a location
filter takes everything beneath, and the condition that matches devices there."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, select
from sqlalchemy.orm import InstrumentedAttribute

from outfitter.core.errors import ValidationFailed
from outfitter.db.reads import Read, ReadPlan
from outfitter.db.tenancy import parse_uuid
from outfitter.locations.repository import UNKNOWN_LOCATION
from outfitter.models import Location

_PATH = select(Location.path).where(Location.id == bindparam("location_id"), Location.deleted_at.is_(None))


def subtree_path_plan(value: str, field: str) -> ReadPlan[str]:
    """The path of the live location `value` names, or 422 naming `field`."""
    parsed = parse_uuid(value.strip())
    rows = (yield Read(_PATH, {"location_id": parsed})) if parsed is not None else ()
    if not rows:
        raise ValidationFailed.field(field, UNKNOWN_LOCATION)
    return rows[0].path  # type: ignore[no-any-return]


def in_subtree(column: InstrumentedAttribute[Any], parameter: str) -> ColumnElement[bool]:
    """`column` (a device's location) is at or beneath the location whose path is bound as
    `parameter` (its end as `<parameter>_end`): one range of the locations' path index, then the
    devices' location index for each location in it."""
    beneath = select(Location.id).where(
        Location.path >= bindparam(parameter, type_=Location.path.type),
        Location.path < bindparam(f"{parameter}_end", type_=Location.path.type),
    )
    return and_(column.is_not(None), column.in_(beneath))
