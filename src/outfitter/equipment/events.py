"""Equipment events: each device rendered as `GET /client/equipment/{id}` answers it.

A minimal version for the returns work (issue 11); the events work replaces it with its own of the
same signature at merge."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from outfitter.core.events import NewEvent, as_event_data, record_events
from outfitter.equipment import presenters
from outfitter.equipment.repository import EquipmentRepository
from outfitter.equipment.schemas import EquipmentOut
from outfitter.models import Equipment, EventType


def record_equipment_events(
    session: Session, changes: Sequence[tuple[EventType, Equipment]], actor: str | None
) -> None:
    """One event per (type, device), in one statement, in the session's transaction."""
    if not changes:
        return
    session.flush()  # the answers below read the devices as just changed
    repository = EquipmentRepository(session)
    histories = repository.history([equipment.id for _, equipment in changes], full=True)
    events = []
    for event_type, equipment in changes:
        row = repository.detail(equipment.id)
        data = as_event_data(EquipmentOut, presenters.detail(row, histories[equipment.id]))
        events.append(NewEvent(event_type, equipment.id, data))
    record_events(session, events, actor=actor, company_id=changes[0][1].company_id)
