"""Initiating transactions: every check of a catalog order or an onboarding from storage runs
before anything is written; then the transaction, its items (and reservations) are written, and
either the gateway gives a checkout link (Card) or the wallet pays and it is fulfilled (Credit)."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Sequence
from datetime import timedelta
from decimal import Decimal

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, joinedload

from outfitter.catalog.models import AVAILABLE, Country, Currency
from outfitter.catalog.reference import resolve_country
from outfitter.catalog.repository import CatalogRepository
from outfitter.core.auth import AuthContext
from outfitter.core.errors import Conflict, DomainError, ValidationFailed
from outfitter.core.tenancy import parse_uuid
from outfitter.db.base import utcnow
from outfitter.equipment import lifecycle
from outfitter.equipment.models import Equipment
from outfitter.payments.fees import Charges, compute_charges, schedule_for
from outfitter.payments.fulfilment import CATALOG, PENDING, STORAGE, settle
from outfitter.payments.gateways import (
    SUCCESSFUL,
    CheckoutRequest,
    GatewayError,
    GatewayPayment,
    GatewayRegistry,
)
from outfitter.payments.models import EquipmentReservation, Transaction, TransactionItem
from outfitter.payments.repository import reserved_equipment_ids
from outfitter.payments.schemas import InitiateRequest, StorageInitiateRequest
from outfitter.payments.wallet import debit_wallet
from outfitter.people.models import Employee

MAX_DEVICES = 1000


class GatewayUnavailable(DomainError):
    status_code = 502


def new_tx_ref() -> str:
    return f"OTF-{secrets.token_hex(10).upper()}"


def _employees_of(
    session: Session,
    company_id: uuid.UUID,
    keys: Sequence[str],
    country: Country,
    errors: dict[str, list[str]],
) -> dict[str, Employee]:
    """The company's employees named by `keys`, each living in `country`; problems go to `errors`."""
    parsed = {key: parse_uuid(key) for key in keys}
    ids = {value for value in parsed.values() if value is not None}
    found = {
        employee.id: employee
        for employee in session.scalars(
            select(Employee)
            .where(Employee.company_id == company_id, Employee.id.in_(ids))
            .options(joinedload(Employee.country))
        )
    }
    employees: dict[str, Employee] = {}
    for key, employee_id in parsed.items():
        employee = found.get(employee_id) if employee_id else None
        if employee is None:
            errors.setdefault(f"orders.{key}", []).append("Unknown employee: not one of this company's.")
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


def initiate_catalog(
    session: Session, auth: AuthContext, body: InitiateRequest, gateways: GatewayRegistry
) -> Transaction:
    country = resolve_country(session, body.employee_country_id, "employee_country_id")
    errors: dict[str, list[str]] = {}
    employees = _employees_of(session, auth.company_id, list(body.orders), country, errors)

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
        elif pricing.specification.status != AVAILABLE or pricing.specification.asset.status != AVAILABLE:
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
                    company_id=auth.company_id,
                    employee_id=employees[key].id,
                    employee_name=employees[key].full_name,
                    asset_pricing_id=pricing.id,
                    asset_spec_id=pricing.specification_id,
                    quantity=item.quantity,
                    unit_price=pricing.amount,
                )
            )
    amount = sum((row.unit_price * row.quantity for row in rows), Decimal(0))
    charges = compute_charges(schedule, currency.minor_units, amount, devices, body.payment_method)
    transaction = _write(
        session,
        auth,
        CATALOG,
        body.payment_method,
        body.redirect_url,
        country,
        currency,
        charges,
        rows,
        _ttl(gateways),
    )
    return _pay(session, auth, transaction, gateways, f"{devices} device(s) for employees in {country.name}")


def initiate_storage(
    session: Session, auth: AuthContext, body: StorageInitiateRequest, gateways: GatewayRegistry
) -> Transaction:
    country = resolve_country(session, body.employee_country_id, "employee_country_id")
    errors: dict[str, list[str]] = {}
    employees = _employees_of(session, auth.company_id, list(body.orders), country, errors)
    wanted: dict[str, uuid.UUID | None] = {}
    seen: set[uuid.UUID] = set()
    for key, ids in body.orders.items():
        for index, value in enumerate(ids):
            path = f"orders.{key}.{index}"
            parsed = parse_uuid(value) if isinstance(value, str) else None
            if parsed is not None and parsed in seen:
                errors.setdefault(path, []).append("This equipment is named twice in the request.")
            elif parsed is not None:
                seen.add(parsed)
            wanted[path] = parsed
    if len(wanted) > MAX_DEVICES:
        errors.setdefault("orders", []).append(f"At most {MAX_DEVICES} devices a transaction.")
    # Locked in id order, so two initiates naming the same devices queue instead of deadlocking.
    devices = {
        equipment.id: equipment
        for equipment in session.scalars(
            select(Equipment)
            .where(Equipment.company_id == auth.company_id, Equipment.id.in_(seen))
            .order_by(Equipment.id)
            .with_for_update()
        )
    }
    for path, equipment_id in wanted.items():
        if (equipment_id is None or equipment_id not in devices) and path not in errors:
            errors.setdefault(path, []).append("Unknown equipment: not one of this company's.")
    if errors:
        raise ValidationFailed.fields(errors)
    for equipment in devices.values():
        if equipment.status != lifecycle.IN_STORAGE:
            raise Conflict(
                f"Equipment {equipment.title} ({equipment.id}) is {equipment.status}, not In_Storage."
            )
    reserved = reserved_equipment_ids(session, list(devices))
    if reserved:
        raise Conflict(_reserved_message(devices, reserved))
    currency = _currency(session, country.currency_code)
    schedule = schedule_for(session, currency.code, "employee_country_id")

    rows = [
        TransactionItem(
            company_id=auth.company_id,
            employee_id=employees[key].id,
            employee_name=employees[key].full_name,
            equipment_id=uuid.UUID(value),
            quantity=1,
            unit_price=Decimal(0),
        )
        for key, ids in body.orders.items()
        for value in ids
    ]
    charges = compute_charges(schedule, currency.minor_units, Decimal(0), len(rows), body.payment_method)
    transaction = _write(
        session,
        auth,
        STORAGE,
        body.payment_method,
        body.redirect_url,
        country,
        currency,
        charges,
        rows,
        _ttl(gateways),
    )
    try:
        with session.begin_nested():
            session.add_all(
                EquipmentReservation(
                    company_id=auth.company_id, equipment_id=row.equipment_id, transaction_id=transaction.id
                )
                for row in rows
            )
    except IntegrityError:  # another initiate reserved one of them first
        raise Conflict(
            _reserved_message(devices, reserved_equipment_ids(session, list(devices)) or set(devices))
        ) from None
    return _pay(session, auth, transaction, gateways, f"Onboarding of {len(rows)} device(s) from storage")


def _ttl(gateways: GatewayRegistry) -> timedelta:
    return timedelta(hours=gateways.settings.transaction_ttl_hours)


def _reserved_message(devices: dict[uuid.UUID, Equipment], reserved: set[uuid.UUID]) -> str:
    names = ", ".join(
        f"{devices[equipment_id].title} ({equipment_id})"
        for equipment_id in sorted(reserved)
        if equipment_id in devices
    )
    return f"Equipment already reserved by a pending transaction: {names}."


def _write(
    session: Session,
    auth: AuthContext,
    kind: str,
    payment_method: str,
    redirect_url: str | None,
    country: Country,
    currency: Currency,
    charges: Charges,
    rows: list[TransactionItem],
    ttl: timedelta,
) -> Transaction:
    now = utcnow()
    transaction = Transaction(
        id=uuid.uuid4(),
        company_id=auth.company_id,
        tx_ref=new_tx_ref(),
        kind=kind,
        payment_method=payment_method,
        gateway=None,
        status=PENDING,
        country_id=country.id,
        currency_code=currency.code,
        amount=charges.amount,
        insurance=charges.insurance,
        gateway_fee=charges.gateway_fee,
        onboarding_fee=charges.onboarding_fee,
        device_config_fee=charges.device_config_fee,
        platform_fee=charges.platform_fee,
        total_amount=charges.total_amount,
        redirect_url=redirect_url,
        expires_at=now + ttl,
        actor=auth.actor,
        created_at=now,
        updated_at=now,
    )
    session.add(transaction)
    for row in rows:
        row.transaction_id = transaction.id
    session.add_all(rows)
    session.flush()
    return transaction


def _pay(
    session: Session, auth: AuthContext, transaction: Transaction, gateways: GatewayRegistry, description: str
) -> Transaction:
    if transaction.payment_method == "Credit":
        reference = None
        if transaction.total_amount > 0:
            entry = debit_wallet(
                session,
                auth.company_id,
                transaction.currency_code,
                transaction.total_amount,
                f"Payment of {transaction.tx_ref}",
                transaction.id,
            )
            reference = f"wallet:{entry.id}"
        paid = GatewayPayment(
            transaction.tx_ref, SUCCESSFUL, transaction.total_amount, transaction.currency_code, reference
        )
        return settle(session, transaction.id, paid)
    gateway = gateways.get(gateways.default_name)
    assert gateway is not None
    transaction.gateway = gateway.name
    try:
        transaction.link = gateway.create_checkout(
            CheckoutRequest(
                tx_ref=transaction.tx_ref,
                amount=transaction.total_amount,
                currency=transaction.currency_code,
                redirect_url=transaction.redirect_url,
                customer_name=auth.company_name,
                customer_email=f"billing+{auth.company_id.hex[:12]}@customers.outfitter.example",
                description=description,
            )
        )
    except GatewayError as exc:
        raise GatewayUnavailable(f"The payment gateway could not start the payment: {exc}") from exc
    session.flush()
    return transaction
