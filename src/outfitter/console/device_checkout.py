"""Paying to move devices the company owns, fees only: an offboarding from an employee's page (each
of their devices to Outfitter's storage, back to the office, or left with them), and a shipment
from storage to employees of one country. Both check, price and pay through the API's initiates
(`payments.offboard`, `payments.initiate.draft_storage`), reviewed first with every fee, with the
console's idempotency (console.checkout); the payment makes a retrieval (or onboarding) order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError
from sqlalchemy.orm import Session

from outfitter.catalog.repository import CatalogRepository
from outfitter.console.buying import employees_in
from outfitter.console.checkout import PaymentForm, pay, return_url, run_payment
from outfitter.console.checkout_review import render_review
from outfitter.console.devices import DeviceQuery, list_devices
from outfitter.console.pages import page, render
from outfitter.console.web import MOUNT_PATH, ConsoleWork, console_work, error_page, redirect
from outfitter.core.errors import DomainError, ValidationFailed, validation_message
from outfitter.models import EquipmentStatus, PaymentMethod, RetrievalDestination
from outfitter.payments import initiate, offboard
from outfitter.payments.drafts import Complete, Draft
from outfitter.payments.schemas import OffboardInitiateRequest, StorageInitiateRequest
from outfitter.people import service as employee_service
from outfitter.people.schemas import EmployeeOut

router = APIRouter(include_in_schema=False)
ONLY_ADMINS = "Only an admin can pay for retrievals and shipments."
STORAGE_ROWS = 100


def _admin_only(request: Request, work: ConsoleWork) -> Response | None:
    return None if work.user.is_admin else error_page(request, 403, ONLY_ADMINS, work.user)


def _method(values: dict[str, str]) -> str:
    return values.get("method") or PaymentMethod.CARD.value


BodyT = TypeVar("BodyT", bound=BaseModel)


def _body(model: type[BodyT], body: dict[str, object]) -> tuple[BodyT | None, str]:
    try:
        return model.model_validate(body), ""
    except ValidationError as exc:
        return None, validation_message(exc.errors()[0])


def _errors_text(exc: DomainError) -> str:
    details = [" ".join(messages) for messages in (exc.errors or {}).values()]
    return " ".join(details) or exc.message


# --- offboarding from an employee's page ---------------------------------------------------------


def _offboard_choices(values: dict[str, str]) -> dict[str, str]:
    """Each device's destination as the form chose it (`device-<id>`: storage, office or empty)."""
    return {
        name.removeprefix("device-"): value
        for name, value in values.items()
        if name.startswith("device-") and value in set(RetrievalDestination)
    }


def _offboard_body(
    request: Request, employee: EmployeeOut, values: dict[str, str]
) -> tuple[OffboardInitiateRequest | None, str]:
    chosen = _offboard_choices(values)
    if not chosen:
        return None, "Choose where at least one device goes."
    return _body(
        OffboardInitiateRequest,
        {
            "payment_method": _method(values),
            "employee_country_id": employee.country_code,
            "redirect_url": return_url(request),
            "orders": {
                str(employee.id): [
                    {"equipment_id": equipment_id, "destination": destination}
                    for equipment_id, destination in chosen.items()
                ]
            },
        },
    )


def _offboard_form(
    request: Request,
    work: ConsoleWork,
    employee_id: str,
    values: dict[str, str],
    status: int = 200,
    error: str = "",
) -> Response:
    employee = employee_service.get_employee(work.session, employee_id)
    on_their_way = {str(retrieval.equipment_id) for retrieval in employee.open_retrievals}
    devices = [
        device
        for device in employee.equipment
        if device.status == EquipmentStatus.ASSIGNED and str(device.id) not in on_their_way
    ]
    return render(
        request,
        "offboard.html",
        status,
        user=work.user,
        nav="employees",
        employee=employee,
        devices=devices,
        on_their_way=employee.open_retrievals,
        chosen=_offboard_choices(values),
        method=_method(values),
        methods=list(PaymentMethod),
        error=error,
    )


@router.get("/employees/{employee_id}/offboard")
@page
def offboard_page(request: Request, employee_id: str) -> Response:
    with console_work(request) as work:
        return _admin_only(request, work) or _offboard_form(request, work, employee_id, {})


@router.post("/employees/{employee_id}/offboard")
@page
def offboard_again(request: Request, employee_id: str, values: PaymentForm) -> Response:
    """Back from the review: the form with the choices made."""
    with console_work(request, values) as work:
        return _admin_only(request, work) or _offboard_form(request, work, employee_id, values)


def _offboard_review(
    request: Request,
    work: ConsoleWork,
    employee_id: str,
    values: dict[str, str],
    status: int = 200,
    error: str = "",
) -> Response:
    employee = employee_service.get_employee(work.session, employee_id)
    body, problem = _offboard_body(request, employee, values)
    if body is None:
        return _offboard_form(request, work, employee_id, values, 422, problem)
    try:
        draft = offboard.draft_offboard(work.session, body)
    except DomainError as exc:
        work.session.rollback()
        return _offboard_form(request, work, employee_id, values, exc.status_code, _errors_text(exc))
    base = f"{MOUNT_PATH}/employees/{employee_id}/offboard"
    return render_review(
        request,
        work,
        draft,
        title=f"Review the retrieval from {employee.first_name} {employee.last_name}",
        pay_action=f"{base}/pay",
        back=base,
        fields=[
            ("method", _method(values)),
            *((f"device-{k}", v) for k, v in _offboard_choices(values).items()),
        ],
        status=status,
        error=error,
    )


@router.post("/employees/{employee_id}/offboard/review")
@page
def review_offboard(request: Request, employee_id: str, values: PaymentForm) -> Response:
    with console_work(request, values) as work:
        return _admin_only(request, work) or _offboard_review(request, work, employee_id, values)


@router.post("/employees/{employee_id}/offboard/pay")
@page
def pay_offboard(request: Request, employee_id: str, values: PaymentForm) -> Response:
    def draft_of(session: Session) -> Draft:
        employee = employee_service.get_employee(session, employee_id)
        body, problem = _offboard_body(request, employee, values)
        if body is None:
            raise ValidationFailed(problem)
        return offboard.draft_offboard(session, body)

    def retry(work: ConsoleWork, exc: DomainError) -> Response:
        return _offboard_review(request, work, employee_id, values, exc.status_code, exc.message)

    return _run(request, values, draft_of, offboard.complete_offboard, retry)


def _run(
    request: Request,
    values: dict[str, str],
    draft_of: Callable[[Session], Draft],
    complete: Complete,
    retry: Callable[[ConsoleWork, DomainError], Response],
) -> Response:
    def attempt(work: ConsoleWork) -> Response:
        refused = _admin_only(request, work)
        if refused:
            return refused
        try:
            return redirect(pay(request, work, values, draft_of, complete))
        except DomainError as exc:  # nothing was written: the review again, with the reason
            return retry(work, exc)

    return run_payment(request, values, attempt)


# --- shipping from storage -----------------------------------------------------------------------


def _ship_choices(values: dict[str, str]) -> dict[str, str]:
    """Each storage device's employee as the form chose it (`ship-<device id>`: an employee id)."""
    return {
        name.removeprefix("ship-"): value
        for name, value in values.items()
        if name.startswith("ship-") and value
    }


def _ship_body(request: Request, values: dict[str, str]) -> tuple[StorageInitiateRequest | None, str]:
    chosen = _ship_choices(values)
    if not chosen:
        return None, "Choose who receives at least one device."
    orders: dict[str, list[str]] = {}
    for equipment_id, employee_id in chosen.items():
        orders.setdefault(employee_id, []).append(equipment_id)
    return _body(
        StorageInitiateRequest,
        {
            "payment_method": _method(values),
            "employee_country_id": values.get("country", ""),
            "redirect_url": return_url(request),
            "orders": orders,
        },
    )


def _ship_form(
    request: Request, work: ConsoleWork, values: dict[str, str], status: int = 200, error: str = ""
) -> Response:
    country = values.get("country", "")
    session = work.session
    employees: Sequence[object] = []
    if country:
        try:
            employees = employees_in(session, country)
        except ValidationFailed as exc:
            country, error = "", _errors_text(exc)
    listing = list_devices(session, DeviceQuery(status=EquipmentStatus.IN_STORAGE, per_page=STORAGE_ROWS))
    return render(
        request,
        "ship.html",
        status,
        user=work.user,
        nav="buy",
        country=country,
        countries=CatalogRepository(session).countries(),
        employees=employees,
        devices=listing.devices,
        total=listing.total,
        chosen=_ship_choices(values),
        method=_method(values),
        methods=list(PaymentMethod),
        error=error,
    )


@router.get("/buy/storage")
@page
def ship_page(request: Request) -> Response:
    with console_work(request) as work:
        return _ship_form(request, work, {"country": request.query_params.get("country", "")[:100]})


@router.post("/buy/storage")
@page
def ship_again(request: Request, values: PaymentForm) -> Response:
    with console_work(request, values) as work:
        return _ship_form(request, work, values)


def _ship_review(
    request: Request, work: ConsoleWork, values: dict[str, str], status: int = 200, error: str = ""
) -> Response:
    body, problem = _ship_body(request, values)
    if body is None:
        return _ship_form(request, work, values, 422, problem)
    try:
        draft = initiate.draft_storage(work.session, body)
    except DomainError as exc:
        work.session.rollback()
        return _ship_form(request, work, values, exc.status_code, _errors_text(exc))
    fields = [("country", values.get("country", "")), ("method", _method(values))]
    fields += [(f"ship-{k}", v) for k, v in _ship_choices(values).items()]
    return render_review(
        request,
        work,
        draft,
        title="Review the shipment from storage",
        pay_action=f"{MOUNT_PATH}/buy/storage/pay",
        back=f"{MOUNT_PATH}/buy/storage",
        fields=fields,
        status=status,
        error=error,
    )


@router.post("/buy/storage/review")
@page
def review_ship(request: Request, values: PaymentForm) -> Response:
    with console_work(request, values) as work:
        return _admin_only(request, work) or _ship_review(request, work, values)


@router.post("/buy/storage/pay")
@page
def pay_ship(request: Request, values: PaymentForm) -> Response:
    def draft_of(session: Session) -> Draft:
        body, problem = _ship_body(request, values)
        if body is None:
            raise ValidationFailed(problem)
        return initiate.draft_storage(session, body)

    def retry(work: ConsoleWork, exc: DomainError) -> Response:
        return _ship_review(request, work, values, exc.status_code, exc.message)

    return _run(request, values, draft_of, initiate.complete_storage, retry)
