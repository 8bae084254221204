"""Equipment statuses, the moves between them, and the history entry every move writes.

The one place a status changes: services of every domain (equipment edits, payments fulfilment)
call `move` or `record_added`, so the rules and the history cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from outfitter.core.errors import Conflict, ValidationFailed
from outfitter.db.base import utcnow
from outfitter.equipment.models import Equipment, EquipmentHistory
from outfitter.people.models import Employee

ASSIGNED = "Assigned"
UNASSIGNED = "Unassigned"
SOLD = "Sold"
IN_STORAGE = "In_Storage"
ARCHIVED = "Archived"
STATUSES = (ASSIGNED, UNASSIGNED, SOLD, IN_STORAGE, ARCHIVED)

ALLOWED_MOVES: dict[str, frozenset[str]] = {
    UNASSIGNED: frozenset({ASSIGNED, IN_STORAGE, SOLD, ARCHIVED}),
    ASSIGNED: frozenset({UNASSIGNED, IN_STORAGE, ARCHIVED}),
    IN_STORAGE: frozenset({ASSIGNED, UNASSIGNED, SOLD, ARCHIVED}),
    SOLD: frozenset({ARCHIVED}),
    ARCHIVED: frozenset(),
}

EVENT_FOR_STATUS = {
    ASSIGNED: "assigned",
    UNASSIGNED: "unassigned",
    IN_STORAGE: "moved_to_storage",
    SOLD: "sold",
    ARCHIVED: "archived",
}
EQUIPMENT_ADDED = "equipment_added"
SYSTEM_ACTOR = "system"


def _history(
    equipment: Equipment,
    event_type: str,
    actor: str,
    assignee: Employee | None,
    payload: dict[str, Any] | None,
) -> EquipmentHistory:
    entry = EquipmentHistory(
        company_id=equipment.company_id,
        equipment_id=equipment.id,
        event_type=event_type,
        event_date=utcnow(),
        seq=equipment.next_history_seq(),
        assignee_id=assignee.id if assignee else None,
        assignee_name=assignee.full_name if assignee else None,
        actor=actor,
        payload=payload,
    )
    return entry


def record_added(
    session: Session, equipment: Equipment, actor: str, payload: dict[str, Any] | None = None
) -> EquipmentHistory:
    """The `equipment_added` entry of a new device (flush the device first so it has an id)."""
    entry = _history(equipment, EQUIPMENT_ADDED, actor, None, payload)
    session.add(entry)
    return entry


def move(
    session: Session,
    equipment: Equipment,
    to_status: str,
    actor: str,
    assignee: Employee | None = None,
    payload: dict[str, Any] | None = None,
) -> EquipmentHistory:
    """Move `equipment` to `to_status` (409 when the move is not allowed) and write its history entry.

    Assigned needs an assignee of the same company; every other status clears it. Re-assigning
    an Assigned device to another employee is allowed and recorded as `assigned`.
    """
    if to_status not in ALLOWED_MOVES:
        raise ValidationFailed.field(
            "status", f"Unknown status {to_status!r}; choose from {', '.join(STATUSES)}."
        )
    from_status = equipment.status
    reassign = from_status == ASSIGNED and to_status == ASSIGNED
    if not reassign and to_status not in ALLOWED_MOVES.get(from_status, frozenset()):
        raise Conflict(f"Equipment cannot move from {from_status} to {to_status}.")
    if to_status == ASSIGNED:
        if assignee is None:
            raise ValidationFailed.field("assignee_id", "Assigned equipment needs an assignee.")
        if assignee.company_id != equipment.company_id:
            raise ValidationFailed.field("assignee_id", "Unknown employee.")
        if reassign and equipment.assignee_id == assignee.id:
            raise Conflict(f"Equipment is already assigned to {assignee.full_name}.")
    equipment.status = to_status
    equipment.assignee_id = assignee.id if to_status == ASSIGNED and assignee else None
    equipment.status_changed_at = utcnow()
    entry = _history(
        equipment, EVENT_FOR_STATUS[to_status], actor, assignee if to_status == ASSIGNED else None, payload
    )
    session.add(entry)
    return entry
