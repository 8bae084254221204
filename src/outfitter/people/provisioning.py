"""Employees written by an identity provider (SCIM, `outfitter.scim`): the rules, free of the protocol.

An identity provider names a person by its userName (unique in the company, compared in any case)
and by its own id (`external_id`, unique too). Its writes replace the fields it manages; the ones it
does not know (level, tax number...) stay as the API left them. Deactivating a person offboards the
employee (`status` Offboarded); reactivating makes them Active again. SCIM's DELETE offboards and
unlinks: the identities are cleared and `deprovisioned_at` hides the record from SCIM, while the
API keeps it for its equipment history and any retrieval in progress.

Who an employee is known as, and the uniqueness of its identities, are `people.identities`'
(shared with the REST API's creates); the queries are the repository's. The caller records the
one event each change makes (`record_change`), because only it knows whether
an offboarding also opened a retrieval (see `outfitter.scim.offboarding`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any

from sqlalchemy import update as update_rows
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from outfitter.core.errors import NotFound
from outfitter.db.base import utcnow
from outfitter.models import (
    EMPLOYEE_ACTIVE,
    EMPLOYEE_OFFBOARDED,
    Country,
    Employee,
    MembershipStatus,
    UserDepartment,
)
from outfitter.models.events import EventType
from outfitter.outbox import as_event_data, record_event
from outfitter.people.identities import check_identities, identities_just_taken
from outfitter.people.repository import DepartmentRepository, EmployeeRepository
from outfitter.people.schemas import EmployeeOut
from outfitter.people.service import employee_out, present


@dataclass(frozen=True)
class ProvisionedEmployee:
    """What an identity provider manages of an employee."""

    user_name: str  # lower-cased
    email: str  # the work email, lower-cased
    first_name: str
    last_name: str
    country_id: uuid.UUID
    external_id: str | None = None
    personal_email: str | None = None
    phone: str = ""
    address: str = ""
    job_title: str | None = None
    department_name: str | None = None
    manager_id: uuid.UUID | None = None
    active: bool = True


class Change(Enum):
    NONE = "none"
    UPDATED = "updated"
    OFFBOARDED = "offboarded"


def is_active(employee: Employee) -> bool:
    return employee.status != EMPLOYEE_OFFBOARDED


def user_name_of(employee: Employee) -> str:
    """An employee made through the API is known to SCIM by its email."""
    return employee.user_name or employee.email


def get_provisioned(session: Session, employee_id: uuid.UUID | str, for_update: bool = False) -> Employee:
    """An employee SCIM can see (not deleted through SCIM), with its country; 404 otherwise."""
    employee = EmployeeRepository(session).provisioned(employee_id, for_update=for_update)
    if employee is None:
        raise NotFound.record("User")
    return employee


def check_manager(session: Session, manager_id: uuid.UUID | None, employee_id: uuid.UUID | None) -> bool:
    """Whether `manager_id` names another live employee of the company."""
    if manager_id is None:
        return True
    if manager_id == employee_id:
        return False
    return bool(EmployeeRepository(session).provisioned_ids([manager_id]))


def _flush(session: Session, wanted: ProvisionedEmployee) -> None:
    try:
        session.flush()
    except IntegrityError:  # a concurrent request took an identity between our check and the write
        raise identities_just_taken(wanted.user_name) from None


def _columns(wanted: ProvisionedEmployee) -> dict[str, object]:
    values = {field.name: getattr(wanted, field.name) for field in fields(wanted) if field.name != "active"}
    values["status"] = EMPLOYEE_ACTIVE if wanted.active else EMPLOYEE_OFFBOARDED
    return values


def _check_identities(session: Session, wanted: ProvisionedEmployee, except_id: uuid.UUID | None) -> None:
    employees = EmployeeRepository(session)
    check_identities(employees, wanted.user_name, wanted.email, wanted.external_id, except_id)


def create(session: Session, wanted: ProvisionedEmployee) -> Employee:
    _check_identities(session, wanted, None)
    # The country is read before the employee joins the session: a read's autoflush would insert
    # it outside `_flush`, and a concurrent request's userName would then be a 500, not a 409.
    country = _country(session, wanted.country_id)
    employee = EmployeeRepository(session).add(Employee(**_columns(wanted), country=country))
    _flush(session, wanted)
    return employee


def update(session: Session, employee: Employee, wanted: ProvisionedEmployee) -> Change:
    """Write `wanted` over `employee`; what changed: nothing, the fields, or an offboarding."""
    _check_identities(session, wanted, employee.id)
    was_active = is_active(employee)
    country = employee.country  # read first, as in `create`
    if country.id != wanted.country_id:
        country = _country(session, wanted.country_id)
    for name, value in _columns(wanted).items():
        if getattr(employee, name) != value:
            setattr(employee, name, value)
    if not session.is_modified(employee):
        return Change.NONE
    employee.country = country
    employee.updated_at = utcnow()
    _flush(session, wanted)
    return Change.OFFBOARDED if was_active and not wanted.active else Change.UPDATED


def _country(session: Session, country_id: uuid.UUID) -> Country:
    country = session.get(Country, country_id)
    assert country is not None  # resolved by the caller
    return country


def deprovision(session: Session, employee: Employee) -> Change:
    """SCIM's DELETE: offboard (when still active) and unlink from the identity provider."""
    change = Change.OFFBOARDED if is_active(employee) else Change.NONE
    employee.status = EMPLOYEE_OFFBOARDED
    employee.user_name = None
    employee.external_id = None
    employee.deprovisioned_at = employee.updated_at = utcnow()
    # Their reports' manager is now no User SCIM knows: none. And they leave their departments,
    # as the API's DELETE takes them out of theirs (the Groups would no longer list them anyway).
    session.execute(update_rows(Employee).where(Employee.manager_id == employee.id).values(manager_id=None))
    DepartmentRepository(session).touch_departments_of(employee.id, employee.updated_at, headed=False)
    session.execute(
        update_rows(UserDepartment)
        .where(UserDepartment.user_id == employee.id, UserDepartment.deleted_at.is_(None))
        .values(deleted_at=employee.deprovisioned_at, status=MembershipStatus.INACTIVE)
        .execution_options(synchronize_session=False)
    )
    session.flush()
    return change


def record_change(
    session: Session,
    employee: Employee,
    type: EventType,
    actor: str | None,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """The one event of a provisioning change: the employee as the API answers it (and `extra`)."""
    session.flush()
    if type == EventType.EMPLOYEE_CREATED:  # nothing is related to it yet: no need to look
        answer = employee_out(employee, employee.country)
    else:
        answer = present(EmployeeRepository(session), [employee])[0]
    data = {**as_event_data(EmployeeOut, answer), **(extra or {})}
    record_event(session, type, employee.id, data, actor=actor)
