"""Payments: initiates, outcomes, orders and wallet moves write their events, with each subject as
the API answers it (a transaction as verify does, an order as its retrieve, the wallet as GET
/client/wallet)."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from outfitter.cli import app as cli
from outfitter.config import get_settings
from outfitter.db.base import utcnow
from outfitter.models import Transaction
from outfitter.payments.gateways.sandbox import SandboxGateway
from tests.events.helpers import assert_event, log, only, stored_events
from tests.factories import Api, assert_error
from tests.payments.conftest import (
    add_credit,
    add_employee,
    add_storage_device,
    card_body,
    prices,
)

SYSTEM = "system"


def _laptop_pricing(api: Api) -> str:
    listed = next(record for record in prices(api) if record["category"] == "Laptops")
    pricing_id: str = listed["asset_pricing"]["id"]
    return pricing_id


def _data(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


@pytest.fixture(autouse=True)
def _catalog(catalog: None) -> None:
    """Every test here buys from the demo catalog."""


def test_a_credit_purchase_records_its_whole_story(api: Api, db: Session) -> None:
    add_credit(db, api.company_id, "NGN", "100000000")
    credited = only(api, "wallet.credited")
    wallet_then = _data(api.get("/client/wallet"))
    assert_event(credited, "wallet.credited", credited["subject_id"], wallet_then, actor=SYSTEM)

    employee = add_employee(db, api.company_id)
    body = {**card_body(employee, _laptop_pricing(api)), "payment_method": "Credit"}
    initiated = _data(api.post("/client/transactions/initiate", body))
    assert initiated["status"] == "Fulfilled"
    verified = _data(api.get(f"/client/transactions/{initiated['tx_ref']}/verify"))
    transaction_id = only(api, "transaction.fulfilled")["subject_id"]
    assert_event(only(api, "transaction.fulfilled"), "transaction.fulfilled", transaction_id, verified)
    # as initiated: Pending, no order yet, last changed when it was made
    pending = {**verified, "status": "Pending", "order_id": None, "updated_at": verified["created_at"]}
    assert verified["updated_at"] > verified["created_at"]  # fulfilled since
    assert_event(only(api, "transaction.initiated"), "transaction.initiated", transaction_id, pending)

    order = _data(api.get(f"/client/orders/{verified['order_id']}"))
    assert_event(only(api, "order.created"), "order.created", order["id"], order)
    debited = only(api, "wallet.debited")
    assert_event(debited, "wallet.debited", credited["subject_id"], _data(api.get("/client/wallet")))
    assert debited["data"]["entries"][0]["transaction_id"] == transaction_id

    device_id = order["items"][0]["equipment_id"]
    device = _data(api.get(f"/client/equipment/{device_id}"))
    assert_event(only(api, "equipment.added"), "equipment.added", device_id, device)
    assert_event(only(api, "equipment.assigned"), "equipment.assigned", device_id, device)
    assert len(log(api)) == 7


def test_not_enough_credit_leaves_no_event(api: Api, db: Session) -> None:
    employee = add_employee(db, api.company_id)
    body = {**card_body(employee, _laptop_pricing(api)), "payment_method": "Credit"}
    assert_error(api.post("/client/transactions/initiate", body), 402)
    assert stored_events(db) == 0


def test_a_card_payment_verified_by_the_client_is_fulfilled_for_its_token(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    employee = add_employee(db, api.company_id)
    data = _data(api.post("/client/transactions/initiate", card_body(employee, _laptop_pricing(api))))
    initiated = only(api, "transaction.initiated")
    assert_event(
        initiated,
        "transaction.initiated",
        initiated["subject_id"],
        _data(api.get(f"/client/transactions/{data['tx_ref']}/verify")),
    )
    sandbox.webhooks_on = False
    try:
        assert client.post(f"{data['link']}/pay", follow_redirects=False).status_code == 303
    finally:
        sandbox.webhooks_on = True
    verified = _data(api.get(f"/client/transactions/{data['tx_ref']}/verify"))
    assert verified["status"] == "Fulfilled"
    assert_event(
        only(api, "transaction.fulfilled"), "transaction.fulfilled", initiated["subject_id"], verified
    )
    assert only(api, "order.created")["actor"] == f"token:Acme Ltd API ({api.token_id})"
    _data(api.get(f"/client/transactions/{data['tx_ref']}/verify"))  # settled already: nothing new
    assert len(log(api, type="transaction.*")) == 2


def test_a_payment_webhook_fulfils_as_the_system(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    employee = add_employee(db, api.company_id)
    data = _data(api.post("/client/transactions/initiate", card_body(employee, _laptop_pricing(api))))
    assert client.post(f"{data['link']}/pay", follow_redirects=False).status_code == 303
    fulfilled = only(api, "transaction.fulfilled")
    assert fulfilled["actor"] == SYSTEM
    verified = _data(api.get(f"/client/transactions/{data['tx_ref']}/verify"))
    assert fulfilled["data"] == verified
    assert [event["actor"] for event in log(api, type="order.*,equipment.*")] == [SYSTEM] * 3


def test_a_storage_onboarding_declined_records_transaction_failed(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    employee = add_employee(db, api.company_id)
    device = add_storage_device(db, api.company_id)
    body = {"payment_method": "Card", "employee_country_id": "NG", "orders": {str(employee): [str(device)]}}
    data = _data(api.post("/client/transactions/onboard-from-storage/initiate", body))
    assert client.post(f"{data['link']}/decline", follow_redirects=False).status_code == 303
    failed = only(api, "transaction.failed")
    verified = _data(api.get(f"/client/transactions/{data['tx_ref']}/verify"))
    assert verified["status"] == "Failed"
    assert_event(failed, "transaction.failed", failed["subject_id"], verified, actor=SYSTEM)
    assert log(api, type="equipment.*,order.*") == []


def test_a_storage_onboarding_paid_records_the_devices_assigned(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    employee = add_employee(db, api.company_id)
    device = add_storage_device(db, api.company_id)
    body = {"payment_method": "Card", "employee_country_id": "NG", "orders": {str(employee): [str(device)]}}
    data = _data(api.post("/client/transactions/onboard-from-storage/initiate", body))
    assert client.post(f"{data['link']}/pay", follow_redirects=False).status_code == 303
    answer = _data(api.get(f"/client/equipment/{device}"))
    assert answer["status"] == "Assigned"
    assert_event(only(api, "equipment.assigned"), "equipment.assigned", str(device), answer, actor=SYSTEM)
    assert log(api, type="equipment.added") == []


def test_verify_past_the_time_to_live_records_transaction_expired(api: Api, db: Session) -> None:
    employee = add_employee(db, api.company_id)
    data = _data(api.post("/client/transactions/initiate", card_body(employee, _laptop_pricing(api))))
    transaction = db.scalars(select(Transaction).where(Transaction.tx_ref == data["tx_ref"])).one()
    transaction.expires_at = utcnow() - timedelta(minutes=1)
    db.commit()
    verified = _data(api.get(f"/client/transactions/{data['tx_ref']}/verify"))
    assert verified["status"] == "Expired"
    assert_event(only(api, "transaction.expired"), "transaction.expired", str(transaction.id), verified)


def test_the_operator_wallet_credit_records_wallet_credited(
    api: Api, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OUTFITTER_DATABASE_URL", database_url)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(cli, ["wallet", "credit", str(api.company_id), "USD", "250", "--json"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["balance"] == "250.00"
    credited = only(api, "wallet.credited")
    uuid.UUID(credited["subject_id"])
    # The CLI is run by Outfitter's operators: its changes name them as actor.
    assert_event(
        credited,
        "wallet.credited",
        credited["subject_id"],
        _data(api.get("/client/wallet")),
        actor="operator",
    )
    assert credited["data"]["balances"] == [
        {"currency": "USD", "balance": "250.00", "updated_at": credited["data"]["balances"][0]["updated_at"]}
    ]
