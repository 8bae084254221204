"""The activity log's rules: what its filters accept."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy.orm import Session

from outfitter.core.errors import ValidationFailed
from outfitter.core.pagination import PageParams, PageResult
from outfitter.core.schemas import as_utc
from outfitter.events.repository import EventFilters, EventRepository
from outfitter.models.events import Event, EventType

SUBJECT_TYPES = tuple(dict.fromkeys(member.subject_type for member in EventType))
_BY_VALUE = {member.value: member for member in EventType}
MAX_TYPE_PATTERNS = 50


def parse_types(value: str | None) -> tuple[EventType, ...]:
    """`employee.created,equipment.*` -> the exact types it names; anything else is 422."""
    if value is None:
        return ()
    patterns = [part.strip() for part in value.split(",") if part.strip()]
    if not patterns:
        raise ValidationFailed.field("query.type", "Give one or more event types separated by commas.")
    if len(patterns) > MAX_TYPE_PATTERNS:
        raise ValidationFailed.field("query.type", f"Give at most {MAX_TYPE_PATTERNS} types at once.")
    types: dict[EventType, None] = {}
    unknown: list[str] = []
    for pattern in patterns:
        if pattern.endswith(".*") and pattern[:-2] in SUBJECT_TYPES:
            subject = pattern[:-2]
            types.update(dict.fromkeys(member for member in EventType if member.subject_type == subject))
        elif pattern in _BY_VALUE:
            types[_BY_VALUE[pattern]] = None
        else:
            unknown.append(pattern)
    if unknown:
        raise ValidationFailed.field(
            "query.type",
            f"Unknown event type {unknown[0]!r}: give types such as 'employee.created', or a subject "
            f"followed by '.*' ({', '.join(f'{subject}.*' for subject in SUBJECT_TYPES)}).",
        )
    return tuple(types)


def _utc(value: datetime | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        return as_utc(value)
    except ValueError as exc:
        raise ValidationFailed.field(f"query.{name}", str(exc)) from None


def list_events(
    session: Session,
    params: PageParams,
    type: str | None,
    subject_id: uuid.UUID | None,
    since: datetime | None,
    until: datetime | None,
) -> PageResult[Event]:
    start, end = _utc(since, "since"), _utc(until, "until")
    if start is not None and end is not None and end < start:
        raise ValidationFailed.field("query.until", "Must not be earlier than since.")
    filters = EventFilters(types=parse_types(type), subject_id=subject_id, since=start, until=end)
    return EventRepository(session).page(filters, params)


def get_event(session: Session, event_id: str) -> Event:
    return EventRepository(session).get(event_id)
