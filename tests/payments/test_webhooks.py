"""The webhook endpoint: signature first, each event once, and money checked with the gateway."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.models import EquipmentReservation, Order, Transaction, TransactionStatus, WebhookEvent
from outfitter.payments.gateways.sandbox import SandboxGateway
from tests.factories import Api, assert_error
from tests.payments.conftest import (
    add_employee,
    add_storage_device,
    card_body,
    count,
    notice,
    prices,
    record_sandbox_payment,
    signed,
)

URL = "/api/v2/webhooks/payments/sandbox"


def pending(api: Api, db: Session) -> dict[str, object]:
    employee = add_employee(db, api.company_id)
    response = api.post(
        "/client/transactions/initiate", card_body(employee, prices(api)[0]["asset_pricing"]["id"])
    )
    data: dict[str, object] = response.json()["data"]
    return data


def status_of(db: Session, tx_ref: object) -> TransactionStatus:
    value = db.scalars(select(Transaction.status).where(Transaction.tx_ref == tx_ref)).one()
    db.commit()
    return value


def test_forged_missing_and_stale_signatures_are_401_and_change_nothing(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    data = pending(api, db)
    record_sandbox_payment(db, str(data["tx_ref"]), f"{data['total_amount']:.2f}", "NGN")
    body, headers = signed(sandbox, notice(str(data["tx_ref"])), "msg_1")
    forged = {**headers, "webhook-signature": "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}
    assert_error(client.post(URL, content=body, headers=forged), 401, "signature")
    tampered = body.replace(b"charge.completed", b"charge.completeD")
    assert_error(client.post(URL, content=tampered, headers=headers), 401)
    missing = {"content-type": "application/json"}
    assert_error(client.post(URL, content=body, headers=missing), 401)
    garbage = {**headers, "webhook-signature": "nonsense", "webhook-timestamp": "soon"}
    assert_error(client.post(URL, content=body, headers=garbage), 401)
    stale_body, stale = signed(
        sandbox, notice(str(data["tx_ref"])), "msg_2", datetime.now(UTC) - timedelta(minutes=6)
    )
    assert_error(client.post(URL, content=stale_body, headers=stale), 401)
    assert count(db, WebhookEvent) == 0 and status_of(db, data["tx_ref"]) == TransactionStatus.PENDING
    # The genuine one still works afterwards.
    accepted = client.post(URL, content=body, headers=headers)
    assert accepted.status_code == 200 and accepted.json()["data"]["outcome"] == "fulfilled"


def test_a_signed_notice_that_is_not_a_json_object_is_400_saying_so(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    """The signature holds, so the sender is the gateway: a 401 would send it looking at its
    secret and clock; the 400 says what is wrong with the notice, and nothing is recorded."""
    data = pending(api, db)
    for body in (json.dumps([1, 2]), json.dumps("paid"), json.dumps(None), "paid", "{not json", ""):
        headers = sandbox.signature_headers(f"m-{body}", body, datetime.now(UTC))
        refused = assert_error(client.post(URL, content=body.encode(), headers=headers), 400)
        assert refused["message"] == (
            "The webhook is signed, but the payload is not a JSON object: send the notice as a JSON object."
        )
    assert count(db, WebhookEvent) == 0 and status_of(db, data["tx_ref"]) == TransactionStatus.PENDING


def test_duplicates_and_replays_answer_200_and_change_nothing(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    data = pending(api, db)
    record_sandbox_payment(db, str(data["tx_ref"]), f"{data['total_amount']:.2f}", "NGN")
    body, headers = signed(sandbox, notice(str(data["tx_ref"])), "msg_dup")
    first = client.post(URL, content=body, headers=headers)
    second = client.post(URL, content=body, headers=headers)
    assert first.json()["data"]["outcome"] == "fulfilled"
    assert second.status_code == 200 and second.json()["data"]["outcome"] == "duplicate"
    other_id_body, other_id = signed(sandbox, notice(str(data["tx_ref"])), "msg_other")
    third = client.post(URL, content=other_id_body, headers=other_id)
    assert third.json()["data"]["outcome"] == "already_settled"
    assert count(db, Order) == 1 and count(db, WebhookEvent) == 2


def test_unknown_tx_ref_is_logged_and_answered_200(
    client: TestClient, sandbox: SandboxGateway, db: Session
) -> None:
    body, headers = signed(sandbox, notice("OTF-NOBODY"), "msg_unknown")
    response = client.post(URL, content=body, headers=headers)
    assert response.status_code == 200 and response.json()["data"]["outcome"] == "unknown_tx_ref"
    assert_error(client.post("/api/v2/webhooks/payments/paypal", content=body, headers=headers), 404)


def test_a_signed_notice_whose_id_is_too_long_is_400_and_recorded_nowhere(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    """The notice's id is what records it once: one longer than the record keeps is refused even
    when signed (it used to be cut to 200 characters, so two long ids alike in those would have
    been one notice, the second a "duplicate"); an empty one is a missing header (401)."""
    data = pending(api, db)
    record_sandbox_payment(db, str(data["tx_ref"]), f"{data['total_amount']:.2f}", "NGN")
    body, headers = signed(sandbox, notice(str(data["tx_ref"])), "m" * 201)
    assert_error(client.post(URL, content=body, headers=headers), 400, "1 to 200 characters")
    body, headers = signed(sandbox, notice(str(data["tx_ref"])), "")
    assert_error(client.post(URL, content=body, headers=headers), 401)
    assert count(db, WebhookEvent) == 0 and status_of(db, data["tx_ref"]) == TransactionStatus.PENDING
    body, headers = signed(sandbox, notice(str(data["tx_ref"])), "m" * 200)
    assert client.post(URL, content=body, headers=headers).json()["data"]["outcome"] == "fulfilled"


def test_the_body_is_never_trusted_for_money(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    # The notice claims the full amount; the gateway's own book says the payer paid less.
    data = pending(api, db)
    record_sandbox_payment(db, str(data["tx_ref"]), "100.00", "NGN")
    body, headers = signed(sandbox, notice(str(data["tx_ref"]), f"{data['total_amount']:.2f}"), "msg_short")
    response = client.post(URL, content=body, headers=headers)
    assert response.status_code == 200 and response.json()["data"]["outcome"] == "failed"
    verified = api.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]
    assert verified["status"] == "Failed" and verified["order_id"] is None
    assert count(db, Order) == 0


def test_wrong_currency_fails_and_releases_the_reservation(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    employee = add_employee(db, api.company_id)
    device = add_storage_device(db, api.company_id)
    body = {"payment_method": "Card", "employee_country_id": "NG", "orders": {str(employee): [str(device)]}}
    data = api.post("/client/transactions/onboard-from-storage/initiate", body).json()["data"]
    record_sandbox_payment(db, data["tx_ref"], "1000000.00", "USD")
    payload, headers = signed(sandbox, notice(data["tx_ref"], "1000000.00", "USD"), "msg_usd")
    assert client.post(URL, content=payload, headers=headers).json()["data"]["outcome"] == "failed"
    reason = db.scalars(select(Transaction.failure_reason).where(Transaction.tx_ref == data["tx_ref"])).one()
    db.commit()
    assert reason is not None and "USD" in reason
    assert count(db, EquipmentReservation) == 0 and count(db, Order) == 0


def test_a_successful_notice_before_any_payment_changes_nothing(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    data = pending(api, db)
    body, headers = signed(sandbox, notice(str(data["tx_ref"]), "99999999"), "msg_early")
    assert client.post(URL, content=body, headers=headers).json()["data"]["outcome"] == "pending"
    assert status_of(db, data["tx_ref"]) == TransactionStatus.PENDING and count(db, Order) == 0
