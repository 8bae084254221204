"""The activity log's shapes: an event as a client reads it."""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import BeforeValidator

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


_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def _date_time_text(value: object) -> object:
    """Only a date and time written out: never a number, which Pydantic would read as unix seconds."""
    if not isinstance(value, str) or not _DATE_TIME.match(value):
        raise ValueError("Give an ISO 8601 date and time, such as 2026-01-31T09:30:00Z.")
    return value


DateTimeText = Annotated[datetime, BeforeValidator(_date_time_text)]
