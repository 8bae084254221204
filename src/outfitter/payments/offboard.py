"""Initiating an offboarding: devices retrieved from employees, paid for by fees only.

The same phases as the other initiates (`drafts.py`): read and check (`draft_offboard`); for
Card, the route ends the reads and the gateway registers the payment; then `complete_offboard`
locks the devices, checks them again and writes the transaction with its reservations.
Fulfilment (`fulfilment.fulfil`) makes a `retrieval` order whose items start at
`retrieval_scheduled`; the devices stay Assigned until an operator moves their item to `received`
(`orders.advance`)."""

from __future__ import annotations

import uuid
from decimal import Decimal

from sqlalchemy.orm import Session

from outfitter.catalog.reference import resolve_country
from outfitter.core.errors import Conflict, ValidationFailed
from outfitter.equipment.repository import EquipmentRepository
from outfitter.models import (
    Employee,
    Equipment,
    EquipmentStatus,
    RetrievalDestination,
    Transaction,
    TransactionItem,
    TransactionKind,
)
from outfitter.payments.drafts import (
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
from outfitter.payments.fees import compute_offboard_charges, schedule_for
from outfitter.payments.gateways import GatewayRegistry
from outfitter.payments.repository import open_retrieval_equipment_ids
from outfitter.payments.schemas import OffboardInitiateRequest
from outfitter.tenants.actor import Actor


def draft_offboard(session: Session, body: OffboardInitiateRequest) -> Draft:
    """The retrieval checked and priced: 422 naming unknown employees or devices, 409 for a device
    its employee does not hold, or one reserved or already on its way back."""
    country = resolve_country(session, body.employee_country_id, "employee_country_id")
    errors: dict[str, list[str]] = {}
    employees = employees_of(session, list(body.orders), country, errors, receiving=False)
    named = body.devices()
    devices = named_devices(
        session, [(f"orders.{key}.{index}", device.equipment_id) for key, index, device in named], errors
    )
    if errors:
        raise ValidationFailed.fields(errors)
    holders = {uuid.UUID(device.equipment_id): employees[key] for key, _, device in named}
    _check_held_devices(session, devices, holders)
    currency = currency_of(session, country.currency_code)
    schedule = schedule_for(session, currency.code, "employee_country_id")

    rows = [
        TransactionItem(
            employee_id=employees[key].id,
            employee_name=employees[key].full_name,
            equipment_id=uuid.UUID(device.equipment_id),
            destination=device.destination,
            quantity=1,
            unit_price=Decimal(0),
        )
        for key, _, device in named
    ]
    to_storage = sum(1 for row in rows if row.destination == RetrievalDestination.STORAGE)
    draft = Draft(
        kind=TransactionKind.OFFBOARD,
        payment_method=body.payment_method,
        redirect_url=body.redirect_url,
        country=country,
        currency=currency,
        charges=compute_offboard_charges(
            schedule, currency.minor_units, len(rows), to_storage, body.payment_method
        ),
        rows=rows,
        description=f"Retrieval of {len(rows)} device(s) from employees in {country.name}",
        employees=employees,
        devices=devices,
    )
    return checked(draft)


def complete_offboard(session: Session, actor: Actor, draft: Draft, gateways: GatewayRegistry) -> Transaction:
    # Locked in id order and checked again: the gateway call gave others time to move or reserve them.
    locked = storage_devices(session, set(draft.devices), lock=True)
    _check_held_devices(session, locked, _holders(draft))
    transaction = write_transaction(session, actor, draft, gateways)
    reserve_devices(session, transaction, draft.devices)  # the write recorded transaction.initiated
    return pay(session, actor, transaction)


def _holders(draft: Draft) -> dict[uuid.UUID, Employee]:
    """Each device of the draft by the employee it was named under: its item's employee."""
    employees = {employee.id: employee for employee in draft.employees.values()}
    return {
        row.equipment_id: employees[row.employee_id]
        for row in draft.rows
        if row.equipment_id is not None and row.employee_id is not None
    }


def _check_held_devices(
    session: Session, devices: dict[uuid.UUID, Equipment], holders: dict[uuid.UUID, Employee]
) -> None:
    """409 unless each device is Assigned to the employee it is named under, reserved by no Pending
    transaction and not already on its way back."""
    for equipment_id, equipment in devices.items():
        holder = holders[equipment_id]
        if equipment.status != EquipmentStatus.ASSIGNED:
            raise Conflict(
                f"Equipment {equipment.title} ({equipment.id}) is {equipment.status}, not Assigned: "
                "only a device an employee holds can be retrieved."
            )
        if equipment.assignee_id != holder.id:
            raise Conflict(
                f"Equipment {equipment.title} ({equipment.id}) is not assigned to {holder.full_name}: "
                "name each device under the employee who holds it."
            )
    reserving = EquipmentRepository(session).reserving_transactions(list(devices))
    if reserving:
        raise Conflict(reserved_message(devices, reserving))
    returning = open_retrieval_equipment_ids(session, list(devices))
    if returning:
        names = ", ".join(
            f"{devices[equipment_id].title} ({equipment_id})" for equipment_id in sorted(returning)
        )
        raise Conflict(f"Equipment already being retrieved by an order in progress: {names}.")
