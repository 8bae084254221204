"""Every people query, scoped to the company by the session (db.tenancy); the related rows an employee or
department response shows are loaded for a whole page at once, one statement per kind."""

from __future__ import annotations

import functools
import uuid
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Insert, Select, Table, and_, distinct, func, or_, select, update
from sqlalchemy.orm import Session, contains_eager, joinedload
from sqlalchemy.orm.interfaces import ORMOption

from outfitter.catalog.reference import country_code_named
from outfitter.customfields.filters import CustomFilter, carried
from outfitter.db.base import new_id, search_pattern, search_text
from outfitter.db.bulk_rows import values_taken
from outfitter.db.company_writes import company_insert, company_insert_statement, insert_unless_taken
from outfitter.db.tenancy import CompanyRepository, parse_uuid
from outfitter.models import (
    EMPLOYEE_OFFBOARDED,
    RETRIEVAL_STAGES_BEFORE_RECEIPT,
    Country,
    Currency,
    Department,
    Employee,
    Equipment,
    EquipmentStatus,
    MembershipStatus,
    Order,
    OrderItem,
    OrderKind,
    OrderStatus,
    UserDepartment,
)
from outfitter.outbox import events_written_with, events_written_with_values, record_event_rows

_EMAIL = ("company_id", "email")


@functools.cache
def _employee_created(columns: tuple[str, ...], event_columns: tuple[str, ...], events: int) -> Insert:
    """`WITH employee AS (INSERT INTO employees ... ON CONFLICT (company_id, email) DO NOTHING
    RETURNING id, company_id), ... INSERT INTO events ... SELECT ... FROM employee RETURNING id`: the
    last event the statement, the other events and the deliveries its CTEs
    (outbox.events_written_with). No row back: the email is taken, and nothing was written."""
    employees: Table = getattr(Employee, "__table__")  # noqa: B009 (typed as a Table)
    employee = company_insert_statement(
        employees, columns=columns, unique=_EMAIL, returning=("id", "company_id")
    ).cte("employee")
    *announced, last, deliveries = events_written_with(employee, event_columns, events)
    ctes = [deliveries.statement().cte("deliveries")] + [
        written.statement().cte(f"announced_{position}") for position, written in enumerate(announced)
    ]
    return last.statement(returning=("id",), ctes=ctes)


# Every place that takes an employee's id answers an unknown one (or another company's) alike.
UNKNOWN_EMPLOYEE = "Unknown employee: give the id of one of your employees."


def offboarded(employee: Employee) -> str | None:
    """Why no device or order may go to `employee` any more, or None. One the identity provider
    deactivated (SCIM `active: false`: status Offboarded) has left: their devices are being taken
    back, and nothing new is bought, shipped or assigned to them until they are reactivated."""
    if employee.status != EMPLOYEE_OFFBOARDED:
        return None
    return (
        f"{employee.full_name} is offboarded (deactivated by your identity provider): reactivate "
        "them there first, or choose another employee."
    )


class EmployeeRepository(CompanyRepository[Employee]):
    model = Employee
    label = "Employee"

    def listing(
        self,
        country_id: uuid.UUID | None,
        department_id: uuid.UUID | None,
        search: str | None,
        custom: tuple[CustomFilter, ...] = (),
    ) -> Select[Employee]:
        statement = self.select(joinedload(Employee.country)).order_by(
            Employee.created_at.desc(), Employee.id.desc()
        )
        if country_id is not None:
            statement = statement.where(Employee.country_id == country_id)
        if department_id is not None:
            members = select(UserDepartment.user_id).where(
                UserDepartment.department_id == department_id,
                UserDepartment.deleted_at.is_(None),
            )
            statement = statement.where(Employee.id.in_(members))
        if search:
            pattern = search_pattern(search)
            columns = (Employee.first_name, Employee.last_name, Employee.email)
            statement = statement.where(or_(*(search_text(column, pattern) for column in columns)))
        if custom:
            statement = statement.where(*carried(Employee.custom_fields, custom))
        return statement

    def chunk(
        self, listing: Select[Employee], after: tuple[datetime, uuid.UUID] | None, limit: int
    ) -> list[Employee]:
        """Up to `limit` employees of `listing` (newest first) after the keyset `after`: an export's chunk."""
        if after is not None:
            created, last_id = after
            listing = listing.where(
                or_(
                    Employee.created_at < created, and_(Employee.created_at == created, Employee.id < last_id)
                )
            )
        return list(self.session.scalars(listing.limit(limit)).unique())

    def provisioned(self, record_id: uuid.UUID | str, *, for_update: bool = False) -> Employee | None:
        """An employee SCIM can see (not deleted through SCIM), with its country. `for_update`:
        locked and read afresh (it may have been read, unlocked, earlier in the request)."""
        parsed = parse_uuid(record_id)
        if parsed is None:
            return None
        statement = self.select(joinedload(Employee.country, innerjoin=True)).where(
            Employee.id == parsed, Employee.deprovisioned_at.is_(None)
        )
        if for_update:
            statement = statement.with_for_update(of=Employee).execution_options(populate_existing=True)
        return self.session.scalars(statement).one_or_none()

    def provisioned_listing(self) -> Select[Employee]:
        """The employees SCIM lists, in creation order, with their countries."""
        return (
            self.select(joinedload(Employee.country))
            .where(Employee.deprovisioned_at.is_(None))
            .order_by(Employee.created_at, Employee.id)
        )

    def provisioned_ids(self, ids: Collection[uuid.UUID]) -> set[uuid.UUID]:
        """Which of `ids` are employees SCIM can see: one statement."""
        if not ids:
            return set()
        statement = select(Employee.id).where(Employee.id.in_(ids), Employee.deprovisioned_at.is_(None))
        return set(self.session.scalars(statement))

    def identity_holders(self, condition: ColumnElement[bool], except_id: uuid.UUID | None) -> list[Any]:
        """Up to two employees (but `except_id`) meeting `condition`: id, user_name, deprovisioned_at."""
        statement = select(Employee.id, Employee.user_name, Employee.deprovisioned_at).where(condition)
        if except_id is not None:
            statement = statement.where(Employee.id != except_id)
        return list(self.session.execute(statement.limit(2)))

    def get_with_country(self, record_id: uuid.UUID | str, *, for_update: bool = False) -> Employee:
        """`for_update`: locked for a change or the delete, which then wait for one another (and a
        delete waits for every write that references the employee: `referenced`)."""
        return self.get(record_id, joinedload(Employee.country), for_update=for_update)

    def insert_unless_taken(self, row: dict[str, Any]) -> bool:
        """Insert one employee's row unless the company has its email already: whether it did."""
        return insert_unless_taken(self.session, Employee, row, _EMAIL)

    def insert_created(self, row: dict[str, Any], events: Sequence[dict[str, Any]]) -> bool:
        """Insert a new employee's row and its events (`outbox.event_rows`, with their
        deliveries) unless the company has its email already: whether it did. On PostgreSQL one
        statement, the employee a CTE that the events are selected from (a taken email writes
        none); SQLite has no data-modifying CTE, so there the employee's INSERT, then its events'."""
        if self.session.get_bind().dialect.name != "postgresql":
            if not self.insert_unless_taken(row):
                return False
            record_event_rows(self.session, events)
            return True
        statement = _employee_created(tuple(row), tuple(events[0]), len(events))
        values = {**row, **events_written_with_values(row["company_id"], events)}
        result = company_insert(self.session, statement, parameters=values)
        return result is not None and result.first() is not None

    def existing_emails(self, emails: Collection[str]) -> set[str]:
        return values_taken(self.session, Employee.email, emails)

    def user_names_taken(self, emails: Collection[str]) -> set[str]:
        """Which of `emails` are another employee's SCIM userName (both are stored lower-cased)."""
        return values_taken(self.session, Employee.user_name, emails)

    def insert_many(self, rows: list[dict[str, Any]]) -> None:
        """One write for the whole batch (a COPY on PostgreSQL), bound to the session's company."""
        company_insert(self.session, Employee, rows)

    def referenced(self, ids: Collection[uuid.UUID], *options: ORMOption) -> dict[uuid.UUID, Employee]:
        """The company's employees among `ids`, for a write that will reference them (an assignee,
        a head, a member): each row held FOR KEY SHARE, as the foreign key's own check holds it,
        but from the read on. A concurrent delete (`get_with_country(for_update=True)`) then either
        waits for this write and counts what it assigned (409), or has committed first, and the
        employee is unknown here (422) rather than a broken key at the write (500)."""
        if not ids:
            return {}
        statement = (
            self.select(*options)
            .where(Employee.id.in_(ids))
            .with_for_update(read=True, key_share=True, of=Employee)
        )
        return {record.id: record for record in self.session.scalars(statement)}

    def assigned_count(self, employee_id: uuid.UUID) -> int:
        return (
            self.session.scalar(
                select(func.count())
                .select_from(Equipment)
                .where(
                    Equipment.assignee_id == employee_id,
                    Equipment.status == EquipmentStatus.ASSIGNED,
                )
            )
            or 0
        )

    def departments_of(self, ids: Collection[uuid.UUID]) -> dict[uuid.UUID, list[Department]]:
        """Active memberships in live departments, per employee."""
        found: dict[uuid.UUID, list[Department]] = defaultdict(list)
        if not ids:
            return found
        rows = self.session.execute(
            select(UserDepartment.user_id, Department)
            .join(Department, Department.id == UserDepartment.department_id)
            .where(
                UserDepartment.user_id.in_(ids),
                UserDepartment.deleted_at.is_(None),
                Department.deleted_at.is_(None),
            )
            .order_by(Department.name, Department.id)
        )
        for user_id, department in rows:
            found[user_id].append(department)
        return found

    def equipment_of(self, ids: Collection[uuid.UUID]) -> dict[uuid.UUID, list[Equipment]]:
        """The Assigned equipment each employee holds."""
        found: dict[uuid.UUID, list[Equipment]] = defaultdict(list)
        if not ids:
            return found
        records = self.session.scalars(
            select(Equipment)
            .where(
                Equipment.assignee_id.in_(ids),
                Equipment.status == EquipmentStatus.ASSIGNED,
            )
            .order_by(Equipment.created_at.desc(), Equipment.id.desc())
        )
        for record in records:
            assert record.assignee_id is not None
            found[record.assignee_id].append(record)
        return found

    def open_retrievals_of(self, ids: Collection[uuid.UUID]) -> dict[uuid.UUID, list[OrderItem]]:
        """Items of retrieval orders in progress whose device has not been received yet, per
        employee, oldest order first."""
        found: dict[uuid.UUID, list[OrderItem]] = defaultdict(list)
        if not ids:
            return found
        items = self.session.scalars(
            select(OrderItem)
            .join(Order, Order.id == OrderItem.order_id)
            .where(
                OrderItem.employee_id.in_(ids),
                Order.kind == OrderKind.RETRIEVAL,
                Order.status == OrderStatus.IN_PROGRESS,
                OrderItem.stage.in_(RETRIEVAL_STAGES_BEFORE_RECEIPT),
            )
            .order_by(Order.created_at, OrderItem.id)
        )
        for item in items:
            assert item.employee_id is not None
            found[item.employee_id].append(item)
        return found

    def orders_of(self, ids: Collection[uuid.UUID]) -> dict[uuid.UUID, list[tuple[Order, int]]]:
        """Orders with at least one item for the employee, newest first, with their currency's
        minor units."""
        found: dict[uuid.UUID, list[tuple[Order, int]]] = defaultdict(list)
        if not ids:
            return found
        pairs = (
            select(OrderItem.employee_id, OrderItem.order_id)
            .where(OrderItem.employee_id.in_(ids))
            .distinct()
            .subquery()
        )
        rows = self.session.execute(
            select(pairs.c.employee_id, Order, Currency.minor_units)
            .join(Order, Order.id == pairs.c.order_id)
            .join(Currency, Currency.code == Order.currency_code)
            .order_by(Order.created_at.desc(), Order.id.desc())
        )
        for employee_id, order, minor_units in rows:
            found[employee_id].append((order, minor_units))
        return found


class DepartmentRepository(CompanyRepository[Department]):
    model = Department
    label = "Department"

    def live(self) -> Select[Department]:
        """Deleted departments are invisible everywhere."""
        return self.select(joinedload(Department.head)).where(Department.deleted_at.is_(None))

    def every(self) -> Select[Department]:
        """Deleted ones too: only `updated_since` shows them (db.keyset)."""
        return self.select(joinedload(Department.head))

    def find_live(self, record_id: uuid.UUID | str, for_update: bool = False) -> Department | None:
        parsed = parse_uuid(record_id)
        if parsed is None:
            return None
        statement = self.live().where(Department.id == parsed)
        if for_update:
            # read afresh: the department may have been read, unlocked, earlier in the request
            statement = statement.with_for_update(of=Department).execution_options(populate_existing=True)
        return self.session.scalars(statement).unique().one_or_none()

    def name_taken(self, name: str, except_id: uuid.UUID | None = None) -> bool:
        statement = self.live().where(Department.active_name == name.lower())
        if except_id is not None:
            statement = statement.where(Department.id != except_id)
        return self.session.scalars(statement.limit(1)).first() is not None

    def external_id_holder(self, external_id: str, except_id: uuid.UUID | None) -> uuid.UUID | None:
        """The live department (but `except_id`) whose SCIM Group's externalId is `external_id`."""
        statement = select(Department.id).where(
            Department.external_id == external_id, Department.deleted_at.is_(None)
        )
        if except_id is not None:
            statement = statement.where(Department.id != except_id)
        return self.session.scalar(statement.limit(1))

    def live_listing(self) -> Select[Department]:
        """The live departments in creation order, nothing loaded with them (SCIM's Groups)."""
        return (
            self.select()
            .where(Department.deleted_at.is_(None))
            .order_by(Department.created_at, Department.id)
        )

    def provisioned_members_of(
        self, department_ids: Collection[uuid.UUID]
    ) -> dict[uuid.UUID, list[uuid.UUID]]:
        """The active members SCIM can see, per department, in a stable order: one statement."""
        found: dict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
        if not department_ids:
            return found
        rows = self.session.execute(
            select(UserDepartment.department_id, UserDepartment.user_id)
            .join(Employee, Employee.id == UserDepartment.user_id)
            .where(
                UserDepartment.department_id.in_(department_ids),
                UserDepartment.deleted_at.is_(None),
                Employee.deprovisioned_at.is_(None),
            )
            .order_by(UserDepartment.created_at, UserDepartment.user_id)
        )
        for department_id, user_id in rows:
            found[department_id].append(user_id)
        return found

    def memberships(self, department_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, list[UserDepartment]]:
        """Active memberships per department, each with its employee loaded."""
        found: dict[uuid.UUID, list[UserDepartment]] = defaultdict(list)
        if not department_ids:
            return found
        records = self.session.scalars(
            select(UserDepartment)
            .join(UserDepartment.user)
            .where(
                UserDepartment.department_id.in_(department_ids),
                UserDepartment.deleted_at.is_(None),
            )
            .options(contains_eager(UserDepartment.user))
            .order_by(Employee.first_name, Employee.last_name, Employee.id)
        )
        for record in records:
            found[record.department_id].append(record)
        return found

    def asset_counts(self, department_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, int]:
        """Assigned equipment held by each department's active members."""
        if not department_ids:
            return {}
        rows = self.session.execute(
            select(UserDepartment.department_id, func.count(distinct(Equipment.id)))
            .join(Equipment, Equipment.assignee_id == UserDepartment.user_id)
            .where(
                UserDepartment.department_id.in_(department_ids),
                UserDepartment.deleted_at.is_(None),
                Equipment.status == EquipmentStatus.ASSIGNED,
            )
            .group_by(UserDepartment.department_id)
        )
        return {department_id: count for department_id, count in rows}

    def add_members(self, department: Department, user_ids: Iterable[uuid.UUID], now: datetime) -> None:
        rows = [
            {
                "id": new_id(),
                "user_id": user_id,
                "department_id": department.id,
                "status": MembershipStatus.ACTIVE,
                "created_at": now,
                "updated_at": now,
            }
            for user_id in user_ids
        ]
        company_insert(self.session, UserDepartment, rows)

    def end_memberships(
        self, department_id: uuid.UUID, now: datetime, user_ids: Collection[uuid.UUID] | None = None
    ) -> None:
        """End the active memberships of the department (of only `user_ids` when given)."""
        statement = (
            update(UserDepartment)
            .where(
                UserDepartment.department_id == department_id,
                UserDepartment.deleted_at.is_(None),
            )
            .values(deleted_at=now, updated_at=now, status=MembershipStatus.INACTIVE)
            .execution_options(synchronize_session=False)
        )
        if user_ids is not None:
            if not user_ids:
                return
            statement = statement.where(UserDepartment.user_id.in_(user_ids))
        self.session.execute(statement)

    def touch_departments_of(self, employee_id: uuid.UUID, now: datetime, *, headed: bool) -> None:
        """Move `updated_at` of the live departments the employee is a member of (and heads, when
        `headed`): their members (or head) change as the employee leaves, and a client that syncs
        with `updated_since` must see them again."""
        member_of = select(UserDepartment.department_id).where(
            UserDepartment.user_id == employee_id, UserDepartment.deleted_at.is_(None)
        )
        changed: ColumnElement[bool] = Department.id.in_(member_of)
        if headed:
            changed = or_(changed, Department.head_id == employee_id)
        self.session.execute(
            update(Department)
            .where(changed, Department.deleted_at.is_(None))
            .values(updated_at=now)
            .execution_options(synchronize_session=False)
        )


def counted_page(session: Session, statement: Select[Any], offset: int, limit: int) -> tuple[list[Any], int]:
    """The total of `statement`'s rows and up to `limit` of them after `offset` (none asked, or
    past the end: the total only)."""
    total = session.scalar(select(func.count()).select_from(statement.order_by(None).subquery())) or 0
    if limit == 0 or offset >= total:
        return [], total
    return list(session.scalars(statement.offset(offset).limit(limit)).unique()), total


def with_member(user_id: uuid.UUID | None) -> ColumnElement[bool]:
    """Departments with `user_id` among their active members (any member, for None)."""
    members = select(UserDepartment.department_id).where(UserDepartment.deleted_at.is_(None))
    if user_id is not None:
        members = members.where(UserDepartment.user_id == user_id)
    return Department.id.in_(members)


def countries_matching(session: Session, values: Iterable[str]) -> Sequence[Country]:
    """Every country any of `values` names (id, name or code, as `find_country` takes them): one
    statement."""
    ids: set[uuid.UUID] = set()
    names: set[str] = set()
    for value in values:
        parsed = parse_uuid(value)
        if parsed is not None:
            ids.add(parsed)
        else:
            names.add(value.strip().lower())
    if not ids and not names:
        return []
    conditions = []
    if ids:
        conditions.append(Country.id.in_(ids))
    if names:
        conditions.append(func.lower(Country.name).in_(names))
        conditions.append(Country.code.in_({country_code_named(name) for name in names}))
    return session.scalars(select(Country).where(or_(*conditions))).all()
