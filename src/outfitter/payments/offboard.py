"""Initiating an offboarding: devices retrieved from employees, paid for by fees only.

The same three steps as the other initiates (`initiate.py`): read and validate; for Card, end the
read-only transaction and register the payment with the gateway; then lock the devices, check them
again and write the transaction with its reservations. Fulfilment (`fulfilment.fulfil`) makes a
`retrieval` order whose items start at `retrieval_scheduled`; the devices stay Assigned until an
operator moves their item to `received` (`orders.advance`)."""

from __future__ import annotations

import uuid
from decimal import Decimal

from sqlalchemy.orm import Session

from outfitter.catalog.reference import resolve_country
from outfitter.core.errors import Conflict, ValidationFailed
from outfitter.equipment.repository import EquipmentRepository
from outfitter.http.unit_of_work import ClientWork
from outfitter.models import (
    Employee,
    Equipment,
    EquipmentStatus,
    RetrievalDestination,
    Transaction,
    TransactionItem,
    TransactionKind,
)
from outfitter.payments.fees import compute_offboard_charges, schedule_for
from outfitter.payments.gateways import GatewayRegistry
from outfitter.payments.initiate import (
    _currency,
    _Draft,
    _employees_of,
    _named_devices,
    _pay,
    _register_with_gateway,
    _reserved_message,
    _storage_devices,
    _ttl,
    _write,
    reserve_devices,
)
from outfitter.payments.repository import open_retrieval_equipment_ids
from outfitter.payments.schemas import OffboardInitiateRequest


def initiate_offboard(
    work: ClientWork, body: OffboardInitiateRequest, gateways: GatewayRegistry
) -> Transaction:
    session = work.session
    country = resolve_country(session, body.employee_country_id, "employee_country_id")
    errors: dict[str, list[str]] = {}
    employees = _employees_of(session, list(body.orders), country, errors, receiving=False)
    named = body.devices()
    devices = _named_devices(
        session, [(f"orders.{key}.{index}", device.equipment_id) for key, index, device in named], errors
    )
    if errors:
        raise ValidationFailed.fields(errors)
    holders = {uuid.UUID(device.equipment_id): employees[key] for key, _, device in named}
    _check_held_devices(session, devices, holders)
    currency = _currency(session, country.currency_code)
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
    draft = _Draft(
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
    )
    _register_with_gateway(work, draft, gateways)
    # Locked in id order and checked again: the gateway call gave others time to move or reserve them.
    _check_held_devices(session, _storage_devices(session, set(devices), lock=True), holders)
    transaction = _write(session, work.auth, draft, _ttl(gateways))
    reserve_devices(session, transaction, devices)  # `_write` recorded transaction.initiated
    return _pay(work, transaction)


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
        raise Conflict(_reserved_message(devices, reserving))
    returning = open_retrieval_equipment_ids(session, list(devices))
    if returning:
        names = ", ".join(
            f"{devices[equipment_id].title} ({equipment_id})" for equipment_id in sorted(returning)
        )
        raise Conflict(f"Equipment already being retrieved by an order in progress: {names}.")
