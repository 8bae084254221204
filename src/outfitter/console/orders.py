"""The orders pages: the list (`GET /client/orders`' filters, in the URL) and each order with its
items' stages, read through the payments service the API calls."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from starlette.datastructures import QueryParams

from outfitter.console.devices import _whole
from outfitter.console.pages import page, render
from outfitter.console.web import MOUNT_PATH, ConsoleWork, console_work, error_page, redirect
from outfitter.core.errors import Conflict
from outfitter.db.keyset import PageParams
from outfitter.models import STAGES, OrderKind, OrderStage, OrderStatus, RetrievalDestination
from outfitter.payments import service as payments_service
from outfitter.payments.repository import order_stage
from outfitter.payments.schemas import OrderItemOut, OrderOut

router = APIRouter(include_in_schema=False)
PER_PAGE = 25
FormText = Annotated[str, Form(max_length=1000)]


def label(value: str) -> str:
    """`storage_onboarding` -> `Storage onboarding`."""
    return value.replace("_", " ").capitalize()


@dataclass(frozen=True)
class OrderQuery:
    """What the list shows; `errors` says, by field, which values were set aside and why."""

    kind: OrderKind | None = None
    status: OrderStatus | None = None
    stage: OrderStage | None = None
    page: int = 1
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, params: QueryParams) -> OrderQuery:
        errors: dict[str, str] = {}
        found: dict[str, Any] = {}
        for name, enum in (("kind", OrderKind), ("status", OrderStatus), ("stage", OrderStage)):
            value = params.get(name) or None
            if value is not None and value not in set(enum):
                errors[name] = f"Choose a {name} from the list."
                value = None
            found[name] = enum(value) if value else None
        return cls(**found, page=_whole(params.get("page"), 1), errors=errors)

    def params(self, **changes: Any) -> dict[str, str]:
        view = replace(self, **changes)
        values = {
            "kind": view.kind.value if view.kind else "",
            "status": view.status.value if view.status else "",
            "stage": view.stage.value if view.stage else "",
            "page": "" if view.page == 1 else str(view.page),
        }
        return {name: value for name, value in values.items() if value}


@dataclass(frozen=True)
class OrderRow:
    order: OrderOut
    stage: OrderStage | None  # its least advanced item's (the `stage` filter's rule)


def _row(order: OrderOut) -> OrderRow:
    return OrderRow(order, order_stage(order.kind, [item.stage for item in order.items]))


@router.get("/orders")
@page
def orders_page(request: Request) -> Response:
    query = OrderQuery.parse(request.query_params)
    with console_work(request) as work:
        body = payments_service.list_orders(
            work.session, PageParams(query.page, PER_PAGE), query.kind, query.status, query.stage
        )
        return render(
            request,
            "orders.html",
            user=work.user,
            nav="orders",
            query=query,
            rows=[_row(order) for order in body["data"]],
            total=body["total"],
            last_page=body["last_page"],
            kinds=list(OrderKind),
            statuses=list(OrderStatus),
            stages=list(OrderStage),
            label=label,
            urlencode=urlencode,
        )


@dataclass(frozen=True)
class TrackerStep:
    """One stage of the order's tracker: when every device concerned had reached it."""

    stage: str
    at: datetime | None
    state: str  # done, current, upcoming or cancelled


def _reached(item: OrderItemOut, stage: OrderStage) -> datetime | None:
    return next((step.at for step in item.stages if step.stage == stage), None)


def _journey(kind: OrderKind, item: OrderItemOut) -> list[OrderStage]:
    """The stages an item passes: its kind's, up to `received` for a device going back to the
    office (payments.orders.last_stage)."""
    path = list(STAGES[kind])
    if item.destination == RetrievalDestination.OFFICE:
        return path[: path.index(OrderStage.RECEIVED) + 1]
    return path


def tracker(order: OrderOut) -> list[TrackerStep]:
    """The order's stages, placed to delivered (or back), each with the time its last device
    reached it; the first not reached is current while the order is in progress; a cancelled
    order ends with its cancellation."""
    steps: list[TrackerStep] = []
    current_placed = False
    for stage in STAGES[order.kind]:
        concerned = [item for item in order.items if stage in _journey(order.kind, item)]
        if not concerned:
            continue
        times = [_reached(item, stage) for item in concerned]
        reached = [at for at in times if at is not None]
        at = max(reached) if len(reached) == len(times) else None
        if at is not None:
            state = "done"
        elif order.status == OrderStatus.IN_PROGRESS and not current_placed:
            state, current_placed = "current", True
        else:
            state = "upcoming"
        steps.append(TrackerStep(label(stage.value), at, state))
    if order.status == OrderStatus.CANCELLED:
        steps.append(TrackerStep("Cancelled", order.updated_at, "cancelled"))
    return steps


def receivable(order: OrderOut) -> bool:
    """Whether `POST /client/orders/{orderId}/received` applies: a retrieval in progress with a
    device coming back to the office not received yet."""
    before = set(STAGES[OrderKind.RETRIEVAL][: STAGES[OrderKind.RETRIEVAL].index(OrderStage.RECEIVED)])
    return (
        order.kind == OrderKind.RETRIEVAL
        and order.status == OrderStatus.IN_PROGRESS
        and any(
            item.destination == RetrievalDestination.OFFICE and item.stage in before for item in order.items
        )
    )


def _order(
    request: Request, work: ConsoleWork, order_id: str, status: int = 200, error: str = ""
) -> Response:
    order = payments_service.get_order(work.session, order_id)
    return render(
        request,
        "order.html",
        status,
        user=work.user,
        nav="orders",
        row=_row(order),
        path=STAGES[order.kind],
        label=label,
        tracker=tracker(order),
        receivable=receivable(order),
        error=error,
        saved=request.query_params.get("saved"),
    )


@router.get("/orders/{order_id}")
@page
def order_page(request: Request, order_id: str) -> Response:
    with console_work(request) as work:
        return _order(request, work, order_id)


@router.post("/orders/{order_id}/received")
@page
def mark_received(request: Request, order_id: str, csrf_token: FormText = "") -> Response:
    """The API's received mark for every device of the retrieval coming back to the office."""
    with console_work(request, {"csrf_token": csrf_token}) as work:
        if not work.user.is_admin:
            return error_page(request, 403, "Only an admin can mark devices received.", work.user)
        try:
            payments_service.receive_order_items(work.session, order_id, None, work.user.actor)
        except Conflict as exc:
            work.session.rollback()
            return _order(request, work, order_id, 409, exc.message)
    return redirect(f"{MOUNT_PATH}/orders/{order_id}?saved=received")
