"""Orders tracked to the door: `orders advance` and `orders cancel`."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from sqlalchemy import select

from outfitter.cli.common import JsonFlag, app, emit, fail, parse_id, unit_of_work
from outfitter.db.tenancy import bind_company

# Orders: operators move their stages (docs/orders.md). The session works across companies until
# the order is found, then acts as its company (events and tenancy need one).
orders_app = typer.Typer(help="Orders tracked to the door: stages and cancellation.", no_args_is_help=True)
app.add_typer(orders_app, name="orders")


def _order_payload(order: Any) -> dict[str, Any]:
    from outfitter.payments.presenters import order_out

    return order_out(order).model_dump(mode="json")


def _operate_on_order(order_id: str, action: Any) -> dict[str, Any]:
    from outfitter.core.errors import DomainError
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
