"""Small builders for people tests: employee bodies, and equipment and orders arranged in the database
(their APIs are built elsewhere)."""

from __future__ import annotations

import itertools
import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.db.base import utcnow
from outfitter.equipment import lifecycle
from outfitter.models import (
    Country,
    Employee,
    Equipment,
    EquipmentSource,
    EquipmentStatus,
    Order,
    OrderItem,
    OrderKind,
    OrderStage,
    OrderStatus,
    PaymentMethod,
    Transaction,
    TransactionKind,
    TransactionStatus,
)
from tests.factories import Api

_serial = itertools.count(1)


def employee_body(**overrides: Any) -> dict[str, Any]:
    number = next(_serial)
    body: dict[str, Any] = {
        "first_name": "Ada",
        "last_name": f"Lovelace{number}",
        "email": f"ada{number}@acme.io",
        "country_id": "NG",
        "phone": "+234 801 234 5678",
        "address": "12 Marina Road, Lagos",
    }
    body.update(overrides)
    return body


def create_employee(api: Api, **overrides: Any) -> dict[str, Any]:
    response = api.post("/client/employees", employee_body(**overrides))
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def give_equipment(
    db: Session, company_id: uuid.UUID, employee_id: str, title: str = "MacBook Pro"
) -> Equipment:
    """An External device, registered and Assigned to the employee through the lifecycle."""
    employee = db.get(Employee, uuid.UUID(employee_id))
    assert employee is not None
    equipment = Equipment(
        company_id=company_id,
        title=title,
        source=EquipmentSource.EXTERNAL,
        status=EquipmentStatus.UNASSIGNED,
        type="Laptop",
        serial_number=f"SN-{next(_serial)}",
    )
    db.add(equipment)
    db.flush()
    lifecycle.record_added(db, equipment, "test")
    lifecycle.move(db, equipment, EquipmentStatus.ASSIGNED, "test", assignee=employee)
    db.commit()
    return equipment


def unassign(db: Session, equipment: Equipment) -> None:
    record = db.get(Equipment, equipment.id)
    assert record is not None
    lifecycle.move(db, record, EquipmentStatus.UNASSIGNED, "test")
    db.commit()


def place_order(db: Session, company_id: uuid.UUID, employee_id: str, total: str = "1234.50") -> Order:
    """The order of a fulfilled transaction, with one item for the employee."""
    country = db.scalars(select(Country).where(Country.code == "NG")).one()
    tx_ref = f"otf_tx_{uuid.uuid4().hex}"
    zero = Decimal(0)
    transaction = Transaction(
        company_id=company_id,
        tx_ref=tx_ref,
        kind=TransactionKind.CATALOG,
        payment_method=PaymentMethod.CARD,
        status=TransactionStatus.FULFILLED,
        country_id=country.id,
        currency_code="NGN",
        amount=Decimal(total),
        insurance=zero,
        gateway_fee=zero,
        onboarding_fee=zero,
        device_config_fee=zero,
        platform_fee=zero,
        retrieval_fee=zero,
        inspection_fee=zero,
        storage_fee=zero,
        total_amount=Decimal(total),
        expires_at=utcnow() + timedelta(hours=24),
    )
    db.add(transaction)
    db.flush()
    order = Order(
        company_id=company_id,
        transaction_id=transaction.id,
        tx_ref=tx_ref,
        kind=OrderKind.PURCHASE,
        status=OrderStatus.IN_PROGRESS,
        payment_method=PaymentMethod.CARD,
        country_id=country.id,
        currency_code="NGN",
        total_amount=Decimal(total),
    )
    db.add(order)
    db.flush()
    db.add(
        OrderItem(
            company_id=company_id,
            order_id=order.id,
            employee_id=uuid.UUID(employee_id),
            employee_name="Someone",
            price=Decimal(total),
            stage=OrderStage.ORDER_PLACED,
            stages=[{"stage": "order_placed", "at": utcnow().isoformat(), "note": None}],
        )
    )
    db.commit()
    return order
