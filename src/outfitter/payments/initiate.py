"""Initiating a catalog purchase or an onboarding from storage, in the phases `drafts` describes:
`draft_*` reads and checks, the route calls the gateway for Card, `complete_*` writes."""

from __future__ import annotations

import uuid
from decimal import Decimal

from sqlalchemy.orm import Session

from outfitter.catalog.reference import resolve_country
from outfitter.catalog.repository import CatalogRepository
from outfitter.core.errors import Conflict, ValidationFailed
from outfitter.core.money import round_money
from outfitter.db.tenancy import parse_uuid
from outfitter.equipment.repository import EquipmentRepository
from outfitter.models import (
    AssetStatus,
    Currency,
    Equipment,
    EquipmentStatus,
    Transaction,
    TransactionItem,
    TransactionKind,
)
from outfitter.payments.drafts import (
    MAX_DEVICES,
    Draft,
    checked,
    currency_of,
    employees_of,
    named_devices,
    pay,
    reserve_devices,
    reserved_message,
    storage_devices,
    write_transaction,
)
from outfitter.payments.fees import compute_charges, schedule_for
from outfitter.payments.gateways import GatewayRegistry
from outfitter.payments.schemas import InitiateRequest, StorageInitiateRequest
from outfitter.tenants.actor import Actor


def draft_catalog(session: Session, body: InitiateRequest) -> Draft:
    """The purchase checked and priced: 422 naming every unknown employee or price."""
    country = resolve_country(session, body.employee_country_id, "employee_country_id")
    errors: dict[str, list[str]] = {}
    employees = employees_of(session, list(body.orders), country, errors)

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
    draft = Draft(
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
    return checked(draft)


def complete_catalog(session: Session, actor: Actor, draft: Draft, gateways: GatewayRegistry) -> Transaction:
    return pay(session, actor, write_transaction(session, actor, draft, gateways))


def draft_storage(session: Session, body: StorageInitiateRequest) -> Draft:
    """The onboarding checked: 422 naming unknown employees or devices, 409 for a device that is
    not In_Storage or is reserved."""
    country = resolve_country(session, body.employee_country_id, "employee_country_id")
    errors: dict[str, list[str]] = {}
    employees = employees_of(session, list(body.orders), country, errors)
    device_ids = body.device_ids()
    named = [
        (f"orders.{key}.{index}", value) for key, ids in device_ids.items() for index, value in enumerate(ids)
    ]
    devices = named_devices(session, named, errors)
    if errors:
        raise ValidationFailed.fields(errors)
    _check_storage_devices(session, devices)
    currency = currency_of(session, country.currency_code)
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
    draft = Draft(
        kind=TransactionKind.STORAGE,
        payment_method=body.payment_method,
        redirect_url=body.redirect_url,
        country=country,
        currency=currency,
        charges=compute_charges(schedule, currency.minor_units, Decimal(0), len(rows), body.payment_method),
        rows=rows,
        description=f"Onboarding of {len(rows)} device(s) from storage",
        employees=employees,
        devices=devices,
    )
    return checked(draft)


def complete_storage(session: Session, actor: Actor, draft: Draft, gateways: GatewayRegistry) -> Transaction:
    # Locked in id order, so two initiates naming the same devices queue instead of deadlocking;
    # checked again, since the gateway call gave others time to move or reserve them.
    _check_storage_devices(session, storage_devices(session, set(draft.devices), lock=True))
    transaction = write_transaction(session, actor, draft, gateways)
    reserve_devices(session, transaction, draft.devices)
    return pay(session, actor, transaction)


def _check_storage_devices(session: Session, devices: dict[uuid.UUID, Equipment]) -> None:
    for equipment in devices.values():
        if equipment.status != EquipmentStatus.IN_STORAGE:
            raise Conflict(
                f"Equipment {equipment.title} ({equipment.id}) is {equipment.status}, not In_Storage."
            )
    reserving = EquipmentRepository(session).reserving_transactions(list(devices))
    if reserving:
        raise Conflict(reserved_message(devices, reserving))
