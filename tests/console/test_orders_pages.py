"""The dashboard's order and spend figures against the API's answers, and the orders pages: the
list's filters from the URL, an order's stages, tenancy."""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from fastapi import FastAPI
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from outfitter.db.tenancy import TenantSession, bind_company
from outfitter.payments import orders as order_tracking
from tests.console.conftest import sign_up
from tests.factories import Api
from tests.payments.conftest import add_assigned_device, add_credit, add_employee, card_body, prices

FIGURE = re.compile(r'<td data-figure="([^"]+)">(\d+)</td>')
SPEND = re.compile(r'<td data-spend="([A-Z]{3}) (\d{4}-\d{2})">([0-9.]+)</td>')


def advance(
    engine: Engine, company_id: uuid.UUID, order_id: str, stage: str, item: str | None = None
) -> None:
    """As `outfitter orders advance` does."""
    with TenantSession(engine) as session, session.begin():
        bind_company(session, company_id)
        order_tracking.advance(session, uuid.UUID(order_id), stage, uuid.UUID(item) if item else None)


def place_orders(api: Api, db: Session, engine: Engine) -> dict[str, dict[str, Any]]:
    """A purchase of two devices at product_setup, and a retrieval of two with one picked up."""
    employee = add_employee(db, api.company_id)
    add_credit(db, api.company_id, "NGN", "900000000")
    pricing = prices(api)[0]["asset_pricing"]["id"]
    bought = api.post(
        "/client/transactions/initiate", {**card_body(employee, pricing, 2), "payment_method": "Credit"}
    )
    assert bought.status_code == 200, bought.text
    purchase = bought.json()["data"]["order_id"]
    advance(engine, api.company_id, purchase, "product_setup")
    devices = [str(add_assigned_device(db, employee, title)) for title in ("MacBook Pro", "iPhone 15")]
    offboarded = api.post(
        "/client/transactions/offboard/initiate",
        {"payment_method": "Credit", "employee_country_id": "NG", "orders": {str(employee): devices}},
    )
    assert offboarded.status_code == 200, offboarded.text
    retrieval = api.get(f"/client/orders/{offboarded.json()['data']['order_id']}").json()["data"]
    advance(engine, api.company_id, retrieval["id"], "picked_up", retrieval["items"][0]["id"])
    return {
        "purchase": api.get(f"/client/orders/{purchase}").json()["data"],
        "retrieval": api.get(f"/client/orders/{retrieval['id']}").json()["data"],
    }


def every_page(api: Api, path: str, **params: Any) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    page = 1
    while True:
        data = api.get(path, page=page, per_page=100, **params).json()["data"]
        records += data["data"]
        if page >= data["last_page"]:
            return records
        page += 1


def test_dashboard_order_stage_retrieval_and_spend_figures_equal_the_apis(
    app: FastAPI, engine: Engine, api: Api, db: Session, demo_catalog: None
) -> None:
    orders = place_orders(api, db, engine)
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    page = ada.get("/")
    assert page.status_code == 200
    shown = dict(FIGURE.findall(page.text))

    # By stage: each bar is GET /client/orders?status=in_progress&stage=... 's total, and links there.
    api_stages = {}
    for stage in ("order_placed", "product_setup", "retrieval_scheduled", "picked_up", "in_transit"):
        total = api.get("/client/orders", status="in_progress", stage=stage).json()["data"]["total"]
        api_stages[stage] = total
        assert int(shown[stage.replace("_", " ").capitalize()]) == total, stage
        assert f'href="/console/orders?status=in_progress&amp;stage={stage}"' in page.text
    # The least advanced item decides: one retrieval item still scheduled keeps the order there.
    assert api_stages == {
        "order_placed": 0,
        "product_setup": 1,
        "retrieval_scheduled": 1,
        "picked_up": 0,
        "in_transit": 0,
    }

    # Awaiting retrieval: the devices of in-progress retrievals not yet received.
    pending = {"retrieval_scheduled", "picked_up", "in_transit"}
    in_progress = every_page(api, "/client/orders", kind="retrieval", status="in_progress")
    awaiting = sum(1 for order in in_progress for item in order["items"] if item["stage"] in pending)
    assert awaiting == 2 == len(orders["retrieval"]["items"])
    assert re.search(r'id="awaiting-retrieval">(\d+)<', page.text).group(1) == str(awaiting)  # type: ignore[union-attr]
    assert 'href="/console/orders?kind=retrieval&amp;status=in_progress"' in page.text

    # Spend: each month's figure is the sum of the fulfilled transactions' totals paid that month.
    expected: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for transaction in every_page(api, "/client/transactions", status="Fulfilled"):
        # The list has no settled time; these were all paid at once, this month.
        expected[(transaction["currency"], datetime.now(UTC).strftime("%Y-%m"))] += Decimal(
            transaction["total_amount"]
        )
    spend = {(currency, month): Decimal(amount) for currency, month, amount in SPEND.findall(page.text)}
    assert len(spend) == 12  # one currency, twelve months
    assert {key: value for key, value in spend.items() if value} == dict(expected)
    assert len(expected) == 1 and next(iter(expected.values())) > 0
    assert re.search(r'id="spend-total-NGN">([0-9.]+)<', page.text).group(1) == str(  # type: ignore[union-attr]
        next(iter(expected.values()))
    )
    assert 'role="img" aria-labelledby="spend-NGN-caption"' in page.text


def test_orders_list_filters_from_the_url_and_an_orders_page(
    app: FastAPI, engine: Engine, api: Api, other_api: Api, db: Session, demo_catalog: None
) -> None:
    orders = place_orders(api, db, engine)
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    listed = ada.get("/orders")
    links = re.findall(r'<a href="/console/orders/([0-9a-f-]{36})">', listed.text)
    assert links == [order["id"] for order in every_page(api, "/client/orders")]
    assert 'id="result-count">(2)<' in listed.text

    at_setup = ada.get("/orders", params={"status": "in_progress", "stage": "product_setup"})
    purchase = orders["purchase"]
    assert re.findall(r'<a href="/console/orders/([0-9a-f-]{36})">', at_setup.text) == [purchase["id"]]
    assert f'<td data-devices="{purchase["id"]}">2</td>' in at_setup.text
    assert '<option value="product_setup" selected>' in at_setup.text  # the form shows the view
    retrievals = ada.get("/orders", params={"kind": "retrieval"})
    assert re.findall(r'<a href="/console/orders/([0-9a-f-]{36})">', retrievals.text) == [
        orders["retrieval"]["id"]
    ]
    # A value the API would refuse is set aside with a message beside its field, never a 500.
    odd = ada.get("/orders", params={"stage": "lost", "page": "x"})
    assert odd.status_code == 200 and "Choose a stage from the list." in odd.text
    assert 'id="result-count">(2)<' in odd.text

    retrieval = ada.get(f"/orders/{orders['retrieval']['id']}")
    assert retrieval.status_code == 200
    assert 'id="order-stage">Retrieval scheduled<' in retrieval.text
    assert retrieval.text.count(
        "Picked up"
    ) >= 1 and "Still to come: Picked up, In transit, Received, Inspected." in (retrieval.text)
    for item in orders["retrieval"]["items"]:
        assert f'href="/console/devices/{item["equipment_id"]}"' in retrieval.text

    # Another company's order, or no order at all: 404, as the API answers.
    theirs = place_orders(other_api, db, engine)["purchase"]["id"]
    assert other_api.get(f"/client/orders/{theirs}").status_code == 200
    assert ada.get(f"/orders/{theirs}").status_code == 404
    assert ada.get("/orders/not-an-id").status_code == 404
    assert theirs not in ada.get("/orders").text
