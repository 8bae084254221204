"""What deactivating an employee through SCIM does beyond the employee record.

The employee is offboarded (`people.provisioning`). When the company opted in
(`outfitter company set ID --scim-offboard-retrieval on`), the devices they hold are retrieved
through the same offboard transaction as `POST /client/transactions/offboard/initiate`, paid from
Credit. If that cannot be done (not enough Credit, no fee schedule for the currency...), nothing
of it is kept and the change is recorded as `employee.offboarding_required` instead, naming the
devices and the reason, so that someone arranges the retrieval. Either way one employee event.
"""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session

from outfitter.core.errors import DomainError
from outfitter.equipment.repository import EquipmentRepository
from outfitter.models import Employee, PaymentMethod
from outfitter.models.events import EventType
from outfitter.payments.gateways import GatewayRegistry
from outfitter.payments.offboard import complete_offboard, draft_offboard
from outfitter.payments.repository import open_retrieval_equipment_ids
from outfitter.payments.schemas import OffboardInitiateRequest
from outfitter.people.provisioning import record_change
from outfitter.people.repository import EmployeeRepository
from outfitter.scim.settings import settings_of
from outfitter.tenants.actor import Actor


def offboard(session: Session, actor: Actor, employee: Employee, gateways: GatewayRegistry) -> None:
    """Record the offboarding of `employee` (already marked), retrieving their devices if opted in.
    The retrieval is paid from credit, so no gateway is called: it is written in the request's
    transaction, or not at all."""
    devices = _retrievable_devices(session, employee.id)
    if not devices or not settings_of(session, actor.company_id).offboard_retrieval:
        record_change(session, employee, EventType.EMPLOYEE_OFFBOARDED, actor.name)
        return
    body = OffboardInitiateRequest(
        payment_method=PaymentMethod.CREDIT,
        employee_country_id=str(employee.country_id),
        orders={str(employee.id): [str(device) for device in devices]},
    )
    savepoint = session.begin_nested()
    try:
        complete_offboard(session, actor, draft_offboard(session, body), gateways)
    except DomainError as exc:
        savepoint.rollback()
        record_change(
            session,
            employee,
            EventType.EMPLOYEE_OFFBOARDING_REQUIRED,
            actor.name,
            {"offboarding": {"equipment_ids": [str(device) for device in devices], "reason": exc.message}},
        )
        return
    savepoint.commit()
    record_change(session, employee, EventType.EMPLOYEE_OFFBOARDED, actor.name)  # its open_retrievals show it


def _retrievable_devices(session: Session, employee_id: uuid.UUID) -> list[uuid.UUID]:
    """The Assigned devices the employee holds that no Pending transaction or retrieval already names."""
    held = [device.id for device in EmployeeRepository(session).equipment_of([employee_id])[employee_id]]
    reserved = EquipmentRepository(session).reserving_transactions(held).keys()
    busy = reserved | open_retrieval_equipment_ids(session, held)
    return sorted(device for device in held if device not in busy)
