"""Payments test helpers: employees and storage devices inserted directly (their APIs belong to
other packages), catalog prices read through the API, and the sandbox gateway wired to the client."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.db.tenancy import TenantSession, bind_company
from outfitter.equipment import lifecycle
from outfitter.models import (
    Country,
    Employee,
    Equipment,
    EquipmentSource,
    EquipmentStatus,
    GatewayPaymentStatus,
    SandboxPayment,
)
from outfitter.payments.gateways import registry_of
from outfitter.payments.gateways.sandbox import SandboxGateway
from outfitter.payments.wallet import credit_wallet
from tests.factories import Api


@pytest.fixture(autouse=True)
def catalog(demo_catalog: None) -> None:
    """The demo catalog, kept between the tests that use it (tests/conftest.py)."""


def add_employee(
    db: Session, company_id: uuid.UUID, country_code: str = "NG", first: str = "Ada"
) -> uuid.UUID:
    country = db.scalars(select(Country).where(Country.code == country_code)).one()
    employee = Employee(
        company_id=company_id,
        first_name=first,
        last_name="Lovelace",
        email=f"{first.lower()}.{uuid.uuid4().hex[:8]}@example.com",
        phone="+2348000000000",
        country_id=country.id,
        address="1 Marina, Lagos",
    )
    db.add(employee)
    db.commit()
    return employee.id


def add_storage_device(db: Session, company_id: uuid.UUID, title: str = "ThinkPad T14") -> uuid.UUID:
    equipment = Equipment(
        company_id=company_id,
        title=title,
        source=EquipmentSource.EXTERNAL,
        status=EquipmentStatus.IN_STORAGE,
        serial_number=f"SN-{uuid.uuid4().hex[:10]}",
    )
    db.add(equipment)
    db.commit()
    return equipment.id


def add_assigned_device(db: Session, employee_id: uuid.UUID, title: str = "MacBook Pro") -> uuid.UUID:
    employee = db.get(Employee, employee_id)
    assert employee is not None
    equipment = Equipment(
        id=uuid.uuid4(),
        company_id=employee.company_id,
        title=title,
        source=EquipmentSource.EXTERNAL,
        status=EquipmentStatus.UNASSIGNED,
        serial_number=f"SN-{uuid.uuid4().hex[:10]}",
    )
    db.add(equipment)
    db.flush()
    lifecycle.record_added(db, equipment, "test")
    lifecycle.move(db, equipment, EquipmentStatus.ASSIGNED, "test", assignee=employee)
    db.commit()
    return equipment.id


def add_credit(db: Session, company_id: uuid.UUID, currency: str, amount: str) -> None:
    """As an operator's `wallet credit` does: a session bound to the company credits its wallet."""
    with TenantSession(db.get_bind()) as session, session.begin():
        bind_company(session, company_id)
        credit_wallet(session, currency, Decimal(amount), "Test top-up")


def prices(api: Api, country: str = "NG", currency: str = "NGN") -> list[dict[str, Any]]:
    """Specifications priced for a country and currency, as a client lists them."""
    body = api.get("/client/assets", country_id=country, currency_code=currency, per_page=100).json()
    records: list[dict[str, Any]] = body["data"]["data"]
    return records


def record_sandbox_payment(
    db: Session,
    tx_ref: str,
    amount: str,
    currency: str,
    status: GatewayPaymentStatus = GatewayPaymentStatus.SUCCESSFUL,
) -> None:
    """What a payer did at the sandbox, written in the sandbox's own book."""
    db.add(SandboxPayment(tx_ref=tx_ref, status=status, amount=Decimal(amount), currency_code=currency))
    db.commit()


def sandbox_gateway(app: FastAPI) -> SandboxGateway:
    gateway = registry_of(app.state).get(SandboxGateway.name)
    assert isinstance(gateway, SandboxGateway)
    return gateway


@pytest.fixture
def sandbox(app: FastAPI, client: TestClient) -> Iterator[SandboxGateway]:
    """The sandbox gateway, delivering its webhooks to the TestClient (the app calls itself)."""
    gateway = sandbox_gateway(app)
    original = gateway.sender

    def to_client(url: str, body: bytes, headers: dict[str, str]) -> int:
        return client.post(url, content=body, headers=headers).status_code

    gateway.sender = to_client
    yield gateway
    gateway.sender = original


def count(db: Session, model: type) -> int:
    """Rows of a table now (the read's transaction ends at once: SQLite's writers must not wait on it)."""
    value = db.scalar(select(func.count()).select_from(model)) or 0
    db.commit()
    return value


def signed(
    gateway: SandboxGateway, payload: dict[str, Any], message_id: str, at: datetime | None = None
) -> tuple[bytes, dict[str, str]]:
    """A webhook as the sandbox signs it (Standard Webhooks), for any payload and time."""
    body = json.dumps(payload)
    return body.encode(), gateway.signature_headers(message_id, body, at or datetime.now(UTC))


def notice(
    tx_ref: str, amount: str = "1", currency: str = "NGN", status: str = "successful"
) -> dict[str, Any]:
    return {
        "type": "charge.completed",
        "data": {"tx_ref": tx_ref, "amount": amount, "currency": currency, "status": status},
    }


def card_body(employee_id: uuid.UUID, pricing_id: str, quantity: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "payment_method": "Card",
        "employee_country_id": "NG",
        "redirect_url": "https://client.example/after-payment",
        "orders": {str(employee_id): [{"asset_pricing_id": pricing_id, "quantity": quantity}]},
        **extra,
    }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class LiveServer:
    url: str
    app: FastAPI

    def api(self, token: str) -> httpx.Client:
        return httpx.Client(
            base_url=f"{self.url}/api/v2", headers={"Authorization": f"Bearer {token}"}, timeout=60
        )


@pytest.fixture(scope="module")
def live_server(database_url: str, engine: Engine) -> Iterator[LiveServer]:
    """The app under a real uvicorn server on 127.0.0.1, so requests run concurrently as in
    production and the sandbox gateway posts its webhooks to the service over HTTP."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    application = create_app(
        # A hundred requests queue behind one wallet lock; on a loaded machine the last of them
        # waits longer for a connection than production's 5 s, and these tests prove the lock.
        Settings(
            database_url=database_url,
            rate_limit="off",
            scim_rate_limit="off",
            public_url=url,
            db_pool_timeout=60,
        )
    )
    server = uvicorn.Server(uvicorn.Config(application, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            pytest.fail("the test server did not start")
        time.sleep(0.02)
    yield LiveServer(url, application)
    server.should_exit = True
    thread.join(timeout=20)
