"""Employee rules: create, list, retrieve, patch and offboard. Bulk creation lives in `bulk.py`."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, aliased

from outfitter.catalog.reference import CountryRef, resolve_country, resolve_country_ref
from outfitter.core.errors import Conflict, ValidationFailed
from outfitter.core.money import round_money
from outfitter.customfields.filters import CustomFilter, parse_filters
from outfitter.customfields.records import FieldSet, field_set, value_errors
from outfitter.db.base import new_id, utcnow
from outfitter.db.clock import NO_HORIZON
from outfitter.db.keyset import (
    CursorParams,
    CursorResult,
    Keyset,
    ListOrder,
    ListParams,
    ListResult,
    list_order,
    list_page,
    merge_pages,
)
from outfitter.db.tenancy import company_of
from outfitter.models import (
    EMPLOYEE_ACTIVE,
    Country,
    CustomFieldEntity,
    Department,
    Employee,
    Equipment,
    Order,
    OrderItem,
)
from outfitter.models.events import Event, EventType
from outfitter.outbox import NewEvent, as_event_data, event_rows, record_event
from outfitter.people.identities import SCIM_IDENTITY, email_taken, user_name_taken
from outfitter.people.repository import DepartmentRepository, EmployeeRepository
from outfitter.people.schemas import (
    REQUIRED_ON_PATCH,
    DepartmentBrief,
    EmployeeChange,
    EmployeeCreate,
    EmployeeOut,
    EmployeePatch,
    EquipmentBrief,
    OpenRetrieval,
    OrderBrief,
)
from outfitter.tenants.actor import Actor


def employee_out(
    employee: Employee | SimpleNamespace,
    country: Country | CountryRef,
    departments: Sequence[Department] = (),
    equipment: Sequence[Equipment] = (),
    orders: Sequence[tuple[Order, int]] = (),
    retrievals: Sequence[OrderItem] = (),
) -> EmployeeOut:
    return EmployeeOut(
        id=employee.id,
        first_name=employee.first_name,
        last_name=employee.last_name,
        email=employee.email,
        personal_email=employee.personal_email,
        phone=employee.phone,
        country=country.name,
        country_code=country.code,
        currency_code=country.currency_code,
        landmark=employee.landmark,
        last_login=employee.last_login,
        job_title=employee.job_title,
        tax_number=employee.tax_number,
        employment_type=employee.employment_type,
        level=employee.level,
        status=employee.status,
        address=employee.address,
        departments=[DepartmentBrief(id=item.id, name=item.name) for item in departments],
        catalogs=None,
        equipment=[EquipmentBrief.model_validate(item) for item in equipment],
        orders=[
            OrderBrief(
                id=order.id,
                tx_ref=order.tx_ref,
                status=order.status,
                total_amount=round_money(order.total_amount, minor_units),
                currency=order.currency_code,
                created_at=order.created_at,
            )
            for order, minor_units in orders
        ],
        open_retrievals=[
            OpenRetrieval(
                order_id=item.order_id,
                order_item_id=item.id,
                equipment_id=item.equipment_id,
                destination=item.destination,
                stage=item.stage,
            )
            for item in retrievals
        ],
        custom_fields=getattr(employee, "custom_fields", None) or {},
        created_at=employee.created_at,
        updated_at=employee.updated_at,
    )


def employee_fields(session: Session) -> FieldSet:
    """The company's employee fields (customfields): what `custom_fields` may hold."""
    return field_set(session, CustomFieldEntity.EMPLOYEE)


def present(repository: EmployeeRepository, employees: Sequence[Employee]) -> list[EmployeeOut]:
    """Employees with their departments, equipment, orders and open retrievals: four statements
    for any number."""
    ids = [employee.id for employee in employees]
    departments = repository.departments_of(ids)
    equipment = repository.equipment_of(ids)
    orders = repository.orders_of(ids)
    retrievals = repository.open_retrievals_of(ids)
    return [
        employee_out(
            employee,
            employee.country,
            departments.get(employee.id, []),
            equipment.get(employee.id, []),
            orders.get(employee.id, []),
            retrievals.get(employee.id, []),
        )
        for employee in employees
    ]


def record_employee_event(
    session: Session, type: EventType, employee: EmployeeOut, actor: str | None
) -> None:
    record_event(session, type, employee.id, as_event_data(EmployeeOut, employee), actor=actor)


def create_employee(session: Session, actor: Actor, body: EmployeeCreate) -> EmployeeOut:
    """One INSERT for the employee and its event (a unique index answers a taken email, another one
    an email that is another employee's SCIM userName: migration 0015), the country from the
    process's copy, and the answer (and the event's data) from the row to write."""
    country = resolve_country_ref(session, body.country_id, "country_id")
    values = employee_fields(session).check(body.custom_fields)
    if values.errors:
        raise ValidationFailed.fields(value_errors("custom_fields", values.errors))
    now = utcnow()
    row = {
        **body.model_dump(exclude={"country_id", "custom_fields"}),
        "custom_fields": values.public,
        "sensitive_fields": values.sensitive,
        "id": new_id(),
        "company_id": company_of(session),
        "country_id": country.id,
        "status": EMPLOYEE_ACTIVE,
        "created_at": now,
        "updated_at": now,
    }
    answer = employee_out(SimpleNamespace(**row, last_login=None, level=None), country)
    created = NewEvent(EventType.EMPLOYEE_CREATED, answer.id, as_event_data(EmployeeOut, answer))
    try:
        written = EmployeeRepository(session).insert_created(
            row, event_rows(session, [created], actor=actor.name)
        )
    except IntegrityError as error:
        if SCIM_IDENTITY not in str(error.orig):
            raise
        raise Conflict(user_name_taken(body.email)) from None
    if not written:
        raise Conflict(email_taken(body.email))
    return answer


@dataclass(frozen=True)
class EmployeeFilters:
    """The list's filters, checked and resolved to ids."""

    country_id: uuid.UUID | None = None
    department_id: uuid.UUID | None = None
    search: str | None = None
    custom: tuple[CustomFilter, ...] = ()  # `cf_<key>=...` (customfields.filters)


def resolve_filters(
    session: Session,
    country: str | None,
    department_id: str | None,
    search: str | None,
    custom: Mapping[str, str] | None = None,
) -> EmployeeFilters:
    """Query values as the list compares them: 422 naming query.country or query.department_id.
    An empty country is no filter, as the equipment lists read theirs (a form's empty select); an
    empty department id is a 422: `?department_id=$DEPT` with the variable unset must not export
    the whole company."""
    country_id = resolve_country(session, country, "query.country").id if country else None
    department: uuid.UUID | None = None
    if department_id == "":
        raise ValidationFailed.field(
            "query.department_id", "Give a department's id, or leave department_id out for every employee."
        )
    if department_id is not None:
        found = DepartmentRepository(session).find_live(department_id)
        if found is None:
            raise ValidationFailed.field("query.department_id", "Unknown department.")
        department = found.id
    custom_found = parse_filters(employee_fields(session), custom) if custom else ()
    return EmployeeFilters(country_id, department, (search or "").strip() or None, custom_found)


def list_employees(
    session: Session, params: ListParams, filters: EmployeeFilters
) -> tuple[list[EmployeeOut], ListResult[Any]]:
    """A page of either mode. With `updated_since`, the employees offboarded since then come in
    the same order as tombstones (their last state, `deleted: true`), whatever the filters."""
    repository = EmployeeRepository(session)
    statement = repository.listing(filters.country_id, filters.department_id, filters.search, filters.custom)
    order = list_order(session, Employee, params)
    page = list_page(session, statement.where(*order.conditions), order.keyset, params)
    if not isinstance(page, CursorResult) or not isinstance(params, CursorParams):
        return present(repository, page.items), page
    if params.updated_since is not None:
        live = (page.items, page.next_cursor is not None)
        page = merge_pages(order.keyset, params, live, _offboarded(session, params, order))
    presented = iter(present(repository, [item for item in page.items if isinstance(item, Employee)]))
    records: list[EmployeeOut] = [
        EmployeeChange(**next(presented).model_dump())
        if isinstance(item, Employee)
        # as it was when it left; it last changed then (the offboarding), where a sync resumes
        else EmployeeChange.model_validate({**item.data, "updated_at": item.updated_at, "deleted": True})
        for item in page.items
    ]
    return records, page


def _offboarded(session: Session, params: CursorParams, order: ListOrder) -> tuple[list[Any], bool]:
    """The employees deleted since `updated_since` (before the walk's horizon), after the cursor,
    as (updated_at, id, data): the last `employee.offboarded` event of each employee whose record
    is gone. One offboarded through SCIM keeps its record (status Offboarded), which the live
    rows report with `deleted: false`: no tombstone beside it."""
    keyset = Keyset((Event.created_at, Event.subject_id), descending=False)
    later = aliased(Event)
    statement = (
        select(Event.created_at.label("updated_at"), Event.subject_id.label("id"), Event.data)
        .where(
            Event.type == EventType.EMPLOYEE_OFFBOARDED,
            Event.created_at >= params.updated_since,
            Event.created_at < (order.horizon or NO_HORIZON),
            ~select(Employee.id).where(Employee.id == Event.subject_id).exists(),
            ~select(later.id)
            .where(
                later.subject_id == Event.subject_id,
                later.type == EventType.EMPLOYEE_OFFBOARDED,
                later.created_at > Event.created_at,
            )
            .exists(),
        )
        .order_by(*keyset.order_by())
        .limit(params.limit + 1)
    )
    values: dict[str, Any] = {}
    if params.after is not None:
        statement, values = statement.where(keyset.after()), keyset.parameters(params.after)
    rows = list(session.execute(statement, values).all())
    return rows[: params.limit], len(rows) > params.limit


def get_employee(session: Session, user_id: str) -> EmployeeOut:
    repository = EmployeeRepository(session)
    return present(repository, [repository.get_with_country(user_id)])[0]


def update_employee(session: Session, actor: Actor, user_id: str, body: EmployeePatch) -> EmployeeOut:
    repository = EmployeeRepository(session)
    employee = repository.get_with_country(user_id, for_update=True)  # a racing delete: 404
    changes = {name: getattr(body, name) for name in body.model_fields_set}
    if "custom_fields" in changes:
        current = (dict(employee.custom_fields or {}), dict(employee.sensitive_fields or {}))
        values = employee_fields(session).check(changes.pop("custom_fields"), current=current)
        if values.errors:
            raise ValidationFailed.fields(value_errors("custom_fields", values.errors))
        changes |= {"custom_fields": values.public, "sensitive_fields": values.sensitive}
    missing = {
        name: ["May not be null or empty."]
        for name in REQUIRED_ON_PATCH
        if name in changes and changes[name] is None
    }
    if missing:
        raise ValidationFailed.fields(missing)
    if "country" in changes:
        country = resolve_country(session, changes.pop("country"), "country")
        employee.country_id = country.id
        employee.country = country
    for name, value in changes.items():
        setattr(employee, name, value)
    changed = session.is_modified(employee)  # fields sent with the values they had change nothing
    session.flush()
    answer = present(repository, [employee])[0]
    if changed:
        record_employee_event(session, EventType.EMPLOYEE_UPDATED, answer, actor.name)
    return answer


def delete_employee(session: Session, actor: Actor, user_id: str) -> EmployeeOut:
    """Offboard: refused while the employee holds Assigned equipment; answers the record as it was."""
    repository = EmployeeRepository(session)
    employee = repository.get_with_country(user_id, for_update=True)
    held = repository.assigned_count(employee.id)
    if held:
        returning = repository.open_retrievals_of([employee.id]).get(employee.id, [])
        if returning:
            orders = sorted({str(item.order_id) for item in returning})
            raise Conflict(
                f"{employee.full_name} still holds {held} Assigned equipment, {len(returning)} of it on its "
                f"way back in the retrieval order {', '.join(orders)}: delete the employee once it is "
                f"received (POST /client/orders/{orders[0]}/received for devices coming back to the "
                "office)" + ("." if len(returning) == held else ", and unassign or move the rest.")
            )
        raise Conflict(
            f"{employee.full_name} still holds {held} Assigned equipment; "
            "unassign or move it before deleting the employee."
        )
    answer = present(repository, [employee])[0]
    # Their memberships go with them and a department they head keeps none (the keys' cascades)
    DepartmentRepository(session).touch_departments_of(employee.id, utcnow(), headed=True)
    session.delete(employee)
    session.flush()
    record_employee_event(session, EventType.EMPLOYEE_OFFBOARDED, answer, actor.name)
    return answer
