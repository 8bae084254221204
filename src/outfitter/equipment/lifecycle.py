"""The moves between equipment statuses, and the history entry every move writes.

The one place a status changes: services of every domain (equipment edits, payments fulfilment)
call `move` or `record_added`, so the rules and the history cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from outfitter.core.errors import Conflict, ValidationFailed
from outfitter.db.base import new_id, utcnow
from outfitter.equipment.placement import KEEP, GivenLocation, landing, place
from outfitter.models import Employee, Equipment, EquipmentEvent, EquipmentHistory, EquipmentStatus
from outfitter.people.repository import UNKNOWN_EMPLOYEE

ALLOWED_MOVES: dict[EquipmentStatus, frozenset[EquipmentStatus]] = {
    EquipmentStatus.UNASSIGNED: frozenset(
        {EquipmentStatus.ASSIGNED, EquipmentStatus.IN_STORAGE, EquipmentStatus.SOLD, EquipmentStatus.ARCHIVED}
    ),
    EquipmentStatus.ASSIGNED: frozenset(
        {EquipmentStatus.UNASSIGNED, EquipmentStatus.IN_STORAGE, EquipmentStatus.ARCHIVED}
    ),
    EquipmentStatus.IN_STORAGE: frozenset(
        {EquipmentStatus.ASSIGNED, EquipmentStatus.UNASSIGNED, EquipmentStatus.SOLD, EquipmentStatus.ARCHIVED}
    ),
    EquipmentStatus.SOLD: frozenset({EquipmentStatus.ARCHIVED}),
    EquipmentStatus.ARCHIVED: frozenset(),
}

EVENT_FOR_STATUS: dict[EquipmentStatus, EquipmentEvent] = {
    EquipmentStatus.ASSIGNED: EquipmentEvent.ASSIGNED,
    EquipmentStatus.UNASSIGNED: EquipmentEvent.UNASSIGNED,
    EquipmentStatus.IN_STORAGE: EquipmentEvent.MOVED_TO_STORAGE,
    EquipmentStatus.SOLD: EquipmentEvent.SOLD,
    EquipmentStatus.ARCHIVED: EquipmentEvent.ARCHIVED,
}
SYSTEM_ACTOR = "system"


def history_row(
    equipment: Equipment | dict[str, Any],
    event_type: EquipmentEvent,
    actor: str,
    seq: int,
    assignee: Employee | None,
    payload: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A history entry's columns, for a device as an ORM object or as the row of a batch."""
    company_id, equipment_id = (
        (equipment["company_id"], equipment["id"])
        if isinstance(equipment, dict)
        else (equipment.company_id, equipment.id)
    )
    return {
        "id": new_id(),
        "company_id": company_id,
        "equipment_id": equipment_id,
        "event_type": event_type,
        "event_date": utcnow(),
        "seq": seq,
        "assignee_id": assignee.id if assignee else None,
        "assignee_name": assignee.full_name if assignee else None,
        "actor": actor,
        "payload": payload,
    }


def _history(
    equipment: Equipment,
    event_type: EquipmentEvent,
    actor: str,
    assignee: Employee | None,
    payload: dict[str, Any] | None,
) -> EquipmentHistory:
    return EquipmentHistory(
        **history_row(equipment, event_type, actor, equipment.next_history_seq(), assignee, payload)
    )


def record_added(
    session: Session, equipment: Equipment, actor: str, payload: dict[str, Any] | None = None
) -> EquipmentHistory:
    """The `equipment_added` entry of a new device (flush the device first so it has an id)."""
    entry = _history(equipment, EquipmentEvent.EQUIPMENT_ADDED, actor, None, payload)
    session.add(entry)
    return entry


def refusal(equipment: Equipment, to_status: EquipmentStatus, assignee: Employee | None = None) -> str | None:
    """Why `equipment` cannot move to `to_status` (for `assignee`), or None when the move is allowed.

    The rule of a move, asked by `move` for one device and by bulk moves for each of theirs before
    any of them moves. Re-assigning an Assigned device to another employee is allowed."""
    from_status = equipment.status
    reassign = from_status == EquipmentStatus.ASSIGNED and to_status == EquipmentStatus.ASSIGNED
    if not reassign and to_status not in ALLOWED_MOVES.get(from_status, frozenset()):
        return f"Equipment cannot move from {from_status} to {to_status}."
    if reassign and assignee is not None and equipment.assignee_id == assignee.id:
        return f"Equipment is already assigned to {assignee.full_name}."
    return None


def registered(
    device: dict[str, Any], to_status: EquipmentStatus, actor: str, assignee: Employee | None
) -> list[dict[str, Any]]:
    """A new device's history rows, as `record_added` and then `move` (unless it stays Unassigned)
    write them for an ORM object, for the row of a batch (an Unassigned device's columns), which
    takes the move's status, assignee and status_changed_at."""
    entries = [history_row(device, EquipmentEvent.EQUIPMENT_ADDED, actor, 1, None)]
    if to_status == EquipmentStatus.UNASSIGNED:
        return entries
    if to_status not in ALLOWED_MOVES[EquipmentStatus.UNASSIGNED]:
        raise Conflict(f"Equipment cannot move from {EquipmentStatus.UNASSIGNED} to {to_status}.")
    assigned = to_status == EquipmentStatus.ASSIGNED
    if assigned and (assignee is None or assignee.company_id != device["company_id"]):
        raise ValidationFailed.field("assignee_id", "Assigned equipment needs an employee of the company.")
    device["status"] = to_status
    device["assignee_id"] = assignee.id if assigned and assignee else None
    device["status_changed_at"] = utcnow()
    entries.append(history_row(device, EVENT_FOR_STATUS[to_status], actor, 2, assignee if assigned else None))
    return entries


def move(
    session: Session,
    equipment: Equipment,
    to_status: EquipmentStatus,
    actor: str,
    assignee: Employee | None = None,
    payload: dict[str, Any] | None = None,
    location: GivenLocation = KEEP,
) -> EquipmentHistory:
    """Move `equipment` to `to_status` (409 when `refusal` refuses it) and write its history entry,
    then its `moved` entry if its location changes (`placement.landing`: `location` if given).

    Assigned needs an assignee of the same company; every other status clears it.
    """
    if to_status not in ALLOWED_MOVES:
        raise ValidationFailed.field(
            "status", f"Unknown status {to_status!r}; choose from {', '.join(EquipmentStatus)}."
        )
    refused = refusal(equipment, to_status, assignee)
    if refused is not None:
        raise Conflict(refused)
    if to_status == EquipmentStatus.ASSIGNED:
        if assignee is None:
            raise ValidationFailed.field("assignee_id", "Assigned equipment needs an assignee.")
        if assignee.company_id != equipment.company_id:
            raise ValidationFailed.field("assignee_id", UNKNOWN_EMPLOYEE)
    from_status = equipment.status
    equipment.status = to_status
    equipment.assignee_id = assignee.id if to_status == EquipmentStatus.ASSIGNED and assignee else None
    equipment.status_changed_at = utcnow()
    entry = _history(
        equipment,
        EVENT_FOR_STATUS[to_status],
        actor,
        assignee if to_status == EquipmentStatus.ASSIGNED else None,
        payload,
    )
    session.add(entry)
    place(session, equipment, landing(session, equipment, from_status, to_status, location), actor)
    return entry
