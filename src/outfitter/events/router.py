"""Activity log endpoints. HTTP only: parse, call the service, wrap the answer."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query

from outfitter.core.schemas import DateTimeText, Envelope, error_responses, list_envelope, ok
from outfitter.events import service
from outfitter.events.schemas import EventOut
from outfitter.http.openapi import id_path
from outfitter.http.pagination import Listing
from outfitter.http.unit_of_work import ReadAccess, UnitOfWorkRoute

router = APIRouter(prefix="/client", tags=["events"], route_class=UnitOfWorkRoute)


@router.get(
    "/events",
    response_model=list_envelope(EventOut),
    responses=error_responses(422),
    summary="The company's activity log, newest first",
)
def list_events(
    client: ReadAccess,
    pagination: Listing,
    type: Annotated[
        str | None,
        Query(
            max_length=2000,
            description="Event types separated by commas; `equipment.*` matches every equipment type",
            json_schema_extra={"pattern": f"^{service.TYPE_PATTERN}$"},
        ),
    ] = None,
    subject_id: Annotated[uuid.UUID | None, Query(description="Only the events of this record")] = None,
    since: Annotated[
        DateTimeText | None, Query(description="Only events at or after this time (ISO 8601; no offset: UTC)")
    ] = None,
    until: Annotated[
        DateTimeText | None, Query(description="Only events before this time (ISO 8601; no offset: UTC)")
    ] = None,
) -> dict[str, object]:
    """The company's activity log, newest first: every event a webhook endpoint would receive, filtered by
    `type`, `subject_id` and a `since`/`until` window."""
    page = service.list_events(client.session, pagination, type, subject_id, since, until)
    return ok(page.body(page.items), "Events fetched successfully.")


@router.get(
    "/events/{eventId}",
    response_model=Envelope[EventOut],
    responses=error_responses(404),
    summary="Retrieve one event",
)
def get_event(
    event_id: Annotated[str, id_path("The event's id", alias="eventId")], client: ReadAccess
) -> dict[str, object]:
    """One event of the activity log, with the data it carried."""
    return ok(service.get_event(client.session, event_id), "Event fetched successfully.")
