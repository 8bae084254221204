"""Initiating transactions, in three steps so that no row lock or connection is held across the
network: every check of a catalog order or an onboarding from storage reads and validates; for
Card, that read-only transaction ends and the gateway registers the payment and gives its checkout
link; then one transaction locks what it must, checks again what may have changed meanwhile, and
writes the transaction, its items and reservations (Credit: the wallet pays and it is fulfilled).
A payment registered with the gateway whose transaction then fails its last check is never paid:
its tx_ref names no transaction, and the webhook of an unknown tx_ref changes nothing."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, joinedload

from outfitter.catalog.reference import resolve_country
from outfitter.catalog.repository import CatalogRepository
from outfitter.core.errors import Conflict, DomainError, ValidationFailed
from outfitter.core.money import MAX_AMOUNT, round_money, storable
from outfitter.db.base import new_id
from outfitter.db.clock import change_time
from outfitter.db.tenancy import parse_uuid
from outfitter.equipment.repository import UNKNOWN_DEVICE, EquipmentRepository
from outfitter.http.auth import AuthContext
from outfitter.http.unit_of_work import ClientWork
from outfitter.models import (
    AssetStatus,
    Country,
    Currency,
    Employee,
    Equipment,
    EquipmentReservation,
    EquipmentStatus,
    GatewayPaymentStatus,
    PaymentMethod,
    Transaction,
    TransactionItem,
    TransactionKind,
    TransactionStatus,
)
from outfitter.models.events import EventType
from outfitter.payments.events import record_transaction_event
from outfitter.payments.fees import Charges, compute_charges, schedule_for
from outfitter.payments.fulfilment import settle
from outfitter.payments.gateways import GatewayRegistry
from outfitter.payments.gateways.base import CheckoutRequest, GatewayError, GatewayPayment
from outfitter.payments.schemas import InitiateRequest, StorageInitiateRequest
from outfitter.payments.wallet import debit_wallet
from outfitter.people.repository import UNKNOWN_EMPLOYEE, EmployeeRepository, offboarded

MAX_DEVICES = 1000


class GatewayUnavailable(DomainError):
    status_code = 502


def new_tx_ref() -> str:
    return f"OTF-{secrets.token_hex(10).upper()}"


def _employees_of(
    session: Session,
    keys: Sequence[str],
    country: Country,
    errors: dict[str, list[str]],
    *,
    receiving: bool = True,
) -> dict[str, Employee]:
    """The company's employees named by `keys`, each living in `country` and, when they are to
    receive devices, not offboarded; problems go to `errors`.
    Held as every write naming an employee holds them (`EmployeeRepository.referenced`): a DELETE
    racing the initiate waits for it, or committed first and the employee is unknown here."""
    parsed = {key: parse_uuid(key) for key in keys}
    ids = {value for value in parsed.values() if value is not None}
    found = EmployeeRepository(session).referenced(ids, joinedload(Employee.country))
    employees: dict[str, Employee] = {}
    for key, employee_id in parsed.items():
        employee = found.get(employee_id) if employee_id else None
        if employee is None:
            errors.setdefault(f"orders.{key}", []).append(UNKNOWN_EMPLOYEE)
        elif receiving and (refusal := offboarded(employee)):
            errors.setdefault(f"orders.{key}", []).append(refusal)
        elif employee.country_id != country.id:
            errors.setdefault(f"orders.{key}", []).append(
                f"{employee.full_name} lives in {employee.country.name}, not {country.name}: "
                "one transaction covers the employees of one country."
            )
        else:
            employees[key] = employee
    return employees


def _currency(session: Session, code: str) -> Currency:
    return session.scalars(select(Currency).where(Currency.code == code)).one()


@dataclass
class _Draft:
    """A transaction checked and priced, not yet written."""

    kind: TransactionKind
    payment_method: PaymentMethod
    redirect_url: str | None
    country: Country
    currency: Currency
    charges: Charges
    rows: list[TransactionItem]
    description: str
    employees: dict[str, Employee]  # by the key the request named them with
    tx_ref: str = field(default_factory=lambda: new_tx_ref())
    gateway: str | None = None
    link: str | None = None


def initiate_catalog(work: ClientWork, body: InitiateRequest, gateways: GatewayRegistry) -> Transaction:
    session = work.session
    country = resolve_country(session, body.employee_country_id, "employee_country_id")
    errors: dict[str, list[str]] = {}
    employees = _employees_of(session, list(body.orders), country, errors)

    wanted = {
        (key, index): parse_uuid(item.asset_pricing_id)
        for key, items in body.orders.items()
        for index, item in enumerate(items)
    }
    pricing_ids = {value for value in wanted.values() if value is not None}
    pricings = CatalogRepository(session).pricings(pricing_ids)
    currency: Currency | None = None
    for (key, index), pricing_id in wanted.items():
        path = f"orders.{key}.{index}.asset_pricing_id"
        pricing = pricings.get(pricing_id) if pricing_id else None
        if pricing is None:
            errors.setdefault(path, []).append("Unknown asset pricing id: take one from /client/assets.")
        elif pricing.country_id != country.id:
            errors.setdefault(path, []).append(
                f"This price is for {pricing.country.name}, not {country.name}: "
                "list the assets for that country."
            )
        elif (
            pricing.specification.status != AssetStatus.AVAILABLE
            or pricing.specification.asset.status != AssetStatus.AVAILABLE
        ):
            errors.setdefault(path, []).append("This asset is no longer available.")
        elif currency is None:
            currency = pricing.currency
        elif pricing.currency.code != currency.code:
            errors.setdefault(path, []).append(
                f"This price is in {pricing.currency.code}, another in {currency.code}: "
                "all prices of one transaction must be in one currency."
            )
    devices = sum(item.quantity for items in body.orders.values() for item in items)
    if devices > MAX_DEVICES:
        errors.setdefault("orders", []).append(
            f"At most {MAX_DEVICES} devices a transaction; this asks {devices}."
        )
    if errors:
        raise ValidationFailed.fields(errors)
    assert currency is not None
    schedule = schedule_for(session, currency.code, "orders")

    rows: list[TransactionItem] = []
    for key, items in body.orders.items():
        for item in items:
            pricing = pricings[uuid.UUID(item.asset_pricing_id)]
            rows.append(
                TransactionItem(
                    employee_id=employees[key].id,
                    employee_name=employees[key].full_name,
                    asset_pricing_id=pricing.id,
                    asset_spec_id=pricing.specification_id,
                    quantity=item.quantity,
                    # as /client/assets shows it: unit price x quantity is what is charged
                    unit_price=round_money(pricing.amount, currency.minor_units),
                )
            )
    amount = sum((row.unit_price * row.quantity for row in rows), Decimal(0))
    draft = _Draft(
        kind=TransactionKind.CATALOG,
        payment_method=body.payment_method,
        redirect_url=body.redirect_url,
        country=country,
        currency=currency,
        charges=compute_charges(schedule, currency.minor_units, amount, devices, body.payment_method),
        rows=rows,
        description=f"{devices} device(s) for employees in {country.name}",
        employees=employees,
    )
    _register_with_gateway(work, draft, gateways)
    return _pay(work, _write(session, work.auth, draft, _ttl(gateways)))


def _named_devices(
    session: Session, named: Sequence[tuple[str, object]], errors: dict[str, list[str]]
) -> dict[uuid.UUID, Equipment]:
    """The company's devices that a request names, each at its path (`orders.<employee>.<i>`):
    a device named twice, or not one of the company's, is an error at its path (added to `errors`),
    and so are more than MAX_DEVICES. Read without a lock: the write locks and checks them again."""
    wanted: dict[str, uuid.UUID | None] = {}
    seen: set[uuid.UUID] = set()
    for path, value in named:
        parsed = parse_uuid(value) if isinstance(value, str) else None
        if parsed is not None and parsed in seen:
            errors.setdefault(path, []).append("This equipment is named twice in the request.")
        elif parsed is not None:
            seen.add(parsed)
        wanted[path] = parsed
    if len(wanted) > MAX_DEVICES:
        errors.setdefault("orders", []).append(f"At most {MAX_DEVICES} devices a transaction.")
    devices = _storage_devices(session, seen, lock=False)
    for path, equipment_id in wanted.items():
        if (equipment_id is None or equipment_id not in devices) and path not in errors:
            errors.setdefault(path, []).append(UNKNOWN_DEVICE)
    return devices


def initiate_storage(
    work: ClientWork, body: StorageInitiateRequest, gateways: GatewayRegistry
) -> Transaction:
    session = work.session
    country = resolve_country(session, body.employee_country_id, "employee_country_id")
    errors: dict[str, list[str]] = {}
    employees = _employees_of(session, list(body.orders), country, errors)
    device_ids = body.device_ids()
    named = [
        (f"orders.{key}.{index}", value) for key, ids in device_ids.items() for index, value in enumerate(ids)
    ]
    devices = _named_devices(session, named, errors)
    if errors:
        raise ValidationFailed.fields(errors)
    _check_storage_devices(session, devices)
    currency = _currency(session, country.currency_code)
    schedule = schedule_for(session, currency.code, "employee_country_id")

    rows = [
        TransactionItem(
            employee_id=employees[key].id,
            employee_name=employees[key].full_name,
            equipment_id=uuid.UUID(value),
            quantity=1,
            unit_price=Decimal(0),
        )
        for key, ids in device_ids.items()
        for value in ids
    ]
    draft = _Draft(
        kind=TransactionKind.STORAGE,
        payment_method=body.payment_method,
        redirect_url=body.redirect_url,
        country=country,
        currency=currency,
        charges=compute_charges(schedule, currency.minor_units, Decimal(0), len(rows), body.payment_method),
        rows=rows,
        description=f"Onboarding of {len(rows)} device(s) from storage",
        employees=employees,
    )
    _register_with_gateway(work, draft, gateways)
    # Locked in id order, so two initiates naming the same devices queue instead of deadlocking;
    # checked again, since the gateway call gave others time to move or reserve them.
    _check_storage_devices(session, _storage_devices(session, set(devices), lock=True))
    transaction = _write(session, work.auth, draft, _ttl(gateways))
    reserve_devices(session, transaction, devices)
    return _pay(work, transaction)


def reserve_devices(session: Session, transaction: Transaction, devices: dict[uuid.UUID, Equipment]) -> None:
    """Hold the devices for this Pending transaction (storage onboarding and offboarding alike):
    the unique `equipment_reservations.equipment_id` lets one of two racing initiates win."""
    try:
        with session.begin_nested():
            session.add_all(
                EquipmentReservation(equipment_id=equipment_id, transaction_id=transaction.id)
                for equipment_id in devices
            )
    except IntegrityError:  # another initiate reserved one of them first
        reserving = EquipmentRepository(session).reserving_transactions(list(devices))
        raise Conflict(_reserved_message(devices, reserving or dict.fromkeys(devices))) from None


def _storage_devices(session: Session, ids: set[uuid.UUID], *, lock: bool) -> dict[uuid.UUID, Equipment]:
    statement = select(Equipment).where(Equipment.id.in_(ids)).order_by(Equipment.id)
    if lock:
        statement = statement.with_for_update().execution_options(populate_existing=True)
    return {equipment.id: equipment for equipment in session.scalars(statement)}


def _check_storage_devices(session: Session, devices: dict[uuid.UUID, Equipment]) -> None:
    for equipment in devices.values():
        if equipment.status != EquipmentStatus.IN_STORAGE:
            raise Conflict(
                f"Equipment {equipment.title} ({equipment.id}) is {equipment.status}, not In_Storage."
            )
    reserving = EquipmentRepository(session).reserving_transactions(list(devices))
    if reserving:
        raise Conflict(_reserved_message(devices, reserving))


def _ttl(gateways: GatewayRegistry) -> timedelta:
    return timedelta(hours=gateways.settings.transaction_ttl_hours)


def _reserved_message(devices: dict[uuid.UUID, Equipment], reserving: Mapping[uuid.UUID, str | None]) -> str:
    """409 naming each device taken and, when known, the transaction holding it (`reserving`:
    device id to tx_ref; None when a racing initiate's reservation is not visible yet)."""
    names = "; ".join(
        f"{devices[equipment_id].title} ({equipment_id})" + (f", by {tx_ref}" if tx_ref else "")
        for equipment_id, tx_ref in sorted(reserving.items())
        if equipment_id in devices
    )
    return (
        f"Equipment already reserved by a pending transaction: {names}. It cannot be given again "
        "until that transaction is paid, fails or expires."
    )


def _register_with_gateway(work: ClientWork, draft: _Draft, gateways: GatewayRegistry) -> None:
    """Card: end the read-only transaction, then ask the gateway for the checkout link; then hold
    the employees again, since the reads that held them have ended. First, for every method, a
    total beyond what any charge may reach (core.money.MAX_AMOUNT) is a 422: nothing is asked."""
    total = draft.charges.total_amount
    if not storable(total):
        raise ValidationFailed.field(
            "orders",
            f"This transaction would total {total:,} {draft.currency.code}, fees included; one "
            f"transaction charges less than {MAX_AMOUNT:,}: split it into smaller ones.",
        )
    if draft.payment_method != PaymentMethod.CARD or total == 0:
        return  # nothing for a gateway to take: `_pay` settles it at once, as a Credit one
    gateway = gateways.get(gateways.default_name)
    assert gateway is not None
    work.end_reads()
    auth = work.auth
    try:
        draft.link = gateway.create_checkout(
            CheckoutRequest(
                tx_ref=draft.tx_ref,
                amount=draft.charges.total_amount,
                currency=draft.currency.code,
                redirect_url=draft.redirect_url,
                customer_name=auth.company_name,
                customer_email=f"billing+{auth.company_id.hex[:12]}@customers.outfitter.example",
                description=draft.description,
                session_minutes=gateways.settings.transaction_ttl_hours * 60,
            )
        )
    except GatewayError as exc:
        raise GatewayUnavailable(f"The payment gateway could not start the payment: {exc}") from exc
    draft.gateway = gateway.name
    _hold_employees(work.session, draft)


def _write(session: Session, auth: AuthContext, draft: _Draft, ttl: timedelta) -> Transaction:
    now = change_time(session)  # a Card initiate's reads ended before the gateway was called
    charges = draft.charges
    transaction = Transaction(
        id=new_id(),
        tx_ref=draft.tx_ref,
        kind=draft.kind,
        payment_method=draft.payment_method,
        gateway=draft.gateway,
        link=draft.link,
        status=TransactionStatus.PENDING,
        country_id=draft.country.id,
        currency_code=draft.currency.code,
        amount=charges.amount,
        insurance=charges.insurance,
        gateway_fee=charges.gateway_fee,
        onboarding_fee=charges.onboarding_fee,
        device_config_fee=charges.device_config_fee,
        platform_fee=charges.platform_fee,
        retrieval_fee=charges.retrieval_fee,
        inspection_fee=charges.inspection_fee,
        storage_fee=charges.storage_fee,
        total_amount=charges.total_amount,
        redirect_url=draft.redirect_url,
        expires_at=now + ttl,
        actor=auth.actor,
        created_at=now,
        updated_at=now,
    )
    session.add(transaction)
    for row in draft.rows:
        row.transaction_id = transaction.id
    session.add_all(draft.rows)
    session.flush()
    record_transaction_event(session, EventType.TRANSACTION_INITIATED, transaction, auth.actor)
    return transaction


def _hold_employees(session: Session, draft: _Draft) -> None:
    """Hold the draft's employees again until the transaction is written, as every write naming
    one does (a Credit initiate still holds them from `_employees_of`); 422 for any deleted since
    they were read: their items would name no one."""
    held = EmployeeRepository(session).referenced({employee.id for employee in draft.employees.values()})
    gone = {
        f"orders.{key}": [UNKNOWN_EMPLOYEE]
        for key, employee in draft.employees.items()
        if employee.id not in held
    }
    if gone:
        raise ValidationFailed.fields(gone)


def _pay(work: ClientWork, transaction: Transaction) -> Transaction:
    """Credit: the wallet pays now and the transaction is fulfilled. Card: it waits for the payer,
    unless there is nothing to pay (an offboarding where the currency's fees are 0): then it is
    fulfilled now, with no checkout and no gateway, as a Credit one of 0 is."""
    if transaction.payment_method != PaymentMethod.CREDIT and transaction.total_amount > 0:
        return transaction
    session = work.session
    reference = None
    if transaction.total_amount > 0:
        entry = debit_wallet(
            session,
            transaction.currency_code,
            transaction.total_amount,
            f"Payment of {transaction.tx_ref}",
            transaction.id,
            actor=work.auth.actor,
        )
        reference = f"wallet:{entry.id}"
    paid = GatewayPayment(
        transaction.tx_ref,
        GatewayPaymentStatus.SUCCESSFUL,
        transaction.total_amount,
        transaction.currency_code,
        reference,
    )
    return settle(session, transaction.id, paid, actor=work.auth.actor)
