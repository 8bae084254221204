"""Department rules: a unique live name per company, an optional head, a replaceable member set,
and a soft delete that ends the memberships."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from outfitter.core.errors import Conflict, NotFound, ValidationFailed
from outfitter.db.base import utcnow
from outfitter.db.keyset import CursorParams, ListParams, ListResult, list_order, list_page, syncing
from outfitter.db.tenancy import parse_uuid
from outfitter.models import Department, Employee, UserDepartment
from outfitter.models.events import EventType
from outfitter.outbox import as_event_data, record_event
from outfitter.people.repository import UNKNOWN_EMPLOYEE, DepartmentRepository, EmployeeRepository
from outfitter.people.schemas import (
    CompanyBrief,
    DepartmentChange,
    DepartmentCreate,
    DepartmentOut,
    DepartmentPatch,
    HeadOut,
    MemberOut,
    UserDepartmentOut,
)
from outfitter.tenants.actor import Actor


def name_taken(name: str) -> str:
    return f"A department named {name!r} already exists in this company."


def present(
    repository: DepartmentRepository, actor: Actor, departments: Sequence[Department]
) -> list[DepartmentOut]:
    """Departments with members and counts: two statements for any number of departments."""
    ids = [department.id for department in departments]
    memberships = repository.memberships(ids)
    asset_counts = repository.asset_counts(ids)
    company = CompanyBrief(id=actor.company_id, name=actor.company_name)
    return [
        _department_out(
            department, company, memberships.get(department.id, []), asset_counts.get(department.id, 0)
        )
        for department in departments
    ]


def _department_out(
    department: Department, company: CompanyBrief, memberships: list[UserDepartment], asset_count: int
) -> DepartmentOut:
    head = department.head
    return DepartmentOut(
        id=department.id,
        company=company,
        name=department.name,
        member_count=len(memberships),
        asset_count=asset_count,
        created_at=department.created_at,
        updated_at=department.updated_at,
        head=HeadOut(name=head.full_name, id=head.id) if head else HeadOut(name=" ", id=None),
        members=[
            MemberOut(
                id=membership.user.id,
                first_name=membership.user.first_name,
                last_name=membership.user.last_name,
                email=membership.user.email,
                user_departments=[UserDepartmentOut.model_validate(membership)],
            )
            for membership in memberships
        ],
    )


def _head(session: Session, head_id: str | None) -> Employee | None:
    if head_id is None:
        return None
    parsed = parse_uuid(head_id)
    head = EmployeeRepository(session).referenced({parsed}).get(parsed) if parsed is not None else None
    if head is None:
        raise ValidationFailed.field("head_id", UNKNOWN_EMPLOYEE)
    return head


def _members(session: Session, member_ids: Sequence[str]) -> list[uuid.UUID]:
    """The distinct employees named, in order; unknown or another company's: 422 at their position."""
    parsed = [parse_uuid(value) for value in member_ids]
    found = EmployeeRepository(session).referenced({value for value in parsed if value is not None})
    errors = {
        f"member_ids.{position}": [UNKNOWN_EMPLOYEE]
        for position, value in enumerate(parsed)
        if value is None or value not in found
    }
    if errors:
        raise ValidationFailed.fields(errors)
    return list(dict.fromkeys(value for value in parsed if value is not None))


def _record(session: Session, actor: Actor, type: EventType, department: DepartmentOut) -> DepartmentOut:
    record_event(session, type, department.id, as_event_data(DepartmentOut, department), actor=actor.name)
    return department


def _flush_name(session: Session, name: str) -> None:
    try:
        session.flush()
    except IntegrityError as error:
        if "active_name" not in str(error.orig):
            raise
        raise Conflict(name_taken(name)) from None  # a concurrent request took the name after our check


def list_departments(
    session: Session, actor: Actor, params: ListParams
) -> tuple[list[DepartmentOut], ListResult[Department]]:
    """A page of either mode. With `updated_since`, deleted departments too (`deleted: true`)."""
    repository = DepartmentRepository(session)
    statement = repository.live() if syncing(params) is None else repository.every()
    order = list_order(session, Department, params)
    page = list_page(session, statement.where(*order.conditions), order.keyset, params)
    records = present(repository, actor, page.items)
    if isinstance(params, CursorParams):
        deleted = {department.id for department in page.items if department.deleted_at is not None}
        records = [
            DepartmentChange(**record.model_dump(), deleted=record.id in deleted) for record in records
        ]
    return records, page


def get_department(session: Session, actor: Actor, department_id: str) -> DepartmentOut:
    repository = DepartmentRepository(session)
    return present(repository, actor, [_live(repository, department_id)])[0]


def _live(repository: DepartmentRepository, department_id: str, for_update: bool = False) -> Department:
    department = repository.find_live(department_id, for_update=for_update)
    if department is None:
        raise NotFound.record("Department")
    return department


def create_department(session: Session, actor: Actor, body: DepartmentCreate) -> DepartmentOut:
    repository = DepartmentRepository(session)
    head = _head(session, body.head_id)
    members = _members(session, body.member_ids)
    if repository.name_taken(body.name):
        raise Conflict(name_taken(body.name))
    department = repository.add(Department(name=body.name, active_name=body.name.lower(), head=head))
    _flush_name(session, body.name)
    repository.add_members(department, members, utcnow())
    return _record(session, actor, EventType.DEPARTMENT_CREATED, present(repository, actor, [department])[0])


def update_department(
    session: Session, actor: Actor, department_id: str, body: DepartmentPatch
) -> DepartmentOut:
    repository = DepartmentRepository(session)
    _live(repository, department_id)  # an unknown department is 404 before anything else
    sent = body.model_fields_set
    if "name" in sent and body.name is None:
        raise ValidationFailed.field("name", "May not be null or empty.")
    if "member_ids" in sent and body.member_ids is None:
        raise ValidationFailed.field("member_ids", "Give the full list of members; [] removes them all.")
    # The employees named are held before the department is locked: an employee's delete holds
    # the employee, then the departments it changes, so both lock in that order and never deadlock.
    named_head = _head(session, body.head_id) if "head_id" in sent else None
    members = _members(session, body.member_ids) if body.member_ids is not None else None
    department = _live(repository, department_id, for_update=True)
    head = named_head if "head_id" in sent else department.head
    if body.name is not None and repository.name_taken(body.name, except_id=department.id):
        raise Conflict(name_taken(body.name))

    current: set[uuid.UUID] = set()
    if members is not None:
        current = {
            membership.user_id for membership in repository.memberships([department.id])[department.id]
        }
    joining = [user_id for user_id in members or () if user_id not in current]
    leaving = current - set(members) if members is not None else set()
    renamed = body.name is not None and body.name != department.name
    if not (renamed or head is not department.head or joining or leaving):
        return present(repository, actor, [department])[0]  # a PATCH that changes nothing writes nothing

    now = utcnow()
    if body.name is not None:
        department.name = body.name
        department.active_name = body.name.lower()
    department.head = head
    department.updated_at = now
    _flush_name(session, department.name)
    repository.end_memberships(department.id, now, leaving)
    repository.add_members(department, joining, now)
    session.flush()
    session.expire_all()  # memberships changed by bulk statements: read them afresh
    return _record(
        session, actor, EventType.DEPARTMENT_UPDATED, get_department(session, actor, str(department.id))
    )


def delete_department(session: Session, actor: Actor, department_id: str) -> DepartmentOut:
    """Soft delete; answers the department as it was just before, members included."""
    repository = DepartmentRepository(session)
    department = _live(repository, department_id, for_update=True)
    answer = present(repository, actor, [department])[0]
    now = utcnow()
    repository.end_memberships(department.id, now)
    department.deleted_at = now
    department.active_name = None
    session.flush()
    return _record(session, actor, EventType.DEPARTMENT_DELETED, answer)
