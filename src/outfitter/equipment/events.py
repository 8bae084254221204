"""The events of equipment changes: every service that adds a device, edits one or moves its
status (this package's service, payments fulfilment, bulk moves) records them here, after the
change, in the request's own transaction. `lifecycle` writes history only."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from sqlalchemy.orm import Session

from outfitter.core.schemas import render_as
from outfitter.equipment.repository import EquipmentRepository
from outfitter.equipment.schemas import EquipmentOut
from outfitter.models import Equipment, EquipmentStatus
from outfitter.models.events import EventType
from outfitter.outbox import NewEvent, record_events, rendered_event_data

EVENT_FOR_STATUS: dict[EquipmentStatus, EventType] = {
    EquipmentStatus.ASSIGNED: EventType.EQUIPMENT_ASSIGNED,
    EquipmentStatus.UNASSIGNED: EventType.EQUIPMENT_UNASSIGNED,
    EquipmentStatus.IN_STORAGE: EventType.EQUIPMENT_MOVED_TO_STORAGE,
    EquipmentStatus.SOLD: EventType.EQUIPMENT_SOLD,
    EquipmentStatus.ARCHIVED: EventType.EQUIPMENT_ARCHIVED,
}


def status_event(status: EquipmentStatus) -> EventType:
    """The event of a move to `status`."""
    return EVENT_FOR_STATUS[status]


def record_equipment_events(
    session: Session, changes: Sequence[tuple[EventType, Equipment]], actor: str | None
) -> None:
    """One event per (type, device), and `equipment.moved` for each device whose location changed
    (placement.place); data = the device as GET /client/equipment/{id} answers it after the
    change; a constant number of statements for the whole batch (up to 1,000 devices)."""
    moved = {equipment.id: equipment for _, equipment in changes if equipment.take_moved()}
    changes = [
        *changes,
        *((EventType.EQUIPMENT_MOVED, equipment) for equipment in moved.values()),
    ]
    changes = list(dict.fromkeys((type, equipment) for type, equipment in changes))
    if not changes:
        return
    ids = list(dict.fromkeys(equipment.id for _, equipment in changes))
    answers = EquipmentRepository(session).answers(ids)  # flushes first: the devices are read as just changed
    record_answered_events(
        session,
        [(type, equipment.id) for type, equipment in changes],
        {
            equipment_id: render_as(EquipmentOut, answer)
            for equipment_id, answer in zip(ids, answers, strict=True)
        },
        actor,
    )


def record_answered_events(
    session: Session,
    changes: Sequence[tuple[EventType, uuid.UUID]],
    answers: Mapping[uuid.UUID, bytes],
    actor: str | None,
) -> None:
    """One event per (type, device id), its data the device's answer in `answers`, rendered
    (`render_as(EquipmentOut, ...)`, as the single retrieve renders it after the change): a write
    renders its answer once, for its response and for its events."""
    record_events(session, answered_events(changes, answers), actor=actor)


def answered_events(
    changes: Sequence[tuple[EventType, uuid.UUID]], answers: Mapping[uuid.UUID, bytes]
) -> list[NewEvent]:
    """The events of `changes` (see `record_answered_events`); a device's events share its data."""
    ids = dict.fromkeys(equipment_id for _, equipment_id in changes)
    data = {equipment_id: rendered_event_data(answers[equipment_id]) for equipment_id in ids}
    return [NewEvent(type, equipment_id, data[equipment_id]) for type, equipment_id in changes]
