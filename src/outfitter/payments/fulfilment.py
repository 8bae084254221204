"""The one path from a gateway's answer to a transaction's outcome, shared by the webhook, verify,
Credit initiates and reconciliation.

`settle` locks the transaction row and acts only while it is Pending, so however many webhook
deliveries and verify calls race, one of them fulfils it and the others find it settled. The
unique `orders.transaction_id` is the second line of defence.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal

from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.catalog.reference import minor_units
from outfitter.catalog.repository import CatalogRepository
from outfitter.core.money import round_money
from outfitter.db.base import new_id, utcnow
from outfitter.db.company_writes import company_insert
from outfitter.equipment import lifecycle
from outfitter.equipment.events import record_equipment_events
from outfitter.models import (
    ORDER_KIND_OF,
    STAGES,
    AssetPricing,
    Currency,
    Employee,
    Equipment,
    EquipmentSource,
    EquipmentState,
    EquipmentStatus,
    EquipmentType,
    EventType,
    GatewayPaymentStatus,
    Order,
    OrderItem,
    OrderStatus,
    PaymentAnomaly,
    PaymentAnomalyKind,
    Transaction,
    TransactionItem,
    TransactionKind,
    TransactionStatus,
)
from outfitter.payments.events import OUTCOME_EVENTS, record_order_event, record_transaction_event
from outfitter.payments.gateways.base import GatewayPayment
from outfitter.payments.presenters import stage_entry
from outfitter.payments.repository import (
    held_by,
    items_of,
    lock_devices,
    lock_transaction,
    release_reservations,
)
from outfitter.people.repository import EmployeeRepository

logger = logging.getLogger("outfitter.payments")

# The type of a device bought from the catalog, by its category's name in any case. Another
# category gives no type: a type outside EquipmentType could not be filtered on, set or imported.
TYPE_FOR_CATEGORY: dict[str, EquipmentType] = {
    **{name.casefold(): EquipmentType.LAPTOP for name in ("Laptops", "Laptop")},
    **{name.casefold(): EquipmentType.WORKSTATION for name in ("Workstations", "Workstation")},
    **{name.casefold(): EquipmentType.PHONES for name in ("Phones", "Phone")},
    **{name.casefold(): EquipmentType.TABLET for name in ("Tablets", "Tablet")},
    **{name.casefold(): EquipmentType.ACCESSORIES for name in ("Accessories", "Accessory")},
}


def settle(
    session: Session,
    transaction_id: uuid.UUID,
    payment: GatewayPayment | None,
    now: datetime | None = None,
    actor: str | None = None,
) -> Transaction:
    """Lock the transaction and apply what the gateway said. Once it left Pending nothing changes,
    but a successful payment that no order accounts for is recorded for an operator.

    Leaving Pending records the outcome's event (`transaction.fulfilled`, `.failed`, `.expired`),
    and fulfilment its order's and equipment's, for `actor` (None: "system")."""
    now = now or utcnow()
    transaction = lock_transaction(session, transaction_id)
    paid = payment is not None and payment.status == GatewayPaymentStatus.SUCCESSFUL
    if transaction.status != TransactionStatus.PENDING:
        if paid and payment is not None and _unaccounted(transaction, payment):
            _record_anomaly(session, transaction, PaymentAnomalyKind.LATE_PAYMENT, payment.amount, payment)
        return transaction
    if paid and payment is not None:
        problem = payment_problem(transaction, payment)
        if problem:
            logger.warning("transaction %s fails: %s", transaction.tx_ref, problem)
            finish(session, transaction, TransactionStatus.FAILED, problem, now)
        else:
            fulfil(session, transaction, payment, now, actor)
            # Less than the currency's minor unit over is no money to refund (a float's last digits).
            excess = round_money(payment.amount - transaction.total_amount, minor_units(payment.currency))
            if excess > 0:
                _record_anomaly(session, transaction, PaymentAnomalyKind.OVERPAYMENT, excess, payment)
    elif payment is not None and payment.status == GatewayPaymentStatus.DECLINED:
        finish(session, transaction, TransactionStatus.FAILED, "The payment was declined.", now)
    elif now >= transaction.expires_at:
        finish(session, transaction, TransactionStatus.EXPIRED, "Not paid within its time to live.", now)
    if transaction.status in OUTCOME_EVENTS:
        record_transaction_event(session, OUTCOME_EVENTS[transaction.status], transaction, actor)
    return transaction


def _unaccounted(transaction: Transaction, payment: GatewayPayment) -> bool:
    """A payment for this tx_ref other than the one that fulfilled it (if any)."""
    return payment.tx_ref == transaction.tx_ref and (payment.reference or "") != (
        transaction.gateway_reference or ""
    )


def _record_anomaly(
    session: Session,
    transaction: Transaction,
    kind: PaymentAnomalyKind,
    amount: Decimal,
    payment: GatewayPayment,
    detail: str = "",
) -> None:
    """Once per payment and kind, however often the gateway tells us; the amount in the payment
    currency's minor units, as every amount is shown."""
    amount = round_money(amount, minor_units(payment.currency))
    logger.warning(
        "transaction %s: %s of %s %s%s", transaction.tx_ref, kind, amount, payment.currency, detail
    )
    values = {
        "id": new_id(),
        "company_id": transaction.company_id,
        "transaction_id": transaction.id,
        "tx_ref": transaction.tx_ref,
        "kind": kind,
        "amount": amount,
        "currency_code": payment.currency[:3],
        "gateway_reference": (payment.reference or "")[:200],
        "created_at": utcnow(),
    }
    company_insert(session, PaymentAnomaly, [values], unique=["transaction_id", "kind", "gateway_reference"])


def payment_problem(transaction: Transaction, payment: GatewayPayment) -> str | None:
    """Why a payment the gateway calls successful does not pay for this transaction, if it does not."""
    if payment.tx_ref != transaction.tx_ref:
        return f"The gateway answered for {payment.tx_ref!r}, not {transaction.tx_ref!r}."
    if payment.currency != transaction.currency_code:
        return f"Paid in {payment.currency}, but the transaction is in {transaction.currency_code}."
    if payment.amount < transaction.total_amount:
        return (
            f"Paid {format(payment.amount, 'f')} {payment.currency}, short of the "
            f"{format(transaction.total_amount, 'f')} due."
        )
    return None


def finish(
    session: Session, transaction: Transaction, status: TransactionStatus, reason: str, now: datetime
) -> None:
    """Failed, Cancelled or Expired: no order, and the storage equipment it held is free again."""
    transaction.status = status
    transaction.failure_reason = reason[:500]
    transaction.settled_at = now
    release_reservations(session, transaction.id)
    session.flush()


def fulfil(
    session: Session,
    transaction: Transaction,
    payment: GatewayPayment,
    now: datetime,
    actor: str | None = None,
) -> Order:
    """Make the one order of a locked, Pending, paid transaction, and equip its employees; records
    `order.created` and the equipment's events (the transaction's own is `settle`'s).

    A device of a storage onboarding or an offboarding that is no longer as the payment found it
    (moves of reserved devices are refused, so this is a backstop) keeps its order item for an
    operator, and its share of the money becomes a `device_unavailable` anomaly, never silently
    skipped."""
    reference = payment.reference
    order = Order(
        company_id=transaction.company_id,
        transaction_id=transaction.id,
        tx_ref=transaction.tx_ref,
        kind=ORDER_KIND_OF[transaction.kind],
        status=OrderStatus.IN_PROGRESS,
        payment_method=transaction.payment_method,
        country_id=transaction.country_id,
        currency_code=transaction.currency_code,
        total_amount=transaction.total_amount,
    )
    session.add(order)
    session.flush()  # the unique transaction_id refuses a second order here
    items = items_of(session, transaction.id)
    # Held as every write naming an employee holds them: a DELETE racing this waits for it (and
    # answers 409), or committed first and the employee is absent (the devices stay Unassigned).
    employees = EmployeeRepository(session).referenced(
        {item.employee_id for item in items if item.employee_id}
    )
    history_actor = transaction.actor or lifecycle.SYSTEM_ACTOR
    unavailable: list[uuid.UUID | None] = []
    if transaction.kind == TransactionKind.STORAGE:
        changes, unavailable = _assign_storage_equipment(
            session, transaction, order, items, employees, history_actor
        )
    elif transaction.kind == TransactionKind.OFFBOARD:
        # The devices stay Assigned, with their employee, until their item reaches `received`.
        unavailable = _devices_not_held(session, items)
        session.add_all(_order_item(order, item, item.equipment_id, employees) for item in items)
        changes = []
    else:
        changes = _create_catalog_equipment(session, transaction, order, items, employees, history_actor, now)
    if unavailable:
        _record_unavailable(session, transaction, payment, len(unavailable), len(items), unavailable)
    release_reservations(session, transaction.id)
    transaction.status = TransactionStatus.FULFILLED
    transaction.settled_at = now
    transaction.gateway_reference = reference or transaction.gateway_reference
    session.flush()
    record_equipment_events(session, changes, actor)
    record_order_event(session, EventType.ORDER_CREATED, order, actor)
    return order


def _devices_not_held(session: Session, items: Sequence[TransactionItem]) -> list[uuid.UUID | None]:
    """The devices of an offboarding no longer Assigned to the employee it retrieves them from."""
    devices = lock_devices(session, (item.equipment_id for item in items))
    return [
        item.equipment_id
        for item in items
        if not held_by(devices.get(item.equipment_id) if item.equipment_id else None, item.employee_id)
    ]


def _record_unavailable(
    session: Session,
    transaction: Transaction,
    payment: GatewayPayment,
    gone: int,
    devices: int,
    equipment_ids: Sequence[uuid.UUID | None],
) -> None:
    """The share of the total paid for `gone` of the transaction's `devices`, in its currency's
    minor units (ISO 4217's, as `_record_anomaly` rounds to and the currencies table holds: no
    read), as one `device_unavailable` anomaly."""
    places = minor_units(transaction.currency_code)
    share = (transaction.total_amount * gone / devices).quantize(Decimal(1).scaleb(-places))
    detail = f" (devices {', '.join(str(equipment_id) for equipment_id in equipment_ids)})"
    _record_anomaly(session, transaction, PaymentAnomalyKind.DEVICE_UNAVAILABLE, share, payment, detail)


def _create_catalog_equipment(
    session: Session,
    transaction: Transaction,
    order: Order,
    items: Sequence[TransactionItem],
    employees: dict[uuid.UUID, Employee],
    actor: str,
    now: datetime,
) -> list[tuple[EventType, Equipment]]:
    pricing_ids = {item.asset_pricing_id for item in items if item.asset_pricing_id}
    pricings = CatalogRepository(session).pricings(pricing_ids)
    currency_id = session.scalar(select(Currency.id).where(Currency.code == transaction.currency_code))
    made: list[tuple[Equipment, TransactionItem]] = []
    for item in items:
        pricing = pricings[item.asset_pricing_id] if item.asset_pricing_id else None
        for _ in range(item.quantity):
            equipment = _new_equipment(transaction, order, item, pricing, currency_id, now)
            session.add(equipment)
            made.append((equipment, item))
    session.flush()
    changes: list[tuple[EventType, Equipment]] = []
    for equipment, item in made:
        lifecycle.record_added(session, equipment, actor, {"tx_ref": transaction.tx_ref})
        changes.append((EventType.EQUIPMENT_ADDED, equipment))
        assignee = employees.get(item.employee_id) if item.employee_id else None
        if assignee is not None:  # an employee deleted since the initiate leaves the device Unassigned
            lifecycle.move(
                session, equipment, EquipmentStatus.ASSIGNED, actor, assignee, {"tx_ref": transaction.tx_ref}
            )
            changes.append((EventType.EQUIPMENT_ASSIGNED, equipment))
        session.add(_order_item(order, item, equipment.id, employees))
    return changes


def _new_equipment(
    transaction: Transaction,
    order: Order,
    item: TransactionItem,
    pricing: AssetPricing | None,
    currency_id: uuid.UUID | None,
    now: datetime,
) -> Equipment:
    specification = pricing.specification if pricing else None
    asset = specification.asset if specification else None
    spec = specification.spec if specification else {}
    specs = {
        key: spec[source] for key, source in (("memory", "RAM"), ("storage", "storage")) if spec.get(source)
    }
    images = (specification.images if specification else []) or (asset.images if asset else [])
    return Equipment(
        id=new_id(),
        company_id=transaction.company_id,
        title=asset.name if asset else item.employee_name,
        year=asset.year if asset else None,
        make=asset.make if asset else None,
        model=asset.model if asset else None,
        type=TYPE_FOR_CATEGORY.get(asset.category.name.casefold()) if asset else None,
        state=EquipmentState.BRAND_NEW,
        source=EquipmentSource.PLATFORM,
        status=EquipmentStatus.UNASSIGNED,
        purchase_date=now,
        purchase_price=item.unit_price,
        currency_id=currency_id,
        country_id=transaction.country_id,
        asset_order_id=order.id,
        asset_spec_id=item.asset_spec_id,
        description=asset.description if asset else "",
        image_url=images[0] if images else None,
        other_details=[f"{key}: {value}" for key, value in spec.items()],
        specs=specs,  # Equipment's validator derives memory_key and storage_key from it
    )


def _assign_storage_equipment(
    session: Session,
    transaction: Transaction,
    order: Order,
    items: Sequence[TransactionItem],
    employees: dict[uuid.UUID, Employee],
    actor: str,
) -> tuple[list[tuple[EventType, Equipment]], list[uuid.UUID | None]]:
    """Assign each device to its employee; answers the events and the devices that could not be."""
    devices = lock_devices(session, (item.equipment_id for item in items))
    changes: list[tuple[EventType, Equipment]] = []
    unavailable: list[uuid.UUID | None] = []
    for item in items:
        equipment = devices.get(item.equipment_id) if item.equipment_id else None
        assignee = employees.get(item.employee_id) if item.employee_id else None
        if equipment is not None and equipment.status == EquipmentStatus.IN_STORAGE and assignee is not None:
            lifecycle.move(
                session, equipment, EquipmentStatus.ASSIGNED, actor, assignee, {"tx_ref": transaction.tx_ref}
            )
            equipment.asset_order_id = order.id
            changes.append((EventType.EQUIPMENT_ASSIGNED, equipment))
        else:  # paid for, but the device left storage or the employee left meanwhile: kept for an operator
            unavailable.append(item.equipment_id)
        session.add(_order_item(order, item, item.equipment_id, employees))
    return changes, unavailable


def _order_item(
    order: Order, item: TransactionItem, equipment_id: uuid.UUID | None, employees: dict[uuid.UUID, Employee]
) -> OrderItem:
    """The item at its kind's first stage (purchases and onboardings: `order_placed`; retrievals:
    `retrieval_scheduled`), for its employee if they are still there (`employees`, held): one
    deleted since the transaction's items were read is named only by `employee_name`, as the
    foreign key's SET NULL leaves the items of one deleted before."""
    first = STAGES[order.kind][0]
    return OrderItem(
        destination=item.destination,
        stage=first,
        stages=[stage_entry(first, utcnow(), None)],
        company_id=order.company_id,
        order_id=order.id,
        employee_id=item.employee_id if item.employee_id in employees else None,
        employee_name=item.employee_name,
        asset_spec_id=item.asset_spec_id,
        asset_pricing_id=item.asset_pricing_id,
        price=item.unit_price,
        equipment_id=equipment_id,
    )
