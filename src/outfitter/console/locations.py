"""The console's locations: the tree with each location's device counts (there and beneath), a
page per location listing the devices at it and beneath it, and the forms that create, edit, move
and delete locations.

Every read and write goes through the services the API's location and equipment endpoints call
(locations.service, equipment.service), in the signed-in user's unit of work: the rules, the
messages (a delete refused while devices are there names how many) and the events (actor
`console:<email>`) are the API's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from outfitter.console.pages import page, render
from outfitter.console.people import Fields, FormText, field_errors, refused_unless_admin, validated
from outfitter.console.web import MOUNT_PATH, ConsoleWork, console_work, redirect
from outfitter.core.errors import Conflict, DomainError, NotFound, ValidationFailed
from outfitter.db.keyset import PageParams, PageResult
from outfitter.db.reads import run_in_session
from outfitter.equipment import service as equipment_service
from outfitter.locations import service as location_service
from outfitter.locations.schemas import LocationCreate, LocationNode, LocationOut, LocationPatch
from outfitter.models import LocationKind

router = APIRouter(include_in_schema=False)
DEVICES_PER_PAGE = 25
ONLY_ADMINS = "Only an admin can change locations."


def _flatten(nodes: list[LocationNode], level: int = 0) -> list[tuple[int, LocationNode]]:
    """The tree depth first, each location with its level (for indenting rows and choices)."""
    rows: list[tuple[int, LocationNode]] = []
    for node in nodes:
        rows.append((level, node))
        rows += _flatten(node.children, level + 1)
    return rows


def _body(form: Mapping[str, str]) -> dict[str, Any]:
    """The API's body from the form: every field is sent (an empty parent is a root)."""
    return {
        "name": form.get("name", ""),
        "kind": form.get("kind") or LocationKind.OTHER.value,
        "parent_id": form.get("parent") or None,
        "address": form.get("address") or None,
        "country": form.get("country") or None,
        "is_default_storage": form.get("is_default_storage") == "on",
    }


def _domain_errors(exc: DomainError) -> dict[str, str]:
    placed = field_errors(exc.errors, "form") if isinstance(exc, ValidationFailed) else {}
    placed = {{"parent_id": "parent"}.get(name, name): message for name, message in placed.items()}
    return placed or {"form": exc.message}


def _tree_page(
    request: Request,
    work: ConsoleWork,
    status: int = 200,
    values: Mapping[str, str] | None = None,
    errors: Mapping[str, str] | None = None,
) -> Response:
    rows = _flatten(location_service.location_tree(work.session))
    return render(
        request,
        "locations.html",
        status,
        user=work.user,
        nav="locations",
        rows=rows,
        kinds=list(LocationKind),
        values=values or {"parent": request.query_params.get("parent", "")},
        errors=errors or {},
        deleted=request.query_params.get("deleted"),
    )


@router.get("/locations")
@page
def locations_page(request: Request) -> Response:
    with console_work(request) as work:
        return _tree_page(request, work)


@router.post("/locations")
@page
def create_location(request: Request, values: Fields) -> Response:
    with console_work(request, values) as work:
        refused = refused_unless_admin(request, work, ONLY_ADMINS)
        if refused:
            return refused
        body, errors = validated(LocationCreate, _body(values))
        if errors:
            return _tree_page(request, work, 422, values, errors)
        try:
            location = location_service.create_location(work.session, work.actor, body)
        except (ValidationFailed, Conflict) as exc:
            work.session.rollback()
            return _tree_page(request, work, exc.status_code, values, _domain_errors(exc))
    return redirect(f"{MOUNT_PATH}/locations/{location.id}?saved=created")


def _devices(work: ConsoleWork, location: LocationOut, number: int) -> tuple[list[dict[str, Any]], int, int]:
    """A page of the devices at the location and beneath it, as `GET /client/equipment?location_id=`."""
    filters = equipment_service.resolve_filters(work.session, location_id=str(location.id))
    params = PageParams(page=number, per_page=DEVICES_PER_PAGE)
    records, result = run_in_session(work.session, equipment_service.list_plan(filters, params))
    assert isinstance(result, PageResult)  # page mode: PageParams
    return records, result.total, result.last_page


def _location_page(
    request: Request,
    work: ConsoleWork,
    location_id: str,
    status: int = 200,
    values: Mapping[str, str] | None = None,
    errors: Mapping[str, str] | None = None,
) -> Response:
    location = location_service.get_location(work.session, location_id)
    raw_page = request.query_params.get("page") or "1"
    number = int(raw_page) if raw_page.isdigit() and 0 < len(raw_page) < 9 and int(raw_page) > 0 else 1
    devices, total, last_page = _devices(work, location, number)
    # The parents it may move under: anything but itself and what is beneath it.
    choices = [
        (level, node)
        for level, node in _flatten(location_service.location_tree(work.session))
        if node.id != location.id and all(ancestor.id != location.id for ancestor in node.ancestors)
    ]
    children = [node for _, node in choices if node.parent_id == location.id]
    current = {
        "name": location.name,
        "kind": location.kind.value,
        "parent": str(location.parent_id or ""),
        "address": location.address or "",
        "country": location.country_code or "",
        "is_default_storage": "on" if location.is_default_storage else "",
    }
    return render(
        request,
        "location.html",
        status,
        user=work.user,
        nav="locations",
        location=location,
        children=children,
        choices=choices,
        kinds=list(LocationKind),
        devices=devices,
        total=total,
        page=number,
        last_page=last_page,
        values=values or current,
        errors=errors or {},
        saved=request.query_params.get("saved"),
    )


@router.get("/locations/{location_id}")
@page
def location_page(request: Request, location_id: str) -> Response:
    with console_work(request) as work:
        return _location_page(request, work, location_id)


@router.post("/locations/{location_id}")
@page
def update_location(request: Request, location_id: str, values: Fields) -> Response:
    with console_work(request, values) as work:
        refused = refused_unless_admin(request, work, ONLY_ADMINS)
        if refused:
            return refused
        location_service.get_location(work.session, location_id)  # 404 before anything
        body, errors = validated(LocationPatch, _body(values))
        if errors:
            return _location_page(request, work, location_id, 422, values, errors)
        try:
            location_service.update_location(work.session, work.actor, location_id, body)
        except NotFound:
            raise
        except (ValidationFailed, Conflict) as exc:
            work.session.rollback()
            return _location_page(request, work, location_id, exc.status_code, values, _domain_errors(exc))
    return redirect(f"{MOUNT_PATH}/locations/{location_id}?saved=updated")


@router.post("/locations/{location_id}/delete")
@page
def delete_location(request: Request, location_id: str, csrf_token: FormText = "") -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        refused = refused_unless_admin(request, work, ONLY_ADMINS)
        if refused:
            return refused
        try:
            location_service.delete_location(work.session, work.actor, location_id)
        except Conflict as exc:  # devices or locations still there: the API's reason, nothing changed
            work.session.rollback()
            return _location_page(request, work, location_id, 409, errors={"delete": exc.message})
    return redirect(f"{MOUNT_PATH}/locations?deleted=1")
