"""Buying, paying and retrieving through the console's pages (HTTP, both databases): the catalog,
a review whose fees are the transaction's, Credit refused when short and paid once the wallet is
credited, one transaction for a double click, a Card purchase settled by the page's verify, an
offboarding to a retrieval order with its tracker and the received mark, the transactions list,
its export and the wallet, a viewer's refusal and another company's records."""

from __future__ import annotations

import csv
import io
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from outfitter.models import GatewayPaymentStatus, IdempotencyRecord
from outfitter.payments.gateways.base import GatewayError
from tests.console.conftest import PASSWORD, Browser, form_token, invite_token, sign_up
from tests.factories import Api
from tests.payments.conftest import (
    LiveServer,
    add_assigned_device,
    add_credit,
    add_employee,
    add_storage_device,
    count,
    live_server,  # noqa: F401  (the module's server)
    prices,
    record_sandbox_payment,
    sandbox_gateway,
)

HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')
FEE = re.compile(r'<td data-fee="([^"]+)">([0-9.]+) [A-Z]{3}</td>')


def pay_form(page: str) -> dict[str, str]:
    """The review's payment form as the browser would send it."""
    form = page.split('id="pay-form"', 1)[1].split("</form>", 1)[0]
    return dict(HIDDEN.findall(form))


def purchase(ada: Browser, employees: list[uuid.UUID], pricing: str, method: str) -> dict[str, str]:
    data = {"csrf_token": ada.csrf("/buy"), "country": "NG", "currency": "NGN", "method": method}
    data["lines"] = str(len(employees))
    for n, employee in enumerate(employees):
        data |= {f"line-{n}-employee": str(employee), f"line-{n}-pricing": pricing, f"line-{n}-quantity": "1"}
    return data


def transactions(api: Api) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = api.get("/client/transactions", per_page=100).json()["data"]["data"]
    return records


def test_credit_refused_when_short_then_paid_once_for_a_double_click(
    app: FastAPI, engine: Engine, api: Api, db: Session, demo_catalog: None
) -> None:
    first, second = add_employee(db, api.company_id), add_employee(db, api.company_id, first="Grace")
    offer = prices(api)[0]
    ada = sign_up(app, engine, api.company_id, "ada@example.com")

    catalog = ada.get("/buy", params={"country": "NG", "currency": "NGN"})
    assert catalog.status_code == 200
    assert f'<td data-price="{offer["asset_pricing"]["id"]}">{offer["asset_pricing"]["amount"]} NGN</td>' in (
        catalog.text
    )
    assert str(first) in catalog.text and str(second) in catalog.text  # both are choices
    schedule = catalog.text.split('id="fee-schedule"')[1].split("</table>")[0]
    for rule in ("3 % of the equipment", "15000.00 NGN a device", "1.5 % of the rest, by Card only"):
        assert rule in schedule, rule

    review = ada.post("/buy/review", purchase(ada, [first, second], offer["asset_pricing"]["id"], "Credit"))
    assert review.status_code == 200, review.text
    fees = {name: Decimal(amount) for name, amount in FEE.findall(review.text)}
    total = Decimal(re.search(r'id="review-total">([0-9.]+) NGN<', review.text).group(1))  # type: ignore[union-attr]
    assert fees["Equipment"] == 2 * Decimal(offer["asset_pricing"]["amount"])
    assert fees["Card gateway fee"] == 0 and sum(fees.values()) == total
    assert 'id="wallet-balance">0.00 NGN<' in review.text and 'id="wallet-short"' in review.text

    # Short: refused with the reason, nothing written, and the page carries a fresh key.
    form = pay_form(review.text)
    refused = ada.post("/buy/pay", form)
    assert refused.status_code == 402
    assert f"Not enough credit: this costs {total} NGN and the wallet holds 0.00 NGN." in refused.text
    assert transactions(api) == []
    retry = pay_form(refused.text)
    assert retry["idempotency_key"] != form["idempotency_key"]

    add_credit(db, api.company_id, "NGN", str(total + 100))
    paid = ada.post("/buy/pay", retry)
    assert paid.status_code == 303, paid.text
    location = paid.headers["location"]
    again = ada.post("/buy/pay", retry)  # a double click, or a reload of the answer
    assert again.status_code == 303 and again.headers["location"] == location
    listed = transactions(api)
    assert len(listed) == 1 and location == f"/console/transactions/{listed[0]['tx_ref']}"
    assert listed[0]["status"] == "Fulfilled" and Decimal(listed[0]["total_amount"]) == total
    events = api.get("/client/events", type="transaction.initiated").json()["data"]["data"]
    assert [event["actor"] for event in events] == ["console:ada@example.com"]

    page = ada.get(location.removeprefix("/console"))
    assert 'id="tx-status">Fulfilled<' in page.text
    assert f'<td id="tx-total">{total} NGN</td>' in page.text
    order_id = listed[0]["order_id"]
    assert f'href="/console/orders/{order_id}" id="tx-order"' in page.text
    told = ada.get("/activity").text  # each change an event, linking to its record
    assert f'href="/console/transactions/{listed[0]["tx_ref"]}"' in told
    assert f'href="/console/orders/{listed[0]["order_id"]}"' in told
    assert 'href="/console/wallet?currency=NGN"' in told
    wallet = ada.get("/wallet")
    assert '<td data-balance="NGN">100.00 NGN</td>' in wallet.text
    assert f'href="/console/transactions/{listed[0]["tx_ref"]}"' in wallet.text

    order = ada.get(f"/orders/{order_id}")
    tracker = re.findall(r'<li class="(\w+)"[^>]*>([A-Z][a-z ]+)', order.text.split('id="tracker"')[1])
    assert tracker == [
        ("done", "Order placed"),
        ("current", "Order confirmed"),
        ("upcoming", "Product setup"),
        ("upcoming", "Product packaged"),
        ("upcoming", "Order in transit"),
        ("upcoming", "Order delivered"),
    ]
    placed = api.get(f"/client/orders/{order_id}").json()["data"]["items"][0]["stages"][0]["at"]
    assert f'<time datetime="{placed[:19]}' in order.text.split('id="tracker"')[1]
    assert order.text.count("Device for ") == 2
    assert f'For <a href="/console/employees/{second}">Grace Lovelace</a>' in order.text


def test_card_purchase_goes_to_the_gateway_and_its_page_shows_the_outcome(
    app: FastAPI, engine: Engine, api: Api, db: Session, demo_catalog: None
) -> None:
    employee = add_employee(db, api.company_id)
    offer = prices(api)[0]
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    review = ada.post("/buy/review", purchase(ada, [employee], offer["asset_pricing"]["id"], "Card"))
    fees = {name: Decimal(amount) for name, amount in FEE.findall(review.text)}
    assert fees["Card gateway fee"] > 0
    form = pay_form(review.text)

    # The gateway cannot be reached: the reason on the review, nothing written, and the form's key
    # (committed before the gateway was asked) released, so the same form pays once it answers.
    gateway = sandbox_gateway(app)

    def unreachable(request: Any) -> str:
        raise GatewayError("connection refused")

    original, gateway.create_checkout = gateway.create_checkout, unreachable  # type: ignore[method-assign]
    try:
        down = ada.post("/buy/pay", form)
    finally:
        gateway.create_checkout = original  # type: ignore[method-assign]
    assert down.status_code == 502
    assert "The payment gateway could not start the payment: connection refused" in down.text
    assert transactions(api) == [] and count(db, IdempotencyRecord) == 0

    sent = ada.post("/buy/pay", form)
    assert sent.status_code == 303
    (listed,) = transactions(api)
    assert sent.headers["location"].endswith(f"/sandbox/checkout/{listed['tx_ref']}")
    assert ada.post("/buy/pay", form).headers["location"] == sent.headers["location"]
    assert len(transactions(api)) == 1

    back = ada.get("/transactions/return", params={"status": "successful", "tx_ref": listed["tx_ref"]})
    assert back.headers["location"] == f"/console/transactions/{listed['tx_ref']}?returned=1"
    pending = ada.get(back.headers["location"].removeprefix("/console"))
    assert 'id="tx-status">Pending<' in pending.text and "hx-trigger" in pending.text
    # The payer paid; the webhook is late: the page asks the gateway, as verify does.
    record_sandbox_payment(db, listed["tx_ref"], listed["total_amount"], "NGN")
    outcome = ada.get(f"/transactions/{listed['tx_ref']}/outcome")
    assert 'id="tx-status">Fulfilled<' in outcome.text and "hx-trigger" not in outcome.text
    assert api.get(f"/client/transactions/{listed['tx_ref']}/verify").json()["data"]["status"] == "Fulfilled"

    # Another payment, declined at the gateway: its page says so, with the reason.
    declined = ada.post(
        "/buy/pay",
        pay_form(
            ada.post("/buy/review", purchase(ada, [employee], offer["asset_pricing"]["id"], "Card")).text
        ),
    )
    tx_ref = declined.headers["location"].rsplit("/", 1)[1]
    record_sandbox_payment(db, tx_ref, "1", "NGN", GatewayPaymentStatus.DECLINED)
    failed = ada.get(f"/transactions/{tx_ref}")
    assert 'id="tx-status">Failed<' in failed.text
    assert '<p id="tx-reason">The payment was declined.</p>' in failed.text
    assert ada.get("/transactions/return", params={"tx_ref": "../x"}).status_code == 404


def test_offboarding_from_an_employee_to_a_retrieval_order_received_at_the_office(
    app: FastAPI, engine: Engine, api: Api, db: Session, demo_catalog: None
) -> None:
    employee = add_employee(db, api.company_id)
    laptop, phone = (add_assigned_device(db, employee, title) for title in ("MacBook Pro", "iPhone 15"))
    add_credit(db, api.company_id, "NGN", "1000000")
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    assert f'href="/console/employees/{employee}/offboard"' in ada.get(f"/employees/{employee}").text
    form_page = ada.get(f"/employees/{employee}/offboard")
    assert "MacBook Pro" in form_page.text and "iPhone 15" in form_page.text
    data = {
        "csrf_token": form_token(form_page),
        f"device-{laptop}": "storage",
        f"device-{phone}": "office",
        "method": "Credit",
    }
    review = ada.post(f"/employees/{employee}/offboard/review", data)
    assert review.status_code == 200, review.text
    fees = dict(FEE.findall(review.text))
    assert fees == {  # the NGN schedule: two retrievals and inspections, one storage
        "Retrieval": "50000.00",
        "Inspection": "24000.00",
        "Storage": "18000.00",
        "Card gateway fee": "0.00",
    }
    paid = ada.post(f"/employees/{employee}/offboard/pay", pay_form(review.text))
    assert paid.status_code == 303, paid.text
    (listed,) = transactions(api)
    assert listed["kind"] == "offboard" and listed["status"] == "Fulfilled"
    order_id = listed["order_id"]

    order = ada.get(f"/orders/{order_id}")
    assert 'aria-current="step">Picked up' in order.text and 'id="mark-received"' in order.text
    received = ada.post(f"/orders/{order_id}/received", {"csrf_token": form_token(order)})
    assert received.headers["location"] == f"/console/orders/{order_id}?saved=received"
    shown = api.get(f"/client/orders/{order_id}").json()["data"]
    stages = {item["equipment_id"]: item["stage"] for item in shown["items"]}
    assert stages == {str(phone): "received", str(laptop): "retrieval_scheduled"}
    assert api.get(f"/client/equipment/{phone}").json()["data"]["status"] == "Unassigned"
    after = ada.get(f"/orders/{order_id}")
    assert 'id="mark-received"' not in after.text  # only the storage item is left: Outfitter's
    refused = ada.post(f"/orders/{order_id}/received", {"csrf_token": form_token(order)})
    assert refused.status_code == 409 and 'id="order-error"' in refused.text


def test_shipping_from_storage_lists_exports_and_other_companies(
    app: FastAPI, engine: Engine, api: Api, other_api: Api, db: Session, demo_catalog: None
) -> None:
    employee = add_employee(db, api.company_id)
    device = add_storage_device(db, api.company_id)
    add_credit(db, api.company_id, "NGN", "1000000")
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    ship = ada.get("/buy/storage", params={"country": "NG"})
    data = {
        "csrf_token": form_token(ship),
        "country": "NG",
        f"ship-{device}": str(employee),
        "method": "Credit",
    }
    review = ada.post("/buy/storage/review", data)
    assert dict(FEE.findall(review.text)) == {
        "Onboarding": "15000.00",
        "Device configuration": "10000.00",
        "Card gateway fee": "0.00",
    }
    assert ada.post("/buy/storage/pay", pay_form(review.text)).status_code == 303
    assert api.get(f"/client/equipment/{device}").json()["data"]["status"] == "Assigned"

    listed = ada.get("/transactions", params={"kind": "storage", "method": "Credit"})
    (tx,) = transactions(api)
    assert f'href="/console/transactions/{tx["tx_ref"]}"' in listed.text
    assert 'id="result-count">(1)<' in listed.text
    assert "<li>Onboarding: 15000.00</li><li>Device configuration: 10000.00</li>" in listed.text
    assert 'id="result-count">(0)<' in ada.get("/transactions", params={"kind": "catalog"}).text
    odd = ada.get("/transactions", params={"status": "Lost", "currency": "naira"})
    assert odd.status_code == 200 and "Choose a status from the list." in odd.text

    exported = ada.get("/transactions/export", params={"kind": "storage"})
    assert exported.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert [(row["tx_ref"], row["onboarding_fee"], row["total_amount"]) for row in rows] == [
        (tx["tx_ref"], "15000.00", tx["total_amount"])
    ]
    assert list(csv.DictReader(io.StringIO(ada.get("/transactions/export?kind=catalog").text))) == []
    people = ada.get("/employees/export", params={"country": "NG"})
    assert people.text == api.get("/client/employees/export", country="NG").text

    # Another company's records are not found; its forms change nothing.
    theirs = add_employee(db, other_api.company_id)
    their_device = add_assigned_device(db, theirs)
    assert ada.get(f"/employees/{theirs}/offboard").status_code == 404
    token = form_token(ada.get("/transactions"))
    assert (
        ada.post(
            f"/employees/{theirs}/offboard/review",
            {"csrf_token": token, f"device-{their_device}": "storage", "method": "Credit"},
        ).status_code
        == 404
    )
    add_credit(db, other_api.company_id, "NGN", "1000000")
    other = other_api.post(
        "/client/transactions/offboard/initiate",
        {
            "payment_method": "Credit",
            "employee_country_id": "NG",
            "orders": {str(theirs): [str(their_device)]},
        },
    ).json()["data"]
    assert ada.get(f"/transactions/{other['tx_ref']}").status_code == 404
    assert ada.post(f"/orders/{other['order_id']}/received", {"csrf_token": token}).status_code == 404
    assert other["tx_ref"] not in ada.get("/transactions").text

    # A viewer reads, but cannot pay; a form without its token changes nothing.
    viewer = sign_up(app, engine, api.company_id, "vic@example.com", "viewer")
    assert viewer.get("/buy", params={"country": "NG", "currency": "NGN"}).status_code == 200
    refused = viewer.post("/buy/pay", {**pay_form(review.text), "csrf_token": viewer.csrf("/buy")})
    assert refused.status_code == 403
    assert ada.post("/buy/review", {"country": "NG"}).status_code == 403
    assert len(transactions(api)) == 1


def test_two_clicks_at_once_make_one_card_transaction(
    engine: Engine,
    live_server: LiveServer,  # noqa: F811
    api: Api,
    db: Session,
    demo_catalog: None,
) -> None:
    """Two Pay requests with one form's key, sent together to a real server: the second waits for
    the first, still at the gateway, and is sent to the same checkout page."""
    employee = add_employee(db, api.company_id)
    pricing = prices(api)[0]["asset_pricing"]["id"]
    origin = {"Origin": live_server.url}
    with httpx.Client(base_url=f"{live_server.url}/console", headers=origin, timeout=60) as browser:
        token = invite_token(engine, api.company_id, "ada@example.com")
        invite = browser.get(f"/invite/{token}")
        signed = browser.post(
            f"/invite/{token}",
            data={"password": PASSWORD, "confirm": PASSWORD, "csrf_token": form_token(invite)},
        )
        assert signed.status_code == 303
        data = {
            "csrf_token": form_token(browser.get("/buy")),
            "country": "NG",
            "currency": "NGN",
            "method": "Card",
            "lines": "1",
            "line-0-employee": str(employee),
            "line-0-pricing": pricing,
            "line-0-quantity": "2",
        }
        form = pay_form(browser.post("/buy/review", data=data).text)
        # The gateway takes a second to open the checkout: the second request arrives meanwhile.
        gateway = sandbox_gateway(live_server.app)
        opened: list[str] = []

        def slow_checkout(request: Any) -> str:
            opened.append(request.tx_ref)
            time.sleep(1)
            return original(request)

        original, gateway.create_checkout = gateway.create_checkout, slow_checkout  # type: ignore[method-assign]
        try:
            with ThreadPoolExecutor(max_workers=2) as pool:
                first = pool.submit(browser.post, "/buy/pay", data=form)
                time.sleep(0.3)
                second = pool.submit(browser.post, "/buy/pay", data=form)
                answers = [first.result(), second.result()]
        finally:
            gateway.create_checkout = original  # type: ignore[method-assign]
    assert len(opened) == 1  # one payment registered with the gateway
    assert answers[1].elapsed.total_seconds() > 0.4  # the second waited for the first's answer
    assert [answer.status_code for answer in answers] == [303, 303]
    assert answers[0].headers["location"] == answers[1].headers["location"]
    (listed,) = transactions(api)
    assert answers[0].headers["location"].endswith(f"/sandbox/checkout/{listed['tx_ref']}")


def test_the_review_says_what_is_missing_beside_each_line_and_writes_nothing(
    app: FastAPI, engine: Engine, api: Api, db: Session, demo_catalog: None
) -> None:
    employee = add_employee(db, api.company_id)
    offer = prices(api)[0]
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    base = purchase(ada, [employee], offer["asset_pricing"]["id"], "Card")

    nothing = ada.post("/buy/review", {**base, "line-0-employee": "", "line-0-pricing": ""})
    assert nothing.status_code == 422 and "Choose at least one item for an employee." in nothing.text
    half = ada.post("/buy/review", {**base, "line-0-pricing": "", "line-0-quantity": "0"})
    assert half.status_code == 422
    assert 'id="line-0-pricing-error">Choose an item for this employee.<' in half.text
    assert 'id="line-0-quantity-error">A whole number from 1 to 100.<' in half.text
    nobody = ada.post("/buy/review", {**base, "line-0-employee": ""})
    assert 'id="line-0-employee-error">Choose who receives this item.<' in nobody.text
    # An item the catalog does not price: the service's reason beside that line.
    unknown = ada.post("/buy/review", {**base, "line-0-pricing": str(uuid.uuid4())})
    assert unknown.status_code in (404, 422) and 'id="line-0-pricing-error"' in unknown.text
    assert transactions(api) == []
