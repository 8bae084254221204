"""The orders pages: the list (`GET /client/orders`' filters, in the URL) and each order with its
items' stages, read through the payments service the API calls."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.datastructures import QueryParams

from outfitter.console.devices import _whole
from outfitter.console.pages import page, render
from outfitter.console.web import console_work
from outfitter.db.keyset import PageParams
from outfitter.models import STAGES, OrderKind, OrderStage, OrderStatus
from outfitter.payments import service as payments_service
from outfitter.payments.repository import order_stage
from outfitter.payments.schemas import OrderOut

router = APIRouter(include_in_schema=False)
PER_PAGE = 25


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


@router.get("/orders/{order_id}")
@page
def order_page(request: Request, order_id: str) -> Response:
    with console_work(request) as work:
        order = payments_service.get_order(work.session, order_id)
        return render(
            request,
            "order.html",
            user=work.user,
            nav="orders",
            row=_row(order),
            path=STAGES[order.kind],
            label=label,
        )
