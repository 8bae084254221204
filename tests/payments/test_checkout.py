"""The sandbox checkout as a payer uses it: the page, Pay and Decline, the webhook it sends, verify."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.db.base import utcnow
from outfitter.models import (
    Currency,
    Equipment,
    EquipmentHistory,
    EquipmentReservation,
    EquipmentSource,
    EquipmentState,
    EquipmentStatus,
    Order,
    Transaction,
    WebhookEvent,
    WebhookOutcome,
)
from outfitter.payments.gateways.sandbox import SandboxGateway
from tests.factories import Api, assert_error
from tests.payments.conftest import add_employee, add_storage_device, card_body, count, prices


def start(api: Api, db: Session, quantity: int = 1) -> tuple[dict[str, object], uuid.UUID, dict[str, object]]:
    employee = add_employee(db, api.company_id)
    listed = next(record for record in prices(api) if record["category"] == "Laptops")
    response = api.post(
        "/client/transactions/initiate", card_body(employee, listed["asset_pricing"]["id"], quantity)
    )
    assert response.status_code == 200, response.text
    return response.json()["data"], employee, listed


def test_the_checkout_page_shows_amount_items_and_two_forms(
    api: Api, db: Session, client: TestClient
) -> None:
    data, _, listed = start(api, db)
    page = client.get(str(data["link"]))
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == "frame-ancestors 'none'"  # no framed Pay button
    assert page.headers["x-content-type-options"] == "nosniff"
    html = page.text
    assert f"{data['total_amount']:,.2f}" in html and "NGN" in html and str(listed["name"]) in html
    assert 'action="/sandbox/checkout/' in html and "/pay" in html and "/decline" in html
    assert client.get("/sandbox/checkout/OTF-NOPE").status_code == 404


@pytest.mark.parametrize(("minor_units", "shown"), [(0, "1,234,568"), (3, "1,234,567.890")])
def test_the_checkout_page_writes_amounts_at_their_currencys_minor_unit(
    api: Api, db: Session, client: TestClient, minor_units: int, shown: str
) -> None:
    """JPY has no minor unit and KWD three: the page writes 15,227 and 35.400, never 15,227.00."""
    data, _, _ = start(api, db)
    transaction = db.scalars(select(Transaction).where(Transaction.tx_ref == data["tx_ref"])).one()
    transaction.total_amount = Decimal("1234567.890")
    ngn = db.scalars(select(Currency).where(Currency.code == "NGN")).one()
    kept, ngn.minor_units = ngn.minor_units, minor_units
    db.commit()
    try:
        page = client.get(str(data["link"])).text
    finally:
        ngn.minor_units = kept
        db.commit()
    assert f'<span id="total">{shown}</span>' in page


def test_pay_sends_the_webhook_then_redirects_and_the_order_exists(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    data, employee, listed = start(api, db, quantity=2)
    paid = client.post(f"{data['link']}/pay", follow_redirects=False)
    assert paid.status_code == 303
    assert paid.headers["location"] == (
        f"https://client.example/after-payment?status=successful&tx_ref={data['tx_ref']}"
    )
    # The webhook did the work: no verify call yet.
    event = db.scalars(select(WebhookEvent)).one()
    db.commit()
    assert (event.gateway, event.tx_ref, event.outcome) == (
        "sandbox",
        data["tx_ref"],
        WebhookOutcome.FULFILLED,
    )
    orders = api.get("/client/orders").json()["data"]
    assert orders["total"] == 1
    order = orders["data"][0]
    assert order["tx_ref"] == data["tx_ref"] and order["country_code"] == "NG" and order["currency"] == "NGN"
    assert order["total_amount"] == f"{data['total_amount']:.2f}"
    assert [item["employee"] for item in order["items"]] == [
        {"id": str(employee), "name": "Ada Lovelace"}
    ] * 2
    assert {item["price"] for item in order["items"]} == {listed["asset_pricing"]["amount"]}
    device = db.get(Equipment, uuid.UUID(order["items"][0]["equipment_id"]))
    assert device is not None
    assert (device.source, device.status, device.assignee_id, device.state) == (
        EquipmentSource.PLATFORM,
        EquipmentStatus.ASSIGNED,
        employee,
        EquipmentState.BRAND_NEW,
    )
    assert device.asset_order_id == uuid.UUID(order["id"]) and device.asset_spec_id == uuid.UUID(listed["id"])
    assert device.purchase_price == Decimal(listed["asset_pricing"]["amount"]) and device.type == "Laptop"
    assert (
        device.title == listed["name"] and device.make == listed["make"] and device.model == listed["model"]
    )
    assert device.specs == {"memory": listed["spec"]["RAM"], "storage": listed["spec"]["storage"]}
    assert device.memory_key == listed["spec"]["RAM"].replace(" ", "").lower()
    events = db.scalars(
        select(EquipmentHistory.event_type)
        .where(EquipmentHistory.equipment_id == device.id)
        .order_by(EquipmentHistory.event_date, EquipmentHistory.seq)
    ).all()
    db.commit()
    assert events == ["equipment_added", "assigned"]
    verified = api.get(f"/client/transactions/{data['tx_ref']}/verify").json()
    assert verified["message"] == "Transaction verified successfully."
    assert verified["data"]["status"] == "Fulfilled" and "link" not in verified["data"]
    assert verified["data"]["total_amount"] == f"{data['total_amount']:.2f}"
    # Paying a settled transaction is a 409 page (decisions 12) and changes nothing.
    assert "Fulfilled" in client.get(str(data["link"])).text
    again = client.post(f"{data['link']}/pay", follow_redirects=False)
    assert again.status_code == 409 and "This payment is Fulfilled" in again.text
    assert count(db, Order) == 1 and count(db, Equipment) == 2


def test_devices_paid_for_an_employee_deleted_meanwhile_stay_unassigned(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    """The payment still makes its order and its devices; they wait, Unassigned, for someone."""
    data, employee, _ = start(api, db)
    assert api.delete(f"/client/employees/{employee}").status_code == 200  # holds nothing yet
    assert client.post(f"{data['link']}/pay", follow_redirects=False).status_code == 303
    order = api.get("/client/orders").json()["data"]["data"][0]
    assert order["tx_ref"] == data["tx_ref"] and order["items"][0]["employee"]["id"] is None
    device = api.get(f"/client/equipment/{order['items'][0]['equipment_id']}").json()["data"]
    assert device["status"] == "Unassigned" and device["assignee"] is None
    assert api.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]["status"] == "Fulfilled"


def test_the_done_page_shows_the_real_status_not_the_query_string(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    employee = add_employee(db, api.company_id)
    pricing = prices(api)[0]["asset_pricing"]["id"]
    body = card_body(employee, pricing)
    del body["redirect_url"]
    data = api.post("/client/transactions/initiate", body).json()["data"]
    done = f"/sandbox/checkout/{data['tx_ref']}/done"
    assert "Not paid" in client.get(f"{done}?status=successful").text
    declined = client.post(f"{data['link']}/decline", follow_redirects=False)
    assert declined.headers["location"].startswith(done)
    page = client.get(f"{done}?status=successful").text
    assert "Payment declined" in page and "Payment successful" not in page


def test_a_second_pay_while_pending_resends_the_notice_once(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    sent: list[str] = []
    sandbox.sender, deliver = (
        (lambda url, body, headers: sent.append(headers["webhook-id"]) or 503),
        sandbox.sender,
    )
    data, _, _ = start(api, db)
    assert client.post(f"{data['link']}/pay", follow_redirects=False).status_code == 303
    assert client.post(f"{data['link']}/pay", follow_redirects=False).status_code == 303
    assert len(sent) == 2 and sent[0] == sent[1]  # the same event (webhook-id), once per click
    sandbox.sender = deliver
    assert client.post(f"{data['link']}/pay", follow_redirects=False).status_code == 303
    assert count(db, Order) == 1


def test_the_return_link_to_a_non_ascii_host_names_it_as_idna(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    """The Location header percent-encodes what is not ASCII: a host written so (`ex%C3%A4mple`)
    is one no browser follows. The host goes as IDNA; the path and query are percent-encoded."""
    employee = add_employee(db, api.company_id)
    pricing = prices(api)[0]["asset_pricing"]["id"]
    body = card_body(employee, pricing, redirect_url="https://Bücher.exämple.com:8443/bezahlt/ö?from=straße")
    data = api.post("/client/transactions/initiate", body).json()["data"]
    paid = client.post(f"{data['link']}/pay", follow_redirects=False)
    assert paid.status_code == 303
    assert paid.headers["location"] == (
        "https://xn--bcher-kva.xn--exmple-cua.com:8443/bezahlt/%C3%B6"
        f"?from=stra%C3%9Fe&status=successful&tx_ref={data['tx_ref']}"
    )


def test_decline_fails_the_transaction_and_releases_storage(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    employee = add_employee(db, api.company_id)
    device = add_storage_device(db, api.company_id)
    body = {"payment_method": "Card", "employee_country_id": "NG", "orders": {str(employee): [str(device)]}}
    data = api.post("/client/transactions/onboard-from-storage/initiate", body).json()["data"]
    declined = client.post(f"{data['link']}/decline", follow_redirects=False)
    assert declined.status_code == 303
    assert f"status=declined&tx_ref={data['tx_ref']}" in declined.headers["location"]
    assert declined.headers["location"].startswith("/sandbox/checkout/")  # no redirect_url given
    verified = api.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]
    assert verified["status"] == "Failed" and verified["order_id"] is None
    assert count(db, Order) == 0 and count(db, EquipmentReservation) == 0
    retry = api.post("/client/transactions/onboard-from-storage/initiate", body)
    assert retry.status_code == 200, retry.text


@pytest.fixture
def webhooks_off(sandbox: SandboxGateway) -> Iterator[SandboxGateway]:
    sandbox.webhooks_on = False
    yield sandbox
    sandbox.webhooks_on = True


def test_with_webhooks_off_verify_completes_the_order(
    api: Api, db: Session, client: TestClient, webhooks_off: SandboxGateway
) -> None:
    data, _, _ = start(api, db)
    assert client.post(f"{data['link']}/pay", follow_redirects=False).status_code == 303
    assert count(db, WebhookEvent) == 0
    listed = api.get("/client/transactions").json()["data"]
    assert [record["status"] for record in listed["data"]] == ["Pending"]
    verified = api.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]
    assert verified["status"] == "Fulfilled" and verified["order_id"]
    again = api.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]
    assert again == verified
    assert count(db, Order) == 1


def test_verify_while_unpaid_answers_pending(api: Api, db: Session) -> None:
    data, _, _ = start(api, db)
    verified = api.get(f"/client/transactions/{data['tx_ref']}/verify")
    assert verified.status_code == 200 and verified.json()["data"]["status"] == "Pending"


def test_another_company_tx_ref_is_404(api: Api, other_api: Api, db: Session) -> None:
    data, _, _ = start(api, db)
    assert_error(other_api.get(f"/client/transactions/{data['tx_ref']}/verify"), 404, "Transaction not found")
    assert_error(api.get("/client/transactions/OTF-UNKNOWN/verify"), 404, "Transaction not found")
    assert other_api.get("/client/transactions").json()["data"]["total"] == 0


def test_expired_transaction_cannot_be_paid_and_frees_storage(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    employee = add_employee(db, api.company_id)
    device = add_storage_device(db, api.company_id)
    body = {"payment_method": "Card", "employee_country_id": "NG", "orders": {str(employee): [str(device)]}}
    data = api.post("/client/transactions/onboard-from-storage/initiate", body).json()["data"]
    transaction = db.scalars(select(Transaction).where(Transaction.tx_ref == data["tx_ref"])).one()
    transaction.expires_at = utcnow() - timedelta(minutes=1)
    db.commit()
    assert client.post(f"{data['link']}/pay", follow_redirects=False).status_code == 409
    verified = api.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]
    assert verified["status"] == "Expired"
    assert count(db, EquipmentReservation) == 0
    assert api.get("/client/transactions", status="Expired").json()["data"]["total"] == 1
    assert api.get("/client/transactions", status="Pending").json()["data"]["total"] == 0
    assert_error(api.get("/client/transactions", status="Bogus"), 422)


def test_reconcile_fulfils_the_paid_and_expires_the_old(
    api: Api, db: Session, client: TestClient, webhooks_off: SandboxGateway, app: object
) -> None:
    from outfitter.payments.gateways import registry_of
    from outfitter.payments.reconcile import reconcile

    paid, _, _ = start(api, db)
    client.post(f"{paid['link']}/pay", follow_redirects=False)
    old, _, _ = start(api, db)
    transaction = db.scalars(select(Transaction).where(Transaction.tx_ref == old["tx_ref"])).one()
    transaction.expires_at = utcnow() - timedelta(hours=1)
    db.commit()
    state = app.state  # type: ignore[attr-defined]
    summary = reconcile(state.sessionmaker, registry_of(state))
    assert summary.checked == 2 and summary.outcomes == {"Fulfilled": 1, "Expired": 1}
    assert count(db, Order) == 1
