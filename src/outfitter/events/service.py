"""The activity log's rules: what its filters accept."""

from __future__ import annotations

import re
import uuid
from datetime import datetime

from sqlalchemy.orm import Session

from outfitter.core.errors import ValidationFailed
from outfitter.core.timestamps import as_utc
from outfitter.db.clock import sync_horizon
from outfitter.db.keyset import CursorParams, ListParams, ListResult
from outfitter.events.repository import EventFilters, EventRepository
from outfitter.models.events import Event, EventType

SUBJECT_TYPES = tuple(dict.fromkeys(member.subject_type for member in EventType))
# What `type` matches: each exact type, and each subject followed by `.*`.
_BY_PATTERN: dict[str, tuple[EventType, ...]] = {
    **{member.value: (member,) for member in EventType},
    **{
        f"{subject}.*": tuple(member for member in EventType if member.subject_type == subject)
        for subject in SUBJECT_TYPES
    },
}
_ONE = "(?:" + "|".join(re.escape(pattern) for pattern in _BY_PATTERN) + ")"
# A comma list, spaces allowed around the commas; documented in OpenAPI and enforced as is (no
# `\s`, whose meaning differs between regex dialects).
TYPE_PATTERN = f" *{_ONE} *(?:, *{_ONE} *)*"
_TYPES = re.compile(TYPE_PATTERN)


def parse_types(value: str | None) -> tuple[EventType, ...]:
    """`employee.created, equipment.*` -> the exact types it names; anything else is 422."""
    if value is None:
        return ()
    parts = [part.strip(" ") for part in value.split(",")]
    if not _TYPES.fullmatch(value):
        unknown = next((part for part in parts if part not in _BY_PATTERN and part), None)
        if unknown is None:
            message = "Give one or more event types, separated by single commas."
        else:
            shown = unknown if len(unknown) <= 64 else unknown[:64] + "..."  # no type is longer
            message = (
                f"Unknown event type {shown!r}: give types such as 'employee.created', or a subject "
                f"followed by '.*' ({', '.join(f'{subject}.*' for subject in SUBJECT_TYPES)})."
            )
        raise ValidationFailed.field("query.type", message)
    return tuple(dict.fromkeys(member for part in parts for member in _BY_PATTERN[part]))


def _utc(value: datetime | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        return as_utc(value)
    except ValueError as exc:
        raise ValidationFailed.field(f"query.{name}", str(exc)) from None


def list_events(
    session: Session,
    params: ListParams,
    type: str | None,
    subject_id: uuid.UUID | None,
    since: datetime | None,
    until: datetime | None,
) -> ListResult[Event]:
    start, end = _utc(since, "since"), _utc(until, "until")
    if start is not None and end is not None and end < start:
        raise ValidationFailed.field("query.until", "Must not be earlier than since.")
    if start is not None:
        # A follower asks for what came since the newest event it saw. An event is stamped when it
        # is written and seen once its transaction commits, so the window ends at the horizon (the
        # start of the oldest transaction in flight, as an `updated_since` walk's): what a slower
        # transaction stamps earlier than an event already shown is never passed by.
        horizon = sync_horizon(session)
        end = horizon if end is None else min(end, horizon)
    filters = EventFilters(types=parse_types(type), subject_id=subject_id, since=start, until=end)
    if isinstance(params, CursorParams):
        return EventRepository(session).cursor_page(filters, params)
    return EventRepository(session).page(filters, params)


def get_event(session: Session, event_id: str) -> Event:
    return EventRepository(session).get(event_id)
