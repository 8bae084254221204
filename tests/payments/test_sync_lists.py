"""The transaction and order lists in cursor mode, and with `updated_since`: exactly the records
changed (a new payment, an order moving through its stages)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from outfitter.core.timestamps import format_timestamp
from outfitter.db.tenancy import TenantSession, bind_company
from outfitter.models import Order, Transaction
from outfitter.payments import orders
from tests.factories import Api, assert_error, walk_cursor
from tests.payments.conftest import add_credit, add_employee, card_body, prices


def _buy(api: Api, employee: uuid.UUID, pricing: str) -> dict[str, Any]:
    response = api.post(
        "/client/transactions/initiate", card_body(employee, pricing, payment_method="Credit")
    )
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


@pytest.fixture
def purchases(api: Api, db: Session) -> list[dict[str, Any]]:
    """Three fulfilled Credit purchases: three transactions, three orders."""
    employee = add_employee(db, api.company_id)
    add_credit(db, api.company_id, "NGN", "1000000000")
    pricing = prices(api)[0]["asset_pricing"]["id"]
    return [_buy(api, employee, pricing) for _ in range(3)]


def _since(db: Session) -> str:
    newest = max(db.scalar(select(func.max(model.updated_at))) for model in (Transaction, Order))
    db.rollback()
    return format_timestamp(newest + timedelta(microseconds=1))


@pytest.mark.parametrize("path", ["/client/transactions", "/client/orders"])
def test_cursor_walks_give_the_pages_records(api: Api, purchases: list[dict[str, Any]], path: str) -> None:
    paged = api.get(path).json()["data"]["data"]
    assert len(paged) == 3
    assert walk_cursor(api, path, limit=2) == paged
    assert (
        walk_cursor(api, path, limit=1, status="Fulfilled" if "transactions" in path else "in_progress")
        == paged
    )
    refs = [record["tx_ref"] for record in paged]
    assert refs == [purchase["tx_ref"] for purchase in reversed(purchases)]  # newest first


def test_cursor_with_a_filter_that_matches_nothing(api: Api, purchases: list[dict[str, Any]]) -> None:
    page = api.get("/client/transactions", status="Pending", limit=5).json()["data"]
    assert page == {"data": [], "next_cursor": None, "limit": 5}
    cursor = api.get("/client/orders", limit=1).json()["data"]["next_cursor"]
    assert_error(api.get("/client/orders", limit=1, cursor=cursor, kind="retrieval"), 422, "other filters")


def test_updated_since_gives_exactly_what_changed(
    api: Api, db: Session, purchases: list[dict[str, Any]]
) -> None:
    since = _since(db)
    assert walk_cursor(api, "/client/orders", updated_since=since) == []
    assert walk_cursor(api, "/client/transactions", updated_since=since) == []

    first_order = purchases[0]["order_id"]
    with TenantSession(db.get_bind()) as session, session.begin():
        bind_company(session, api.company_id)
        orders.advance(session, uuid.UUID(first_order), "order_confirmed")
    employee = uuid.UUID(api.get("/client/employees").json()["data"]["data"][0]["id"])
    new = _buy(api, employee, prices(api)[0]["asset_pricing"]["id"])

    changed_orders = walk_cursor(api, "/client/orders", updated_since=since, limit=1)
    assert [order["id"] for order in changed_orders] == [first_order, new["order_id"]]
    assert changed_orders[0]["items"][0]["stage"] == "order_confirmed"
    assert changed_orders[0] == api.get(f"/client/orders/{first_order}").json()["data"]
    changed_transactions = walk_cursor(api, "/client/transactions", updated_since=since)
    assert [transaction["tx_ref"] for transaction in changed_transactions] == [new["tx_ref"]]
    # A client resumes from the last record's own updated_at (inclusive: that record comes again).
    resumed = walk_cursor(api, "/client/transactions", updated_since=changed_transactions[-1]["updated_at"])
    assert [transaction["tx_ref"] for transaction in resumed] == [new["tx_ref"]]
