"""Real concurrency on PostgreSQL: requests race through a real uvicorn server, each on its own
connection, and the invariants hold: one order per transaction, a wallet never below zero and equal
to its ledger, one winner per storage device."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from outfitter.models import (
    Equipment,
    Order,
    OrderItem,
    Transaction,
    TransactionStatus,
    Wallet,
    WalletEntry,
    WalletEntryKind,
    WebhookEvent,
)
from tests.factories import Api, all_at_once
from tests.payments.conftest import (
    LiveServer,
    add_assigned_device,
    add_credit,
    add_employee,
    add_storage_device,
    card_body,
    count,
    notice,
    prices,
    record_sandbox_payment,
    sandbox_gateway,
    signed,
)


def race(calls: list[Callable[[], httpx.Response]]) -> list[httpx.Response]:
    """Run every call in its own thread, all released at once."""
    results = all_at_once(calls)
    responses = [result for result in results if isinstance(result, httpx.Response)]
    assert len(responses) == len(results), [result for result in results if result not in responses][:3]
    return responses


def test_fifty_webhook_deliveries_racing_verify_make_one_order(
    postgres_only: None, api: Api, db: Session, live_server: LiveServer
) -> None:
    employee = add_employee(db, api.company_id)
    pricing = prices(api)[0]["asset_pricing"]["id"]
    with live_server.api(api.token) as client:
        data = client.post(
            "/client/transactions/initiate", json=card_body(employee, pricing, quantity=3)
        ).json()["data"]
        record_sandbox_payment(db, data["tx_ref"], f"{data['total_amount']:.2f}", "NGN")
        body, headers = signed(sandbox_gateway(live_server.app), notice(data["tx_ref"]), "msg_race")
        webhook_url = f"{live_server.url}/api/v2/webhooks/payments/sandbox"
        calls: list[Callable[[], httpx.Response]] = [
            lambda: httpx.post(webhook_url, content=body, headers=headers, timeout=60) for _ in range(50)
        ]
        calls += [lambda: client.get(f"/client/transactions/{data['tx_ref']}/verify") for _ in range(25)]
        responses = race(calls)
    assert {response.status_code for response in responses} == {200}
    outcomes = Counter(response.json()["data"].get("outcome") for response in responses[:50])
    assert outcomes["duplicate"] + outcomes["fulfilled"] + outcomes["already_settled"] == 50
    assert outcomes["fulfilled"] + outcomes["already_settled"] == 1  # only the recorded event acted
    assert {response.json()["data"]["status"] for response in responses[50:]} <= {"Pending", "Fulfilled"}
    assert count(db, Order) == 1 and count(db, OrderItem) == 3 and count(db, Equipment) == 3
    assert count(db, WebhookEvent) == 1
    assert db.scalars(select(Transaction.status)).one() == TransactionStatus.FULFILLED
    db.commit()


def test_notices_of_one_payment_with_distinct_ids_racing_say_fulfilled_once(
    postgres_only: None, api: Api, db: Session, live_server: LiveServer
) -> None:
    """A gateway may send several notices for one payment (each its own webhook-id): all are
    recorded, one order is made, and only the notice that made it answers and stores `fulfilled`."""
    employee = add_employee(db, api.company_id)
    pricing = prices(api)[0]["asset_pricing"]["id"]
    with live_server.api(api.token) as client:
        data = client.post("/client/transactions/initiate", json=card_body(employee, pricing)).json()["data"]
    record_sandbox_payment(db, data["tx_ref"], f"{data['total_amount']:.2f}", "NGN")
    gateway = sandbox_gateway(live_server.app)
    webhook_url = f"{live_server.url}/api/v2/webhooks/payments/sandbox"
    notices = [signed(gateway, notice(data["tx_ref"]), f"msg_{index}") for index in range(20)]
    responses = race(
        [
            lambda body=body, headers=headers: httpx.post(
                webhook_url, content=body, headers=headers, timeout=60
            )
            for body, headers in notices
        ]
    )
    answered = Counter(response.json()["data"]["outcome"] for response in responses)
    assert answered == {"fulfilled": 1, "already_settled": 19}, answered
    stored = Counter(db.scalars(select(WebhookEvent.outcome)).all())
    db.commit()
    assert stored == answered and count(db, Order) == 1


def test_hundred_credit_initiates_never_overdraw_the_wallet(
    postgres_only: None, api: Api, db: Session, live_server: LiveServer
) -> None:
    employee = add_employee(db, api.company_id)
    cheapest = min(prices(api), key=lambda record: Decimal(record["asset_pricing"]["amount"]))
    body = card_body(employee, cheapest["asset_pricing"]["id"], payment_method="Credit")
    with live_server.api(api.token) as client:
        # Price one purchase with a tiny top-up that cannot pay it (402 writes nothing).
        add_credit(db, api.company_id, "NGN", "1")
        refused = client.post("/client/transactions/initiate", json=body)
        assert refused.status_code == 402
        cost = Decimal(refused.json()["message"].split("costs ")[1].split(" ")[0])
        affordable = 37
        add_credit(db, api.company_id, "NGN", str(cost * affordable + cost / 2 - 1))
        responses = race(
            [lambda: client.post("/client/transactions/initiate", json=body) for _ in range(100)]
        )
    statuses = Counter(response.status_code for response in responses)
    assert statuses == {200: affordable, 402: 100 - affordable}, statuses
    assert all(
        response.json()["data"]["status"] == "Fulfilled"
        for response in responses
        if response.status_code == 200
    )
    balance = db.scalars(select(Wallet.balance)).one()
    ledger = db.scalar(select(func.sum(WalletEntry.amount)))
    debits = db.scalars(
        select(WalletEntry.balance_after).where(WalletEntry.kind == WalletEntryKind.DEBIT)
    ).all()
    db.commit()
    assert balance == ledger == cost / 2 and balance >= 0
    # Each debit saw the balance the previous one left: a strict chain down to the final balance.
    funded = cost * affordable + cost / 2
    assert sorted(debits) == sorted(funded - cost * step for step in range(1, affordable + 1))
    assert count(db, Transaction) == affordable and count(db, Order) == affordable
    assert count(db, WalletEntry) == affordable + 2
    # Stamped once locked: the entries' times follow the chain, and the balance's is its last entry's.
    chain = db.scalars(select(WalletEntry).order_by(WalletEntry.created_at)).all()
    assert [entry.balance_after for entry in chain[2:]] == sorted(debits, reverse=True)
    assert db.scalars(select(Wallet.updated_at)).one() == chain[-1].created_at
    db.commit()


def test_two_initiates_naming_one_storage_device_one_wins(
    postgres_only: None, api: Api, db: Session, live_server: LiveServer
) -> None:
    employee = add_employee(db, api.company_id)
    with live_server.api(api.token) as client:
        for round_number in range(5):
            device = add_storage_device(db, api.company_id, f"Laptop {round_number}")
            body = {
                "payment_method": "Card",
                "employee_country_id": "NG",
                "orders": {str(employee): [str(device)]},
            }
            responses = race(
                [
                    lambda body=body: client.post(
                        "/client/transactions/onboard-from-storage/initiate", json=body
                    )
                    for _ in range(2)
                ]
            )
            assert sorted(response.status_code for response in responses) == [200, 409], [
                r.text for r in responses
            ]
    assert count(db, Transaction) == 5


def test_two_offboard_initiates_naming_one_device_one_wins(
    postgres_only: None, api: Api, db: Session, live_server: LiveServer
) -> None:
    employee = add_employee(db, api.company_id)
    add_credit(db, api.company_id, "NGN", "10000000")
    with live_server.api(api.token) as client:
        for round_number, method in enumerate(["Card", "Card", "Credit", "Credit"]):
            device = add_assigned_device(db, employee, f"Laptop {round_number}")
            body = {
                "payment_method": method,
                "employee_country_id": "NG",
                "orders": {str(employee): [str(device)]},
            }
            responses = race(
                [
                    lambda body=body: client.post("/client/transactions/offboard/initiate", json=body)
                    for _ in range(2)
                ]
            )
            assert sorted(response.status_code for response in responses) == [200, 409], [
                r.text for r in responses
            ]
    assert count(db, Transaction) == 4
    assert count(db, Order) == 2  # the Credit winners; the Card ones wait for their payer


def test_sandbox_pay_over_http_sends_its_webhook_after_the_redirect(
    api: Api, db: Session, live_server: LiveServer
) -> None:
    """The sandbox posts its webhook to the service's own URL (no stand-in sender), on both backends,
    in the background once the redirect is sent; the notice fulfils the order on its own."""
    employee = add_employee(db, api.company_id)
    pricing = prices(api)[0]["asset_pricing"]["id"]
    with live_server.api(api.token) as client:
        data = client.post("/client/transactions/initiate", json=card_body(employee, pricing)).json()["data"]
        assert data["link"].startswith(live_server.url)
        paid = httpx.post(f"{data['link']}/pay", follow_redirects=False, timeout=60)
        assert paid.status_code == 303 and "status=successful" in paid.headers["location"]
        deadline = time.monotonic() + 30  # a bound on the wait, not a timing assertion
        while db.scalars(select(WebhookEvent.outcome)).one_or_none() is None and time.monotonic() < deadline:
            db.commit()
            time.sleep(0.05)
        assert db.scalars(select(WebhookEvent.outcome)).one() == "fulfilled"
        db.commit()
        assert client.get("/client/orders").json()["data"]["total"] == 1


def test_a_burst_of_pay_clicks_never_takes_the_threads_requests_need(
    api: Api, db: Session, live_server: LiveServer
) -> None:
    """Twelve Pay clicks whose notices the service is slow to take (held here, as a busy service
    would hold them): the notices wait in the sandbox's own threads, so the app's worker threads,
    as many as its pool has connections, stay free, and another request is answered meanwhile."""
    gateway = sandbox_gateway(live_server.app)
    held, sent_from = threading.Event(), []
    original = gateway.sender

    def slow_service(url: str, body: bytes, headers: dict[str, str]) -> int:
        sent_from.append(threading.current_thread().name)
        held.wait(timeout=30)  # released below; a bound, not a timing
        return 200

    employee = add_employee(db, api.company_id)
    pricing = prices(api)[0]["asset_pricing"]["id"]
    gateway.sender = slow_service
    try:
        with live_server.api(api.token) as client:
            links = [
                client.post("/client/transactions/initiate", json=card_body(employee, pricing)).json()[
                    "data"
                ]["link"]
                for _ in range(12)
            ]
            clicks = race([lambda link=link: httpx.post(f"{link}/pay", timeout=30) for link in links])
            assert [click.status_code for click in clicks] == [303] * 12
            # Every worker thread of the app would be waiting on a held notice if notices took them.
            meanwhile = client.post("/client/departments", json={"name": "Meanwhile"})
            assert meanwhile.status_code == 201, meanwhile.text
            assert meanwhile.json()["data"]["name"] == "Meanwhile"
    finally:
        held.set()
        deadline = time.monotonic() + 30  # every click's notice sent (to the stand-in) before it goes
        while len(sent_from) < 12 and time.monotonic() < deadline:
            time.sleep(0.05)
        gateway.sender = original
    assert len(sent_from) == 12 and all(name.startswith("sandbox-notice") for name in sent_from), sent_from


def test_a_payments_fulfilment_racing_its_employees_delete_never_leaves_a_device_assigned_to_no_one(
    postgres_only: None, api: Api, db: Session, live_server: LiveServer
) -> None:
    """The gateway's notice and the employee's DELETE at once: fulfilment holds the employee it
    equips, so either it commits first (the devices Assigned to them, the DELETE a 409) or the DELETE
    does (the order still made, its devices Unassigned). Always one order, never a 500. The DELETE
    leaves a little later each round, so that some rounds land while fulfilment is under way."""
    pricing = prices(api)[0]["asset_pricing"]["id"]
    webhook_url = f"{live_server.url}/api/v2/webhooks/payments/sandbox"
    with live_server.api(api.token) as client:
        for round_number in range(12):
            employee = add_employee(db, api.company_id, first=f"Racer{round_number}")
            data = client.post(
                "/client/transactions/initiate", json=card_body(employee, pricing, quantity=2)
            ).json()["data"]
            record_sandbox_payment(db, data["tx_ref"], f"{data['total_amount']:.2f}", "NGN")
            body, headers = signed(
                sandbox_gateway(live_server.app), notice(data["tx_ref"]), f"m{round_number}"
            )

            def notify(body: bytes = body, headers: dict[str, str] = headers) -> httpx.Response:
                return httpx.post(webhook_url, content=body, headers=headers, timeout=60)

            def delete(employee: uuid.UUID = employee, delay: float = round_number * 0.006) -> httpx.Response:
                time.sleep(delay)
                return client.delete(f"/client/employees/{employee}")

            notified, deleted = race([notify, delete])
            assert notified.status_code == 200 and notified.json()["data"]["outcome"] == "fulfilled"
            listed = client.get("/client/orders", params={"per_page": 100}).json()["data"]["data"]
            order = [made for made in listed if made["tx_ref"] == data["tx_ref"]]
            assert len(order) == 1, order
            devices = [
                client.get(f"/client/equipment/{item['equipment_id']}").json()["data"]
                for item in order[0]["items"]
            ]
            states = {(device["status"], (device["assignee"] or {}).get("id")) for device in devices}
            states |= {("item", (item["employee"] or {}).get("id")) for item in order[0]["items"]}
            if deleted.status_code == 409:  # fulfilment first: the employee holds both devices
                assert "still holds 2 Assigned" in deleted.text, deleted.text
                assert states == {("Assigned", str(employee)), ("item", str(employee))}
            else:  # the DELETE first: the devices wait for someone
                assert deleted.status_code == 200, deleted.text
                assert states == {("Unassigned", None), ("item", None)}
    assert count(db, Order) == 12


@pytest.mark.parametrize("method", ["Card", "Credit"])
def test_an_initiate_racing_its_employees_delete_either_names_them_or_finds_them_gone(
    postgres_only: None, api: Api, db: Session, live_server: LiveServer, method: str
) -> None:
    """An initiate holds the employees it names, as every write naming one does: it lands first (a
    Card transaction Pending for them and the DELETE then removes them; a Credit one fulfilled, its
    device Assigned, and the DELETE a 409), or the DELETE does and the initiate answers 422. Never a
    500 from the transaction's items naming an employee deleted meanwhile."""
    pricing = prices(api)[0]["asset_pricing"]["id"]
    add_credit(db, api.company_id, "NGN", "100000000")
    with live_server.api(api.token) as client:
        for round_number in range(12):
            employee = add_employee(db, api.company_id, first=f"Buyer{round_number}")
            body = card_body(employee, pricing, payment_method=method)

            def initiate(body: dict[str, Any] = body) -> httpx.Response:
                return client.post("/client/transactions/initiate", json=body)

            def delete(employee: uuid.UUID = employee, delay: float = round_number * 0.003) -> httpx.Response:
                time.sleep(delay)
                return client.delete(f"/client/employees/{employee}")

            initiated, deleted = race([initiate, delete])
            if initiated.status_code == 422:  # the DELETE first
                assert deleted.status_code == 200, deleted.text
                assert initiated.json()["errors"] == {
                    f"orders.{employee}": ["Unknown employee: give the id of one of your employees."]
                }
                continue
            assert initiated.status_code == 200, initiated.text
            if method == "Credit":  # paid and fulfilled at once: the employee holds the device
                assert initiated.json()["data"]["status"] == "Fulfilled"
                assert deleted.status_code == 409 and "still holds 1 Assigned" in deleted.text
            else:
                assert initiated.json()["data"]["status"] == "Pending"
                assert deleted.status_code == 200, deleted.text
