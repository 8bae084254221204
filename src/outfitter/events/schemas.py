"""The activity log's shapes: an event as a client reads it."""

from __future__ import annotations

import uuid
from typing import Any

from outfitter.core.schemas import Schema, Timestamp
from outfitter.models.events import EventType


class EventOut(Schema):
    """`data` is the subject as the API answered it after the change (before it, for `*.deleted`)."""

    id: uuid.UUID
    type: EventType
    subject_type: str
    subject_id: uuid.UUID
    actor: str | None
    created_at: Timestamp
    data: dict[str, Any]
