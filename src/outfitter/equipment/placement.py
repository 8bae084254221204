"""Where a device is: its current location follows its status (`landing`), and every change of it
writes a `moved` history entry (`place`) and, through `events.record_equipment_events`, an
`equipment.moved` event. The rules, in docs/locations.md ("Where a device is"):

- an Assigned device is with its employee, and a Sold or Archived one has left: no location;
- a location given with the move wins;
- put in storage, a device lands at the company's default storage location (if it has one; else
  it stays where it is, or lands at its home location);
- back from an employee (Unassigned), it lands at its home location;
- otherwise (out of storage, Unassigned) it stays where it is.
"""

from __future__ import annotations

import uuid
from enum import Enum
from typing import Any, Final

from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.core.errors import Conflict, ValidationFailed
from outfitter.db.tenancy import company_of
from outfitter.equipment.schemas import EquipmentCreate, EquipmentPatch
from outfitter.locations.repository import LocationRepository
from outfitter.locations.service import device_location
from outfitter.models import Employee, Equipment, EquipmentEvent, EquipmentHistory, EquipmentStatus, Location


class _Keep(Enum):
    KEEP = "keep"


KEEP: Final = _Keep.KEEP  # no location given: `landing` decides
GivenLocation = uuid.UUID | None | _Keep
NOT_PLACED = (EquipmentStatus.ASSIGNED, EquipmentStatus.SOLD, EquipmentStatus.ARCHIVED)
ASSIGNED_HAS_NO_LOCATION = (
    "An Assigned device is with its employee, and a Sold or Archived one has left: it has no location. "
    "Move it to Unassigned or In_Storage with the location_id."
)


def default_storage_id(session: Session, company_id: uuid.UUID) -> uuid.UUID | None:
    """The company's default storage location. Named explicitly: payments settle across companies."""
    statement = select(Location.id).where(
        Location.company_id == company_id,
        Location.is_default_storage.is_(True),
        Location.deleted_at.is_(None),
    )
    return session.scalar(statement)


def landing(
    session: Session,
    device: Equipment | dict[str, Any],
    from_status: EquipmentStatus | None,
    to_status: EquipmentStatus,
    given: GivenLocation = KEEP,
    default_storage: GivenLocation = KEEP,
) -> uuid.UUID | None:
    """The location a device has after a move from `from_status` (None: a new device) to `to_status`
    (`default_storage`: the company's, when the caller has read it already)."""

    def value(name: str) -> Any:
        return device[name] if isinstance(device, dict) else getattr(device, name)

    if to_status in NOT_PLACED:
        return None
    if given is not KEEP:
        return given
    current: uuid.UUID | None = value("location_id")
    home: uuid.UUID | None = value("home_location_id")
    if to_status == EquipmentStatus.IN_STORAGE:
        if default_storage is KEEP:
            default_storage = default_storage_id(session, value("company_id"))
        return default_storage or current or home
    if from_status == EquipmentStatus.ASSIGNED:
        return home
    return current


def place(session: Session, equipment: Equipment, location_id: uuid.UUID | None, actor: str) -> bool:
    """Put `equipment` at `location_id` (None: nowhere), writing its `moved` entry; False if it
    is there already."""
    if location_id == equipment.location_id:
        return False
    from_id = equipment.location_id
    names = LocationRepository(session).named({each for each in (from_id, location_id) if each is not None})

    def brief(each: uuid.UUID | None) -> dict[str, str] | None:
        return None if each is None else {"id": str(each), "name": names.get(each, "")}

    session.add(
        EquipmentHistory(
            company_id=equipment.company_id,
            equipment_id=equipment.id,
            event_type=EquipmentEvent.MOVED,
            seq=equipment.next_history_seq(),
            actor=actor,
            payload={"from_location": brief(from_id), "to_location": brief(location_id)},
        )
    )
    equipment.location_id = location_id
    equipment.note_moved()
    return True


def creation_locations(session: Session, body: EquipmentCreate) -> dict[str, uuid.UUID | None]:
    """A new device's location and home location (422 naming the field): where it lands when its
    status places it and none is given (landing)."""
    if body.location_id is not None and body.status == EquipmentStatus.ASSIGNED:
        raise ValidationFailed.field("location_id", ASSIGNED_HAS_NO_LOCATION)
    found = {
        field: device_location(session, value, field).id
        for field in ("location_id", "home_location_id")
        if (value := getattr(body, field)) is not None
    }
    device = {"company_id": company_of(session), "location_id": None, **found}
    device.setdefault("home_location_id", None)
    given = found.get("location_id", KEEP)
    return {
        "location_id": landing(session, device, None, body.status, given),
        "home_location_id": device["home_location_id"],
    }


def given_location(
    session: Session,
    equipment: Equipment,
    body: EquipmentPatch,
    fields: set[str],
    target: tuple[EquipmentStatus, Employee | None] | None,
) -> GivenLocation:
    """The location a PATCH gives (checked: 422 naming it), or KEEP."""
    if "location_id" not in fields:
        return KEEP
    status = target[0] if target is not None else equipment.status
    if body.location_id is None:
        return None
    if status in NOT_PLACED:
        if target is None:
            raise Conflict(f"Equipment is {status}. {ASSIGNED_HAS_NO_LOCATION}")
        raise ValidationFailed.field("location_id", ASSIGNED_HAS_NO_LOCATION)
    return device_location(session, body.location_id, "location_id").id
