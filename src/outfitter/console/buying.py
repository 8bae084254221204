"""Buying from the catalog: the assets priced for a country and currency (`GET /client/assets`),
an order of lines (an employee of that country, an item, a quantity), a review with every fee,
then payment by Card (the gateway's page) or Credit (the wallet), through the API's initiate
(`payments.initiate.draft_catalog` / `complete_catalog`) with its idempotency (console.checkout).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError
from sqlalchemy.orm import Session

from outfitter.catalog import service as catalog_service
from outfitter.catalog.repository import CatalogRepository
from outfitter.console.checkout import PaymentForm, pay, return_url, run_payment
from outfitter.console.checkout_review import render_review, spec_name
from outfitter.console.pages import page, render
from outfitter.console.web import MOUNT_PATH, ConsoleWork, console_work, error_page, redirect
from outfitter.core.errors import DomainError, ValidationFailed, validation_message
from outfitter.db.keyset import PageParams
from outfitter.models import FeeSchedule, PaymentMethod
from outfitter.payments import initiate
from outfitter.payments.fees import schedule_for, to_minor_units
from outfitter.payments.schemas import InitiateRequest
from outfitter.people import service as employee_service
from outfitter.people.schemas import EmployeeOut

router = APIRouter(include_in_schema=False)

MAX_LINES = 100
FIRST_LINES = 2
CATALOG_ROWS = 100  # one page of the API's list, at its largest
EMPLOYEE_CHOICES = 200
ONLY_ADMINS = "Only an admin can buy or pay."


@dataclass(frozen=True)
class Line:
    employee: str = ""
    pricing: str = ""
    quantity: str = "1"

    @property
    def empty(self) -> bool:
        return not self.employee and not self.pricing


@dataclass
class PurchaseForm:
    """The purchase as the form sends it; `errors` by field name (`line-<n>-<part>`, `form`)."""

    country: str = ""
    currency: str = ""
    method: str = PaymentMethod.CARD.value
    lines: list[Line] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    line_of: dict[tuple[str, int], int] = field(default_factory=dict)  # (employee, index) -> line

    @classmethod
    def parse(cls, values: dict[str, str]) -> PurchaseForm:
        count = min(MAX_LINES, _number(values.get("lines"), FIRST_LINES))
        lines = [
            Line(
                values.get(f"line-{n}-employee", ""),
                values.get(f"line-{n}-pricing", ""),
                values.get(f"line-{n}-quantity", "") or "1",
            )
            for n in range(count)
        ]
        return cls(values.get("country", ""), values.get("currency", ""), values.get("method", ""), lines)

    def fields(self) -> list[tuple[str, str]]:
        """The form again, as hidden fields (the review's payment form)."""
        found = [("country", self.country), ("currency", self.currency), ("method", self.method)]
        found.append(("lines", str(len(self.lines))))
        for n, line in enumerate(self.lines):
            found += [
                (f"line-{n}-employee", line.employee),
                (f"line-{n}-pricing", line.pricing),
                (f"line-{n}-quantity", line.quantity),
            ]
        return found

    def request(self, redirect_url: str | None) -> InitiateRequest | None:
        """The API's body for the filled lines; None with `errors` set when a line is half filled
        or the body's own checks refuse it."""
        orders: dict[str, list[dict[str, object]]] = {}
        for n, line in enumerate(self.lines):
            if line.empty:
                continue
            if not line.employee:
                self.errors[f"line-{n}-employee"] = "Choose who receives this item."
            if not line.pricing:
                self.errors[f"line-{n}-pricing"] = "Choose an item for this employee."
            if not line.quantity.isdigit() or not 1 <= int(line.quantity) <= 100:
                self.errors[f"line-{n}-quantity"] = "A whole number from 1 to 100."
            if not self.errors:
                items = orders.setdefault(line.employee, [])
                self.line_of[(line.employee, len(items))] = n
                items.append({"asset_pricing_id": line.pricing, "quantity": int(line.quantity)})
        if not orders and not self.errors:
            self.errors["form"] = "Choose at least one item for an employee."
        if self.errors:
            return None
        body = {
            "payment_method": self.method,
            "employee_country_id": self.country,
            "redirect_url": redirect_url,
            "orders": orders,
        }
        try:
            return InitiateRequest.model_validate(body)
        except ValidationError as exc:
            for detail in exc.errors():
                name = "method" if detail["loc"][:1] == ("payment_method",) else "form"
                self.errors.setdefault(name, validation_message(detail))
            return None

    def place(self, exc: DomainError) -> None:
        """A service's refusal beside the line it concerns (`orders.<employee>.<i>...`)."""
        for path, messages in (exc.errors or {}).items():
            parts = path.split(".")
            name = "form"
            if parts[0] == "orders" and len(parts) >= 3 and parts[2].isdigit():
                n = self.line_of.get((parts[1], int(parts[2])))
                name = f"line-{n}-pricing" if n is not None else "form"
            elif parts[0] == "orders" and len(parts) == 2:
                n = next((n for n, line in enumerate(self.lines) if line.employee == parts[1]), None)
                name = f"line-{n}-employee" if n is not None else "form"
            self.errors.setdefault(name, " ".join(messages))
        if not exc.errors:
            self.errors.setdefault("form", exc.message)


def _number(value: str | None, default: int) -> int:
    if value is None or not value.isdigit() or len(value) > 4:
        return default
    return max(1, int(value))


def _catalog(request: Request, work: ConsoleWork, form: PurchaseForm, status: int = 200) -> Response:
    """The catalog of the form's country and currency (or the chooser) with the order's lines."""
    session = work.session
    reference = CatalogRepository(session)
    offers: Sequence[object] = []
    employees: Sequence[object] = []
    market_error = ""
    schedule: FeeSchedule | None = None
    if form.country or form.currency:
        try:
            country, currency = catalog_service.resolve_market(session, form.country, form.currency)
            offers, _ = catalog_service.list_assets(session, country, currency, PageParams(1, CATALOG_ROWS))
            employees = employees_in(session, country.code)
            form.country, form.currency = country.code, currency.code
            schedule = _schedule(session, currency.code)
        except ValidationFailed as exc:
            market_error = " ".join(" ".join(messages) for messages in (exc.errors or {}).values())
            status = 422
    return render(
        request,
        "buy.html",
        status,
        user=work.user,
        nav="buy",
        form=form,
        countries=reference.countries(),
        currencies=reference.currencies(),
        offers=offers,
        employees=employees,
        market_error=market_error,
        methods=list(PaymentMethod),
        spec_name=spec_name,
        fees=_fees_shown(schedule, form.currency),
    )


def _schedule(session: Session, currency: str) -> FeeSchedule | None:
    try:
        return schedule_for(session, currency, "currency")
    except ValidationFailed:
        return None  # the page says so; the review refuses it with the service's words


def _fees_shown(schedule: FeeSchedule | None, currency: str) -> list[tuple[str, str]]:
    """The schedule's catalog fees as a person reads them (the service computes them)."""
    if schedule is None:
        return []

    def percent(value: Decimal) -> str:
        return f"{value.normalize():f} %"

    return [
        ("Insurance", f"{percent(schedule.insurance_percent)} of the equipment"),
        ("Platform fee", f"{percent(schedule.platform_percent)} of the equipment"),
        ("Onboarding", f"{to_minor_units(schedule.onboarding_fee_per_device, currency)} {currency} a device"),
        (
            "Device configuration",
            f"{to_minor_units(schedule.device_config_fee_per_device, currency)} {currency} a device",
        ),
        ("Card gateway fee", f"{percent(schedule.gateway_percent)} of the rest, by Card only"),
    ]


def employees_in(session: Session, country_code: str) -> list[EmployeeOut]:
    """The employees of a country (the first EMPLOYEE_CHOICES by name), through the API's list."""
    filters = employee_service.resolve_filters(session, country=country_code, department_id=None, search=None)
    records, _ = employee_service.list_employees(session, PageParams(1, EMPLOYEE_CHOICES), filters)
    return sorted(records, key=lambda employee: (employee.first_name, employee.last_name))


@router.get("/buy")
@page
def buy_page(request: Request) -> Response:
    params = request.query_params
    form = PurchaseForm(params.get("country", ""), params.get("currency", ""))
    form.lines = [Line() for _ in range(FIRST_LINES)]
    with console_work(request) as work:
        return _catalog(request, work, form)


def _admin_only(request: Request, work: ConsoleWork) -> Response | None:
    return None if work.user.is_admin else error_page(request, 403, ONLY_ADMINS, work.user)


def _review(
    request: Request, work: ConsoleWork, form: PurchaseForm, status: int = 200, error: str = ""
) -> Response:
    """The review of a checked purchase, or the catalog with the reasons beside the lines."""
    body = form.request(return_url(request))
    if body is None:
        return _catalog(request, work, form, 422)
    try:
        draft = initiate.draft_catalog(work.session, body)
    except DomainError as exc:
        work.session.rollback()
        form.place(exc)
        return _catalog(request, work, form, exc.status_code)
    return render_review(
        request,
        work,
        draft,
        title="Review the purchase",
        pay_action=f"{MOUNT_PATH}/buy/pay",
        back=f"{MOUNT_PATH}/buy/edit",
        fields=form.fields(),
        status=status,
        error=error,
    )


@router.post("/buy/review")
@page
def review_purchase(request: Request, values: PaymentForm) -> Response:
    form = PurchaseForm.parse(values)
    with console_work(request, values) as work:
        refused = _admin_only(request, work)
        if refused:
            return refused
        if "add_line" in values:
            form.lines.append(Line())
            return _catalog(request, work, form)
        return _review(request, work, form)


@router.post("/buy/edit")
@page
def edit_purchase(request: Request, values: PaymentForm) -> Response:
    """Back from the review to the catalog, the lines as they were."""
    with console_work(request, values) as work:
        return _catalog(request, work, PurchaseForm.parse(values))


@router.post("/buy/pay")
@page
def pay_purchase(request: Request, values: PaymentForm) -> Response:
    form = PurchaseForm.parse(values)

    def attempt(work: ConsoleWork) -> Response:
        refused = _admin_only(request, work)
        if refused:
            return refused
        body = form.request(return_url(request))
        if body is None:
            return _catalog(request, work, form, 422)
        try:
            target = pay(
                request,
                work,
                values,
                lambda session: initiate.draft_catalog(session, body),
                initiate.complete_catalog,
            )
        except DomainError as exc:  # nothing was written: the review again, with the reason
            return _review(request, work, PurchaseForm.parse(values), exc.status_code, exc.message)
        return redirect(target)

    return run_payment(request, values, attempt)
