"""Equipment events: one event per changed device, `data` the device as GET /client/equipment/{id}
answers it after the change.

A minimal version written for bulk work (issue 12), with the signature agreed with the events work,
whose fuller module replaces this one at merge. Constant statements for any batch: the devices'
answers in two reads, the events in one INSERT.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from outfitter.core.events import NewEvent, as_event_data, record_events
from outfitter.equipment import service
from outfitter.equipment.schemas import EquipmentOut
from outfitter.models import Equipment
from outfitter.models.events import EventType


def record_equipment_events(
    session: Session, changes: Sequence[tuple[EventType, Equipment]], actor: str | None
) -> None:
    if not changes:
        return
    session.flush()  # the answers below read what the changes wrote
    answers = service.details(session, [equipment.id for _, equipment in changes])
    record_events(
        session,
        [
            NewEvent(event_type, equipment.id, as_event_data(EquipmentOut, answer))
            for (event_type, equipment), answer in zip(changes, answers, strict=True)
        ],
        actor=actor,
    )
