"""The devices pages: the list (filters, search, sort, cursor pages, columns, all in the URL), its
CSV export, a device with its timeline and its status move, and registering one device. Each
calls the equipment service the API's endpoints call, in the signed-in user's unit of work."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlencode

import orjson
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.datastructures import FormData

from outfitter.console.custom_values import panel, submitted_values
from outfitter.console.device_bulk import ACTIONS
from outfitter.console.devices import (
    COLUMNS,
    PER_PAGE_CHOICES,
    SORT_LABELS,
    TYPE_CHOICES,
    DeviceQuery,
    device_moves,
    employee_choices,
    first_message,
    list_devices,
    resolve_filters,
)
from outfitter.console.pages import FormText, page, render
from outfitter.console.web import MOUNT_PATH, ConsoleWork, console_work, error_page, redirect
from outfitter.core.errors import Conflict, DomainError, NotFound, ValidationFailed, validation_message
from outfitter.csvio.writer import csv_response
from outfitter.db.reads import run_in_session
from outfitter.db.tenancy import bind_company, reads_only
from outfitter.equipment import export
from outfitter.equipment import service as equipment_service
from outfitter.equipment.lifecycle import ALLOWED_MOVES
from outfitter.equipment.schemas import EquipmentCreate, EquipmentPatch
from outfitter.models import CustomFieldEntity, EquipmentState, EquipmentStatus, EquipmentType

router = APIRouter(include_in_schema=False)

ADMIN_ONLY = "Only an admin can change devices."
# The register form's fields: the create body's, `specs.*` flattened as the CSV import names them.
REGISTER_TEXT = (
    "title",
    "serial_number",
    "make",
    "model",
    "year",
    "purchase_date",
    "purchase_price",
    "currency",
    "country",
    "description",
)
REGISTER_SPECS = ("memory", "storage", "color")
REGISTER_TYPES = (
    EquipmentType.LAPTOP,
    EquipmentType.WORKSTATION,
    EquipmentType.PHONES,
    EquipmentType.TABLET,
    EquipmentType.ACCESSORIES,
)
REGISTER_STATUSES = (EquipmentStatus.UNASSIGNED, EquipmentStatus.IN_STORAGE, EquipmentStatus.ASSIGNED)
MAX_FIELD = 4000


@router.get("/devices")
@page
def devices_page(request: Request) -> Response:
    query = DeviceQuery.parse(request.query_params)
    with console_work(request) as work:
        listing = list_devices(work.session, query)
        return render(
            request,
            "devices.html",
            user=work.user,
            nav="devices",
            query=query,
            listing=listing,
            statuses=list(EquipmentStatus),
            types=TYPE_CHOICES,
            sorts=SORT_LABELS,
            per_page_choices=PER_PAGE_CHOICES,
            columns=COLUMNS,
            urlencode=urlencode,
            bulk_actions=ACTIONS,
            moved=_whole_text(request.query_params.get("moved")),
            moved_to=_status_text(request.query_params.get("to")),
        )


def _whole_text(value: str | None) -> str:
    return value if value and value.isdigit() and len(value) < 6 else ""


def _status_text(value: str | None) -> str:
    return value if value in set(EquipmentStatus) else ""


@router.get("/devices/export")
@page
def export_devices(request: Request) -> Response:
    """The current filter's devices as the API's CSV export writes them, streamed: each chunk
    read in a session of its own, bound to the user's company."""
    query = DeviceQuery.parse(request.query_params)
    with console_work(request) as work:
        filters = resolve_filters(work.session, query)
        company_id, sessions = work.user.company_id, request.app.state.sessionmaker

    def open_session() -> Any:
        session = reads_only(sessions())
        bind_company(session, company_id)
        return session

    chunks = export.equipment_chunks(open_session, filters)
    return csv_response(f"equipment-{datetime.now(UTC):%Y-%m-%d}.csv", export.COLUMNS, chunks)


# --- registering one device --------------------------------------------------------------------


def _register_form(
    request: Request,
    work: ConsoleWork,
    values: dict[str, str] | None = None,
    errors: dict[str, str] | None = None,
    status: int = 200,
) -> Response:
    values = values or {}
    return render(
        request,
        "device_new.html",
        status,
        user=work.user,
        nav="devices",
        values=values,
        errors=errors or {},
        types=REGISTER_TYPES,
        states=list(EquipmentState),
        statuses=REGISTER_STATUSES,
        employees=employee_choices(work.session, values.get("assignee_q", "")),
    )


@router.get("/devices/new")
@page
def new_device_page(request: Request) -> Response:
    with console_work(request) as work:
        if not work.user.is_admin:
            return error_page(request, 403, ADMIN_ONLY, work.user)
        return _register_form(request, work)


async def _any_form(request: Request) -> FormData:
    """A form of many fields (a sync endpoint cannot await it itself)."""
    return await request.form(max_files=1, max_fields=60)


AnyForm = Annotated[FormData, Depends(_any_form)]


def _form_values(form: FormData) -> dict[str, str]:
    return {name: value[:MAX_FIELD] for name, value in form.items() if isinstance(value, str)}


def _create_body(values: dict[str, str]) -> dict[str, Any]:
    """The form as the JSON body of POST /client/equipment: empty fields left out."""
    body: dict[str, Any] = {name: values[name] for name in REGISTER_TEXT if values.get(name, "").strip()}
    for name in ("type", "state", "status", "assignee_id"):
        if values.get(name):
            body[name] = values[name]
    specs = {
        name: values[f"specs.{name}"] for name in REGISTER_SPECS if values.get(f"specs.{name}", "").strip()
    }
    if specs:
        body["specs"] = specs
    return body


def _field_errors(exc: ValidationError) -> dict[str, str]:
    errors: dict[str, str] = {}
    for detail in exc.errors():
        name = ".".join(str(part) for part in detail["loc"]) or "title"
        errors.setdefault(name, validation_message(detail))
    return errors


@router.post("/devices/new")
@page
def register_device(request: Request, form: AnyForm) -> Response:
    values = _form_values(form)
    with console_work(request, values) as work:
        if not work.user.is_admin:
            return error_page(request, 403, ADMIN_ONLY, work.user)
        try:
            body = EquipmentCreate.model_validate(_create_body(values))
        except ValidationError as exc:
            return _register_form(request, work, values, _field_errors(exc), 422)
        try:
            answer = equipment_service.create_equipment(work.session, work.actor, body)
        except ValidationFailed as exc:
            work.session.rollback()
            errors = {path: messages[0] for path, messages in (exc.errors or {}).items()}
            return _register_form(request, work, values, errors, 422)
        except Conflict as exc:  # the serial number is taken: said beside it
            work.session.rollback()
            return _register_form(request, work, values, {"serial_number": exc.message}, 409)
    device_id = _answer_id(answer)
    return redirect(f"{MOUNT_PATH}/devices/{device_id}?saved=registered")


def _answer_id(answer: bytes) -> str:
    return str(orjson.loads(answer)["id"])


@router.get("/devices/employees")
@page
def employee_options(request: Request, assignee_q: str = "") -> Response:
    """The assignee picker's choices for a search (htmx swaps them into the select)."""
    with console_work(request) as work:
        employees = employee_choices(work.session, assignee_q[:200])
        return render(request, "employee_options.html", employees=employees, values=None)


# --- one device ------------------------------------------------------------------------------------


@router.get("/devices/{device_id}")
@page
def device_page(request: Request, device_id: str) -> Response:
    with console_work(request) as work:
        return _device(request, work, device_id)


def _device(
    request: Request,
    work: ConsoleWork,
    device_id: str,
    status: int = 200,
    error: str = "",
    assign_error: str = "",
    custom_errors: dict[str, str] | None = None,
) -> Response:
    device = run_in_session(work.session, equipment_service.detail_plan(device_id))
    current = EquipmentStatus(device["status"])  # an Assigned device may be reassigned
    assignable = work.user.is_admin and (
        current == EquipmentStatus.ASSIGNED or EquipmentStatus.ASSIGNED in ALLOWED_MOVES.get(current, ())
    )
    entity = CustomFieldEntity.DEVICE
    custom = panel(work.session, entity, device["id"], device["custom_fields"], device["type"], custom_errors)
    return render(
        request,
        "device.html",
        status,
        user=work.user,
        nav="devices",
        device=device,
        moves=device_moves(device["status"]),
        employees=employee_choices(work.session, "") if assignable else None,
        values={},
        errors={"assignee_id": assign_error} if assign_error else {},
        custom=custom,
        error=error,
        saved=request.query_params.get("saved"),
    )


@router.post("/devices/{device_id}/status")
@page
def move_device(
    request: Request, device_id: str, status: FormText = "", csrf_token: FormText = ""
) -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        if not work.user.is_admin:
            return error_page(request, 403, ADMIN_ONLY, work.user)
        if status not in set(EquipmentStatus):
            return _device(request, work, device_id, 422, "Choose a status from the list.")
        try:
            equipment_service.update_equipment(
                work.session, work.actor, device_id, EquipmentPatch(status=EquipmentStatus(status))
            )
        except NotFound:
            raise
        except DomainError as exc:
            work.session.rollback()  # nothing of the refused move stays
            return _device(request, work, device_id, exc.status_code, exc.message)
    return redirect(f"{MOUNT_PATH}/devices/{device_id}?saved=1")


@router.post("/devices/{device_id}/assign")
@page
def assign_device(
    request: Request, device_id: str, assignee_id: FormText = "", csrf_token: FormText = ""
) -> Response:
    """Assign the device to an employee (or reassign it): the API's PATCH with status Assigned."""
    with console_work(request, {"csrf_token": csrf_token}) as work:
        if not work.user.is_admin:
            return error_page(request, 403, ADMIN_ONLY, work.user)
        try:
            patch = EquipmentPatch(status=EquipmentStatus.ASSIGNED, assignee_id=assignee_id or None)
        except ValidationError:
            patch = None
        if patch is None or patch.assignee_id is None:
            message = "Choose the employee to assign the device to (search by name or email)."
            return _device(request, work, device_id, 422, assign_error=message)
        try:
            equipment_service.update_equipment(work.session, work.actor, device_id, patch)
        except NotFound:
            raise
        except DomainError as exc:
            work.session.rollback()  # nothing of the refused assignment stays
            reason = first_message(exc) if isinstance(exc, ValidationFailed) else None
            return _device(request, work, device_id, exc.status_code, assign_error=reason or exc.message)
    return redirect(f"{MOUNT_PATH}/devices/{device_id}?saved=1")


@router.post("/devices/{device_id}/custom-fields")
@page
def update_device_custom_fields(request: Request, device_id: str, form: AnyForm) -> Response:
    """The device page's custom fields form, as a PATCH of `custom_fields` (sensitive ones kept
    unless a new value or a clear is given)."""
    values = _form_values(form)
    with console_work(request, values) as work:
        if not work.user.is_admin:
            return error_page(request, 403, ADMIN_ONLY, work.user)
        device = run_in_session(
            work.session, equipment_service.detail_plan(device_id)
        )  # another company's: 404
        given, errors = submitted_values(
            work.session, CustomFieldEntity.DEVICE, values, device["custom_fields"]
        )
        if not errors:
            try:
                equipment_service.update_equipment(
                    work.session, work.actor, device_id, EquipmentPatch(custom_fields=given)
                )
            except ValidationFailed as exc:
                work.session.rollback()
                errors = {
                    path.removeprefix("custom_fields."): messages[0]
                    for path, messages in (exc.errors or {}).items()
                }
            except DomainError as exc:
                work.session.rollback()
                return _device(request, work, device_id, exc.status_code, exc.message)
        if errors:
            return _device(request, work, device_id, 422, custom_errors=errors)
    return redirect(f"{MOUNT_PATH}/devices/{device_id}?saved=1")
