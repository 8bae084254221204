"""Location rules: a tree per company (names unique among siblings, at most MAX_DEPTH levels, no
cycles), moves of whole subtrees, devices counted by status at a location and beneath it, a delete
refused while the location holds devices, and the one default storage location."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Sequence

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from outfitter.catalog.reference import resolve_country
from outfitter.core.errors import Conflict, NotFound, ValidationFailed
from outfitter.db.base import new_id, utcnow
from outfitter.db.keyset import CursorParams, ListParams, ListResult, list_order, list_page, syncing
from outfitter.db.tenancy import parse_uuid
from outfitter.locations.repository import UNKNOWN_LOCATION, LocationRepository
from outfitter.locations.schemas import (
    DeviceCounts,
    LocationBrief,
    LocationChange,
    LocationCreate,
    LocationNode,
    LocationOut,
    LocationPatch,
    counts_of,
)
from outfitter.models import MAX_DEPTH, Country, EquipmentStatus, Location
from outfitter.models.events import EventType
from outfitter.models.locations import ancestor_ids, path_segment
from outfitter.outbox import as_event_data, record_event
from outfitter.tenants.actor import Actor

TOO_DEEP = f"Locations nest at most {MAX_DEPTH} levels deep (a root is level 1)."
INTO_ITSELF = "A location cannot move beneath itself or beneath a location under it."


def name_taken(name: str) -> str:
    return f"A location named {name!r} already exists under the same parent."


def sibling_name(parent_id: uuid.UUID | None, name: str) -> str:
    """What `uq_locations_company_id_sibling_name` compares: the parent and the name, any case."""
    return f"{parent_id.hex if parent_id else 'root'}:{name.casefold()}"


# --- answers -------------------------------------------------------------------------------------


def present(repository: LocationRepository, locations: Sequence[Location]) -> list[LocationOut]:
    """Locations with their ancestors and device counts (here, and here and beneath): three
    statements for any number of locations, whatever the size of their subtrees."""
    listed = {location.id for location in locations}
    members = repository.subtree(_outermost(location.path for location in locations))
    counts = repository.status_counts([member_id for member_id, _ in members])
    beneath: dict[uuid.UUID, Counter[EquipmentStatus]] = {location_id: Counter() for location_id in listed}
    for member_id, path in members:
        if member_id in counts:
            for ancestor in ancestor_ids(path):
                if ancestor in listed:
                    beneath[ancestor].update(counts[member_id])
    names = repository.named({ancestor for location in locations for ancestor in ancestor_ids(location.path)})
    return [
        LocationOut(
            id=location.id,
            name=location.name,
            kind=location.kind,
            parent_id=location.parent_id,
            ancestors=[
                LocationBrief(id=ancestor, name=names.get(ancestor, ""))
                for ancestor in ancestor_ids(location.path)[:-1]
            ],
            depth=location.depth,
            address=location.address,
            country=location.country.name if location.country else None,
            country_code=location.country.code if location.country else None,
            is_default_storage=location.is_default_storage,
            device_counts=DeviceCounts(
                here=counts_of(counts.get(location.id, {})), beneath=counts_of(dict(beneath[location.id]))
            ),
            created_at=location.created_at,
            updated_at=location.updated_at,
        )
        for location in locations
    ]


def _outermost(paths: Iterable[str]) -> list[str]:
    """The paths not beneath another of them: their ranges cover all the others' (the tree: its roots)."""
    kept: list[str] = []
    for path in sorted(set(paths)):
        if not kept or not path.startswith(kept[-1]):
            kept.append(path)
    return kept


def _record(session: Session, actor: Actor, type: EventType, location: LocationOut) -> LocationOut:
    record_event(session, type, location.id, as_event_data(LocationOut, location), actor=actor.name)
    return location


# --- reads ---------------------------------------------------------------------------------------


def list_locations(session: Session, params: ListParams) -> tuple[list[LocationOut], ListResult[Location]]:
    """A page of either mode. With `updated_since`, deleted locations too (`deleted: true`)."""
    repository = LocationRepository(session)
    statement = repository.live() if syncing(params) is None else repository.every()
    order = list_order(session, Location, params)
    page = list_page(session, statement.where(*order.conditions), order.keyset, params)
    records = present(repository, page.items)
    if isinstance(params, CursorParams):
        deleted = {location.id for location in page.items if location.deleted_at is not None}
        records = [LocationChange(**record.model_dump(), deleted=record.id in deleted) for record in records]
    return records, page


def location_tree(session: Session) -> list[LocationNode]:
    """Every live location, nested under its parent, siblings by name: four statements."""
    repository = LocationRepository(session)
    locations = list(session.scalars(repository.live()).unique())
    nodes = {
        record.id: LocationNode(**record.model_dump(), children=[])
        for record in present(repository, locations)
    }
    roots: list[LocationNode] = []
    for node in sorted(nodes.values(), key=lambda node: (node.name.casefold(), str(node.id))):
        parent = nodes.get(node.parent_id) if node.parent_id else None
        (parent.children if parent else roots).append(node)
    return roots


def _live(repository: LocationRepository, location_id: str, for_update: bool = False) -> Location:
    location = repository.find_live(location_id, for_update=for_update)
    if location is None:
        raise NotFound.record("Location")
    return location


def get_location(session: Session, location_id: str) -> LocationOut:
    repository = LocationRepository(session)
    return present(repository, [_live(repository, location_id)])[0]


# --- writes --------------------------------------------------------------------------------------


def _named_parent(repository: LocationRepository, parent_id: str) -> Location:
    parent = repository.find_live(parent_id)
    if parent is None:
        raise ValidationFailed.field("parent_id", UNKNOWN_LOCATION)
    return parent


def _country(session: Session, value: str | None) -> Country | None:
    return resolve_country(session, value, "country") if value else None


def _flush_name(session: Session, name: str) -> None:
    try:
        session.flush()
    except IntegrityError as error:
        # A concurrent request took the name, or made another location the default storage one,
        # after our checks.
        if "default_storage" in str(error.orig):
            raise Conflict(
                "Another location became the default storage location meanwhile: try again."
            ) from None
        if "sibling_name" not in str(error.orig):
            raise
        raise Conflict(name_taken(name)) from None


def create_location(session: Session, actor: Actor, body: LocationCreate) -> LocationOut:
    repository = LocationRepository(session)
    parent: Location | None = None
    if body.parent_id is not None:
        # Locked: a move of the parent's subtree, which rewrites its path, waits for this one.
        found = _named_parent(repository, body.parent_id)
        parent = repository.lock({found.id}).get(found.id)
        if parent is None:
            raise ValidationFailed.field("parent_id", UNKNOWN_LOCATION)
    depth = (parent.depth if parent else 0) + 1
    if depth > MAX_DEPTH:
        raise ValidationFailed.field("parent_id", TOO_DEEP)
    country = _country(session, body.country)
    sibling = sibling_name(parent.id if parent else None, body.name)
    if repository.sibling_taken(sibling):
        raise Conflict(name_taken(body.name))
    location_id = new_id()
    if body.is_default_storage:
        repository.clear_default_storage(except_id=location_id)
    location = repository.add(
        Location(
            id=location_id,
            name=body.name,
            kind=body.kind,
            parent_id=parent.id if parent else None,
            path=(parent.path if parent else "/") + path_segment(location_id),
            depth=depth,
            address=body.address or None,
            country=country,
            is_default_storage=body.is_default_storage,
            sibling_name=sibling,
        )
    )
    _flush_name(session, body.name)
    return _record(session, actor, EventType.LOCATION_CREATED, present(repository, [location])[0])


def update_location(session: Session, actor: Actor, location_id: str, body: LocationPatch) -> LocationOut:
    """Rename, re-describe, make the default storage, or move under another parent (with
    everything beneath it); all checked before any write."""
    repository = LocationRepository(session)
    current = _live(repository, location_id)  # an unknown location is 404 before anything else
    sent = body.model_fields_set
    for name in ("name", "kind", "is_default_storage"):
        if name in sent and getattr(body, name) is None:
            raise ValidationFailed.field(name, "May not be null; leave it out to keep it.")
    named_parent = (
        _named_parent(repository, body.parent_id) if "parent_id" in sent and body.parent_id else None
    )
    # The location, the new parent and its ancestors, locked in id order: two moves that would
    # each put one location beneath the other share a lock, so the second sees the first's result.
    locked = repository.lock({current.id, *(ancestor_ids(named_parent.path) if named_parent else ())})
    location = locked.get(current.id)
    if location is None:
        raise NotFound.record("Location")
    parent_id = location.parent_id
    if "parent_id" in sent:
        parent_id = named_parent.id if named_parent else None
    new_parent = locked.get(parent_id) if parent_id else None
    if parent_id is not None and new_parent is None:
        raise ValidationFailed.field("parent_id", UNKNOWN_LOCATION)
    moving = parent_id != location.parent_id
    new_depth = (new_parent.depth if new_parent else 0) + 1
    if moving:
        if new_parent is not None and new_parent.path.startswith(location.path):
            raise ValidationFailed.field("parent_id", INTO_ITSELF)
        if repository.deepest_beneath(location.path) - location.depth + new_depth > MAX_DEPTH:
            raise ValidationFailed.field("parent_id", TOO_DEEP)
    name = body.name if body.name is not None else location.name
    sibling = sibling_name(parent_id, name)
    if sibling != location.sibling_name and repository.sibling_taken(sibling, except_id=location.id):
        raise Conflict(name_taken(name))
    country = _country(session, body.country) if "country" in sent else location.country
    before = (
        location.name,
        location.kind,
        location.address,
        location.country_id,
        location.is_default_storage,
    )
    kind = body.kind if body.kind is not None else location.kind
    address = (body.address or None) if "address" in sent else location.address
    default_storage = (
        body.is_default_storage if body.is_default_storage is not None else location.is_default_storage
    )
    after = (name, kind, address, country.id if country else None, default_storage)
    if before == after and not moving:
        return present(repository, [location])[0]  # a PATCH that changes nothing writes nothing

    if default_storage and not location.is_default_storage:
        repository.clear_default_storage(except_id=location.id)
    if moving:
        new_path = (new_parent.path if new_parent else "/") + path_segment(location.id)
        repository.move_subtree(location.path, new_path, new_depth - location.depth)
        location.path, location.depth, location.parent_id = new_path, new_depth, parent_id
    location.name, location.kind, location.address, location.country = name, kind, address, country
    location.is_default_storage = default_storage
    location.sibling_name = sibling
    location.updated_at = utcnow()
    _flush_name(session, name)
    session.expire_all()  # the subtree's rows changed by one UPDATE: read them afresh
    return _record(session, actor, EventType.LOCATION_UPDATED, get_location(session, str(location.id)))


def delete_location(session: Session, actor: Actor, location_id: str) -> LocationOut:
    """Soft delete, refused (409) while anything is beneath it or a device is there or calls it
    home; answers the location as it was."""
    repository = LocationRepository(session)
    location = _live(repository, location_id, for_update=True)
    children = repository.children_count(location.id)
    if children:
        raise Conflict(
            f"Location {location.name!r} has {_count(children, 'location')} beneath it: move or delete "
            "them first."
        )
    here, home = repository.devices_holding(location.id)
    if here or home:
        held = [f"{_count(here, 'device')} here"] if here else []
        held += [f"{_count(home, 'device')} that call it home"] if home else []
        raise Conflict(
            f"Location {location.name!r} holds {' and '.join(held)}: move them (or change their home "
            "location) first."
        )
    answer = present(repository, [location])[0]
    location.deleted_at = utcnow()
    location.sibling_name = None
    location.is_default_storage = False
    session.flush()
    return _record(session, actor, EventType.LOCATION_DELETED, answer)


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


# --- what devices ask of locations -----------------------------------------------------------------


def device_location(session: Session, value: uuid.UUID | str, field: str) -> Location:
    """The live location a device write names (locked against a concurrent delete), or 422."""
    parsed = parse_uuid(value)
    location = LocationRepository(session).lock({parsed}, share=True).get(parsed) if parsed else None
    if location is None:
        raise ValidationFailed.field(field, UNKNOWN_LOCATION)
    return location
