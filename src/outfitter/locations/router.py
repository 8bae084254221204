"""Location endpoints. HTTP only: parse, call the service, wrap the answer."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter

from outfitter.core.schemas import Envelope, error_responses, list_envelope, ok
from outfitter.http.openapi import id_path
from outfitter.http.pagination import SyncListing
from outfitter.http.unit_of_work import ReadAccess, UnitOfWorkRoute, WriteAccess
from outfitter.locations import service
from outfitter.locations.schemas import (
    LocationChange,
    LocationCreate,
    LocationNode,
    LocationOut,
    LocationPatch,
)

router = APIRouter(prefix="/client", tags=["locations"], route_class=UnitOfWorkRoute)

LocationId = Annotated[str, id_path("The location's id", alias="locationId")]


@router.get(
    "/locations",
    response_model=list_envelope(LocationOut, LocationChange),
    responses=error_responses(422),
    summary="List locations, newest first (or the changes since `updated_since`)",
)
def list_locations(client: ReadAccess, pagination: SyncListing) -> dict[str, object]:
    """A page of the company's locations, newest first, each with its ancestors and its devices counted by
    status, there and beneath it."""
    records, page = service.list_locations(client.session, pagination)
    return ok(page.body(records), "Locations fetched successfully.")


@router.get(
    "/locations/tree",
    response_model=Envelope[list[LocationNode]],
    summary="The whole location tree, with device counts at and beneath each location",
)
def location_tree(client: ReadAccess) -> dict[str, object]:
    """Every location nested under its parent (siblings by name), each with its devices counted by status,
    there and beneath it."""
    return ok(service.location_tree(client.session), "Location tree fetched successfully.")


@router.post(
    "/locations",
    status_code=201,
    response_model=Envelope[LocationOut],
    responses=error_responses(409, 422),
    summary="Create a location",
)
def create_location(body: LocationCreate, client: WriteAccess) -> dict[str, object]:
    """Create a location, under `parent_id` or as a root. A name its parent already has is 409; deeper than
    the limit is 422."""
    location = service.create_location(client.session, client.actor, body)
    return ok(location, "Location created successfully.")


@router.get(
    "/locations/{locationId}",
    response_model=Envelope[LocationOut],
    responses=error_responses(404),
    summary="Retrieve a location with its device counts",
)
def get_location(location_id: LocationId, client: ReadAccess) -> dict[str, object]:
    """One location with its ancestors and its devices counted by status, there and beneath it."""
    return ok(service.get_location(client.session, location_id), "Location fetched successfully.")


@router.patch(
    "/locations/{locationId}",
    response_model=Envelope[LocationOut],
    responses=error_responses(404, 409, 422),
    summary="Update a location, or move it (with everything beneath it) under another",
)
def update_location(location_id: LocationId, body: LocationPatch, client: WriteAccess) -> dict[str, object]:
    """Rename or re-describe a location, make it the default storage location, or move it under another
    parent (`parent_id`; null makes it a root) with everything beneath it. A move beneath itself is 422."""
    location = service.update_location(client.session, client.actor, location_id, body)
    return ok(location, "Location updated successfully.")


@router.delete(
    "/locations/{locationId}",
    response_model=Envelope[LocationOut],
    responses=error_responses(404, 409),
    summary="Delete an empty location (409 while it holds devices or locations)",
)
def delete_location(location_id: LocationId, client: WriteAccess) -> dict[str, object]:
    """Delete a location with nothing beneath it and no device there or calling it home; 409 naming how many
    otherwise. Answers the location as it was."""
    location = service.delete_location(client.session, client.actor, location_id)
    return ok(location, "Location deleted successfully.")
