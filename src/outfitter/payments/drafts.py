"""What the three initiates (catalog, storage onboarding, offboarding) share, phase by phase, so
that no row lock or connection is held across the network:

1. read and check (`initiate.draft_*`, `offboard.draft_offboard`): a `Draft`, checked and priced;
2. for Card with something to pay, the route ends the reads and `open_checkout` registers the
   payment with the gateway, which gives the checkout link;
3. write (`complete_*`): lock what must be locked, check again what may have changed meanwhile,
   write the transaction, its items and reservations; Credit (or nothing to pay) is paid at once.

A payment registered with the gateway whose transaction then fails its last check is never paid:
its tx_ref names no transaction, and the webhook of an unknown tx_ref changes nothing."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, joinedload

from outfitter.core.errors import Conflict, DomainError, ValidationFailed
from outfitter.core.money import MAX_AMOUNT, storable
from outfitter.db.base import new_id
from outfitter.db.clock import change_time
from outfitter.db.tenancy import parse_uuid
from outfitter.equipment.repository import UNKNOWN_DEVICE, EquipmentRepository
from outfitter.models import (
    Country,
    Currency,
    Employee,
    Equipment,
    EquipmentReservation,
    GatewayPaymentStatus,
    PaymentMethod,
    Transaction,
    TransactionItem,
    TransactionKind,
    TransactionStatus,
)
from outfitter.models.events import EventType
from outfitter.payments.events import record_transaction_event
from outfitter.payments.fees import Charges
from outfitter.payments.fulfilment import settle
from outfitter.payments.gateways import GatewayRegistry
from outfitter.payments.gateways.base import CheckoutRequest, GatewayError, GatewayPayment
from outfitter.payments.wallet import debit_wallet
from outfitter.people.repository import UNKNOWN_EMPLOYEE, EmployeeRepository, offboarded
from outfitter.tenants.actor import Actor

MAX_DEVICES = 1000


class GatewayUnavailable(DomainError):
    status_code = 502


def new_tx_ref() -> str:
    return f"OTF-{secrets.token_hex(10).upper()}"


def employees_of(
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


def currency_of(session: Session, code: str) -> Currency:
    return session.scalars(select(Currency).where(Currency.code == code)).one()


@dataclass
class Draft:
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
    devices: dict[uuid.UUID, Equipment] = field(default_factory=dict)  # the ones it moves, if any
    tx_ref: str = field(default_factory=lambda: new_tx_ref())
    gateway: str | None = None
    link: str | None = None

    @property
    def needs_checkout(self) -> bool:
        """Card with something to pay: the gateway takes it (else `pay` settles it at once)."""
        return self.payment_method == PaymentMethod.CARD and self.charges.total_amount > 0


def named_devices(
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
    devices = storage_devices(session, seen, lock=False)
    for path, equipment_id in wanted.items():
        if (equipment_id is None or equipment_id not in devices) and path not in errors:
            errors.setdefault(path, []).append(UNKNOWN_DEVICE)
    return devices


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
        raise Conflict(reserved_message(devices, reserving or dict.fromkeys(devices))) from None


def storage_devices(session: Session, ids: set[uuid.UUID], *, lock: bool) -> dict[uuid.UUID, Equipment]:
    statement = select(Equipment).where(Equipment.id.in_(ids)).order_by(Equipment.id)
    if lock:
        statement = statement.with_for_update().execution_options(populate_existing=True)
    return {equipment.id: equipment for equipment in session.scalars(statement)}


def transaction_ttl(gateways: GatewayRegistry) -> timedelta:
    return timedelta(hours=gateways.settings.transaction_ttl_hours)


def reserved_message(devices: dict[uuid.UUID, Equipment], reserving: Mapping[uuid.UUID, str | None]) -> str:
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


# What writes a checked draft (`initiate.complete_catalog`...), once any checkout is open.
Complete = Callable[[Session, Actor, Draft, GatewayRegistry], Transaction]


def checked(draft: Draft) -> Draft:
    """The draft, once its total is one a transaction may charge (core.money.MAX_AMOUNT): beyond
    it, a 422 before anything is asked of a gateway or written."""
    total = draft.charges.total_amount
    if not storable(total):
        raise ValidationFailed.field(
            "orders",
            f"This transaction would total {total:,} {draft.currency.code}, fees included; one "
            f"transaction charges less than {MAX_AMOUNT:,}: split it into smaller ones.",
        )
    return draft


def open_checkout(draft: Draft, gateways: GatewayRegistry, actor: Actor) -> None:
    """Register a Card payment with the gateway and keep its checkout link on the draft. Called
    with no database transaction open (the route ended the reads): it waits on the network."""
    gateway = gateways.get(gateways.default_name)
    assert gateway is not None
    try:
        draft.link = gateway.create_checkout(
            CheckoutRequest(
                tx_ref=draft.tx_ref,
                amount=draft.charges.total_amount,
                currency=draft.currency.code,
                redirect_url=draft.redirect_url,
                customer_name=actor.company_name,
                customer_email=f"billing+{actor.company_id.hex[:12]}@customers.outfitter.example",
                description=draft.description,
                session_minutes=gateways.settings.transaction_ttl_hours * 60,
            )
        )
    except GatewayError as exc:
        raise GatewayUnavailable(f"The payment gateway could not start the payment: {exc}") from exc
    draft.gateway = gateway.name


def write_transaction(session: Session, actor: Actor, draft: Draft, gateways: GatewayRegistry) -> Transaction:
    """The draft as a Pending transaction with its items, after holding its employees again when
    the reads that held them ended for a checkout."""
    if draft.link is not None:
        hold_employees(session, draft)
    return _write(session, actor, draft, transaction_ttl(gateways))


def _write(session: Session, actor: Actor, draft: Draft, ttl: timedelta) -> Transaction:
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
        actor=actor.name,
        created_at=now,
        updated_at=now,
    )
    session.add(transaction)
    for row in draft.rows:
        row.transaction_id = transaction.id
    session.add_all(draft.rows)
    session.flush()
    record_transaction_event(session, EventType.TRANSACTION_INITIATED, transaction, actor.name)
    return transaction


def hold_employees(session: Session, draft: Draft) -> None:
    """Hold the draft's employees again until the transaction is written, as every write naming
    one does (a Credit initiate still holds them from `employees_of`); 422 for any deleted since
    they were read: their items would name no one."""
    held = EmployeeRepository(session).referenced({employee.id for employee in draft.employees.values()})
    gone = {
        f"orders.{key}": [UNKNOWN_EMPLOYEE]
        for key, employee in draft.employees.items()
        if employee.id not in held
    }
    if gone:
        raise ValidationFailed.fields(gone)


def pay(session: Session, actor: Actor, transaction: Transaction) -> Transaction:
    """Credit: the wallet pays now and the transaction is fulfilled. Card: it waits for the payer,
    unless there is nothing to pay (an offboarding where the currency's fees are 0): then it is
    fulfilled now, with no checkout and no gateway, as a Credit one of 0 is."""
    if transaction.payment_method != PaymentMethod.CREDIT and transaction.total_amount > 0:
        return transaction
    reference = None
    if transaction.total_amount > 0:
        entry = debit_wallet(
            session,
            transaction.currency_code,
            transaction.total_amount,
            f"Payment of {transaction.tx_ref}",
            transaction.id,
            actor=actor.name,
        )
        reference = f"wallet:{entry.id}"
    paid = GatewayPayment(
        transaction.tx_ref,
        GatewayPaymentStatus.SUCCESSFUL,
        transaction.total_amount,
        transaction.currency_code,
        reference,
    )
    return settle(session, transaction.id, paid, actor=actor.name)
