"""Orders across companies (the company console's list and filters, every company's), and each
order's stages moved forward by the operator (`payments.orders.advance`, as `outfitter orders
advance`)."""

from __future__ import annotations

import uuid
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from sqlalchemy import select

from outfitter.console.operator import actions
from outfitter.console.operator.web import MOUNT_PATH, OperatorWork, operator_work, page, render
from outfitter.console.orders import PER_PAGE, OrderQuery, _row, label
from outfitter.console.web import redirect
from outfitter.core.errors import Conflict, ValidationFailed
from outfitter.db.keyset import PageParams
from outfitter.db.tenancy import parse_uuid
from outfitter.models import STAGES, Company, Order, OrderKind, OrderStage, OrderStatus
from outfitter.payments import service as payments_service

router = APIRouter(include_in_schema=False)
FormText = Annotated[str, Form(max_length=1000)]


def _company_names(work: OperatorWork, order_ids: list[uuid.UUID]) -> dict[uuid.UUID, tuple[uuid.UUID, str]]:
    rows = work.session.execute(
        select(Order.id, Company.id, Company.name)
        .join(Company, Company.id == Order.company_id)
        .where(Order.id.in_(order_ids))
    )
    return {order_id: (company_id, name) for order_id, company_id, name in rows}


@router.get("/orders")
@page
def orders_page(request: Request) -> Response:
    query = OrderQuery.parse(request.query_params)
    with operator_work(request) as work:
        body = payments_service.list_orders(
            work.session, PageParams(query.page, PER_PAGE), query.kind, query.status, query.stage
        )
        rows = [_row(order) for order in body["data"]]
        return render(
            request,
            "orders.html",
            user=work.user,
            nav="orders",
            query=query,
            rows=rows,
            companies=_company_names(work, [row.order.id for row in rows]),
            total=body["total"],
            last_page=body["last_page"],
            kinds=list(OrderKind),
            statuses=list(OrderStatus),
            stages=list(OrderStage),
            label=label,
            urlencode=urlencode,
        )


def _order(
    request: Request, work: OperatorWork, order_id: str, status: int = 200, error: str = ""
) -> Response:
    order = payments_service.get_order(work.session, order_id)
    return render(
        request,
        "order.html",
        status,
        user=work.user,
        nav="orders",
        row=_row(order),
        company=_company_names(work, [order.id])[order.id],
        path=STAGES[order.kind],
        label=label,
        error=error,
        saved=request.query_params.get("saved", ""),
    )


@router.get("/orders/{order_id}")
@page
def order_page(request: Request, order_id: str) -> Response:
    with operator_work(request) as work:
        return _order(request, work, order_id)


@router.post("/orders/{order_id}/advance")
@page
def advance(
    request: Request,
    order_id: str,
    stage: FormText = "",
    item: FormText = "",
    note: FormText = "",
    csrf_token: FormText = "",
) -> Response:
    with operator_work(request, {"csrf_token": csrf_token}) as work:
        item_id = parse_uuid(item) if item else None
        try:
            if item and item_id is None:
                raise ValidationFailed.field("item", "Choose a device of this order from the list.")
            if len(note) > 500:
                raise ValidationFailed.field("note", "Keep the note to 500 characters.")
            actions.advance_order(
                work.session, order_id, stage, item_id, note.strip() or None, work.user.actor
            )
        except (Conflict, ValidationFailed) as exc:
            work.session.rollback()
            message = next(iter(exc.errors.values()))[0] if exc.errors else exc.message
            return _order(request, work, order_id, 409 if isinstance(exc, Conflict) else 422, message)
    return redirect(f"{MOUNT_PATH}/orders/{order_id}?saved=1")
