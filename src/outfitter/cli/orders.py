"""Orders tracked to the door: `orders list`, `orders advance` and `orders cancel`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from outfitter.cli.common import JsonFlag, app, emit, fail, parse_id, unit_of_work

# Orders: operators move their stages (docs/orders.md). The session works across companies until
# the order is found, then acts as its company (events and tenancy need one).
orders_app = typer.Typer(
    help="Orders tracked to the door: list, stages and cancellation.", no_args_is_help=True
)
app.add_typer(orders_app, name="orders")


def _order_payload(order: Any) -> dict[str, Any]:
    from outfitter.payments.presenters import order_out

    return order_out(order).model_dump(mode="json")


def _operate_on_order(order_id: str, action: Any) -> dict[str, Any]:
    from sqlalchemy import select

    from outfitter.core.errors import DomainError
    from outfitter.db.tenancy import bind_company
    from outfitter.models import Order

    order_uuid = parse_id(order_id, "ORDER_ID")
    with unit_of_work() as session:
        company_id = session.scalar(select(Order.company_id).where(Order.id == order_uuid))
        if company_id is None:
            fail(f"no order with id {order_id}")
        bind_company(session, company_id)
        try:
            order = action(session, order_uuid)
        except DomainError as exc:
            fail(exc.message)
        return _order_payload(order)


def _order_line(payload: dict[str, Any]) -> str:
    stages = ", ".join(f"{item['id']}: {item['stage']}" for item in payload["items"])
    return f"order {payload['id']} ({payload['kind']}) is {payload['status']}; items {stages}"


@orders_app.command("list")
def orders_list(
    kind: Annotated[
        str | None, typer.Option("--kind", help="purchase, storage_onboarding or retrieval")
    ] = None,
    status: Annotated[
        str | None, typer.Option("--status", help="in_progress, completed or cancelled")
    ] = None,
    company: Annotated[str | None, typer.Option("--company", help="Only this company's (its id)")] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many, newest first", min=1)] = 50,
    as_json: JsonFlag = False,
) -> None:
    """List orders, newest first, with each item's stage: every company's, or one's."""
    from outfitter.models import Company, OrderKind, OrderStatus
    from outfitter.payments.repository import OrderRepository

    kinds, statuses = {str(each) for each in OrderKind}, {str(each) for each in OrderStatus}
    if kind is not None and kind not in kinds:
        fail(f"--kind takes one of {', '.join(sorted(kinds))}, got {kind!r}")
    if status is not None and status not in statuses:
        fail(f"--status takes one of {', '.join(sorted(statuses))}, got {status!r}")
    company_uuid = parse_id(company, "--company") if company is not None else None
    with unit_of_work() as session:
        statement = OrderRepository(session).listing(
            OrderKind(kind) if kind else None, OrderStatus(status) if status else None
        )
        if company_uuid is not None:
            if session.get(Company, company_uuid) is None:
                fail(f"no company with id {company}")
            from outfitter.models import Order

            statement = statement.where(Order.company_id == company_uuid)
        orders = [
            {**_order_payload(order), "company_id": str(order.company_id)}
            for order in session.scalars(statement.limit(limit)).unique()
        ]
    lines = [f"{_order_line(order)} (company {order['company_id']})" for order in orders]
    emit(as_json, {"orders": orders}, "\n".join(lines) or "no orders")


@orders_app.command("advance")
def orders_advance(
    order_id: str,
    stage: str,
    item: Annotated[str | None, typer.Option("--item", help="Only this item (default: every item)")] = None,
    note: Annotated[str | None, typer.Option("--note", help="A note on the stage reached")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Move an order's items forward to STAGE, recording every stage passed."""
    from outfitter.payments.orders import advance

    item_uuid = parse_id(item, "--item") if item is not None else None
    if note is not None and len(note) > 500:
        fail("--note must be at most 500 characters")
    payload = _operate_on_order(order_id, lambda session, oid: advance(session, oid, stage, item_uuid, note))
    emit(as_json, payload, _order_line(payload))


@orders_app.command("cancel")
def orders_cancel(order_id: str, as_json: JsonFlag = False) -> None:
    """Cancel an order in progress (items keep their stages; devices not yet retrieved stay Assigned)."""
    from outfitter.payments.orders import cancel

    payload = _operate_on_order(order_id, cancel)
    emit(as_json, payload, _order_line(payload))
