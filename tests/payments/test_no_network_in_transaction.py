"""No call to the gateway happens inside a database transaction (decisions §12).

A stand-in holds every gateway call until the test releases it. While a request waits on it, the
app holds no pooled connection and PostgreSQL shows no transaction of ours open (so no row lock):
for initiate (Card, catalog and storage), verify and the payment webhook.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from outfitter.payments.gateways import registry_of
from outfitter.payments.gateways.base import CheckoutRequest, GatewayPayment
from outfitter.payments.gateways.sandbox import SandboxGateway
from tests.factories import Api
from tests.payments.conftest import (
    add_employee,
    add_storage_device,
    card_body,
    notice,
    prices,
    record_sandbox_payment,
    sandbox_gateway,
    signed,
)

HOLD_SECONDS = 30  # a bound on the wait, never reached when the test passes


class HeldGateway:
    """The sandbox gateway, except that each call waits until the test lets it go."""

    def __init__(self, real: SandboxGateway) -> None:
        self.real = real
        self.name = real.name
        self.entered = threading.Event()
        self.release = threading.Event()

    def _hold(self) -> None:
        self.entered.set()
        assert self.release.wait(HOLD_SECONDS), "the test never released the gateway"

    def create_checkout(self, checkout: CheckoutRequest) -> str:
        self._hold()
        return self.real.create_checkout(checkout)

    def verify_webhook(self, body: bytes, headers: Any) -> Any:
        return self.real.verify_webhook(body, headers)

    def fetch_payment(self, tx_ref: str, charge_id: str | None = None) -> GatewayPayment | None:
        self._hold()
        return self.real.fetch_payment(tx_ref, charge_id)


@pytest.fixture
def held(app: FastAPI, postgres_only: None) -> Iterator[HeldGateway]:
    registry = registry_of(app.state)
    real = sandbox_gateway(app)
    gateway = HeldGateway(real)
    registry.put(gateway)  # type: ignore[arg-type]
    yield gateway
    gateway.release.set()
    registry.put(real)


def _our_open_transactions(engine: Engine) -> list[str]:
    """Backends of the test database (other than this check's own) inside a transaction."""
    with engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT state FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND xact_start IS NOT NULL"
            )
        ).scalars()
        return list(rows)


def _while_held(
    app: FastAPI, engine: Engine, gateway: HeldGateway, call: Callable[[], httpx.Response]
) -> httpx.Response:
    """Start `call`, and once it waits on the gateway, check what it holds; then let it finish."""
    answer: list[httpx.Response] = []
    worker = threading.Thread(target=lambda: answer.append(call()))
    worker.start()
    try:
        assert gateway.entered.wait(HOLD_SECONDS), "the request never reached the gateway"
        assert app.state.engine.pool.checkedout() == 0, "a pooled connection is held across the network"
        assert _our_open_transactions(engine) == [], "a transaction is open across the network"
    finally:
        gateway.release.set()
        worker.join(HOLD_SECONDS)
    assert answer, "the request did not finish"
    return answer[0]


def test_card_initiate_calls_the_gateway_outside_any_transaction(
    app: FastAPI, engine: Engine, api: Api, db: Session, held: HeldGateway
) -> None:
    employee = add_employee(db, api.company_id)
    pricing = prices(api)[0]["asset_pricing"]["id"]
    response = _while_held(
        app, engine, held, lambda: api.post("/client/transactions/initiate", card_body(employee, pricing))
    )
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["status"] == "Pending" and data["link"].endswith(data["tx_ref"])


def test_storage_initiate_locks_devices_only_after_the_gateway(
    app: FastAPI, engine: Engine, api: Api, db: Session, held: HeldGateway
) -> None:
    employee = add_employee(db, api.company_id)
    device = add_storage_device(db, api.company_id)
    body = {
        "payment_method": "Card",
        "employee_country_id": "NG",
        "orders": {str(employee): [str(device)]},
    }
    response = _while_held(
        app,
        engine,
        held,
        lambda: api.post("/client/transactions/onboard-from-storage/initiate", body),
    )
    assert response.status_code == 200, response.text
    assert response.json()["data"]["status"] == "Pending"


def _pending_card_transaction(api: Api, db: Session, held: HeldGateway) -> dict[str, Any]:
    held.release.set()  # let initiate through untouched
    employee = add_employee(db, api.company_id)
    pricing = prices(api)[0]["asset_pricing"]
    response = api.post("/client/transactions/initiate", card_body(employee, pricing["id"]))
    assert response.status_code == 200, response.text
    held.release.clear()
    held.entered.clear()
    data: dict[str, Any] = response.json()["data"]
    return data


def test_verify_asks_the_gateway_outside_any_transaction(
    app: FastAPI, engine: Engine, api: Api, db: Session, held: HeldGateway
) -> None:
    data = _pending_card_transaction(api, db, held)
    record_sandbox_payment(db, data["tx_ref"], f"{data['total_amount']:.2f}", data["currency"])
    response = _while_held(
        app, engine, held, lambda: api.get(f"/client/transactions/{data['tx_ref']}/verify")
    )
    assert response.status_code == 200, response.text
    assert response.json()["data"]["status"] == "Fulfilled"


def test_the_webhook_asks_the_gateway_before_its_transaction(
    app: FastAPI, engine: Engine, api: Api, db: Session, held: HeldGateway
) -> None:
    data = _pending_card_transaction(api, db, held)
    record_sandbox_payment(db, data["tx_ref"], f"{data['total_amount']:.2f}", data["currency"])
    body, headers = signed(
        held.real,
        notice(data["tx_ref"], f"{data['total_amount']:.2f}"),
        f"msg_{uuid.uuid4().hex}",
        datetime.now(UTC),
    )
    response = _while_held(
        app,
        engine,
        held,
        lambda: api.client.post("/api/v2/webhooks/payments/sandbox", content=body, headers=headers),
    )
    assert response.status_code == 200, response.text
    assert response.json()["data"]["outcome"] == "fulfilled"
    assert api.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]["status"] == "Fulfilled"
