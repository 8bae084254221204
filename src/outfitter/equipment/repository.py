"""Every equipment query. The session is bound to the company and scopes each one (core.tenancy)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import joinedload, selectinload
from sqlalchemy.orm.interfaces import ORMOption

from outfitter.core.pagination import PageParams, PageResult
from outfitter.core.tenancy import CompanyRepository
from outfitter.equipment.lifecycle import ARCHIVED
from outfitter.equipment.models import Equipment
from outfitter.people.models import MEMBERSHIP_ACTIVE, Department, Employee, UserDepartment

LAPTOP_TYPES = ("Laptop/Workstation", "Laptop", "Workstation")


@dataclass(frozen=True)
class EquipmentFilters:
    """Already validated and resolved: folded memory/storage keys, a country id."""

    status: str | None = None
    type: str | None = None
    memory_key: str | None = None
    storage_key: str | None = None
    country_id: uuid.UUID | None = None
    serial_numbers: tuple[str, ...] = field(default_factory=tuple)

    def conditions(self) -> list[ColumnElement[bool]]:
        conditions: list[ColumnElement[bool]] = [
            Equipment.status == self.status if self.status else Equipment.status != ARCHIVED
        ]
        if self.type == "Laptop/Workstation":
            conditions.append(Equipment.type.in_(LAPTOP_TYPES))
        elif self.type:
            conditions.append(Equipment.type == self.type)
        if self.memory_key:
            conditions.append(Equipment.memory_key == self.memory_key)
        if self.storage_key:
            conditions.append(Equipment.storage_key == self.storage_key)
        if self.country_id:
            conditions.append(Equipment.country_id == self.country_id)
        if self.serial_numbers:
            conditions.append(Equipment.serial_number.in_(self.serial_numbers))
        return conditions


def list_loaders() -> tuple[ORMOption, ...]:
    """What a list record shows, in a fixed number of statements: joins plus one history query."""
    return (
        joinedload(Equipment.assignee),
        joinedload(Equipment.currency),
        joinedload(Equipment.country),
        selectinload(Equipment.history),
    )


def detail_loaders() -> tuple[ORMOption, ...]:
    return (
        joinedload(Equipment.assignee).joinedload(Employee.country),
        joinedload(Equipment.currency),
        joinedload(Equipment.country),
        selectinload(Equipment.history),
    )


class EquipmentRepository(CompanyRepository[Equipment]):
    model = Equipment
    label = "Equipment"

    def page(self, filters: EquipmentFilters, params: PageParams) -> PageResult[Equipment]:
        """One page, newest first, with its exact total: a count, the page's ids, the rows, their history.

        The count and the ids read only index columns. Pages in the back half are read from the
        other end of the index (ascending, a short offset), so the last page costs what the first does.
        """
        conditions = filters.conditions()
        total = self.session.scalar(select(func.count()).select_from(Equipment).where(*conditions)) or 0
        start = params.offset
        end = min(start + params.per_page, total)
        if start >= end:
            return PageResult(items=[], total=total, params=params)
        ids_statement = select(Equipment.id).where(*conditions)
        if start > total - end:
            ids_statement = ids_statement.order_by(Equipment.created_at.asc(), Equipment.id.asc())
            ids = list(self.session.scalars(ids_statement.offset(total - end).limit(end - start)))[::-1]
        else:
            ids_statement = ids_statement.order_by(Equipment.created_at.desc(), Equipment.id.desc())
            ids = list(self.session.scalars(ids_statement.offset(start).limit(end - start)))
        rows = self.session.scalars(self.scoped(*list_loaders()).where(Equipment.id.in_(ids))).unique()
        by_id = {row.id: row for row in rows}
        return PageResult(items=[by_id[i] for i in ids if i in by_id], total=total, params=params)

    def detail(self, equipment_id: uuid.UUID | str, *, for_update: bool = False) -> Equipment:
        """One device with what the single-record answer shows (404 for unknown or another company's)."""
        equipment = self.get(equipment_id, for_update=for_update)
        return self.reload(equipment.id)

    def reload(self, equipment_id: uuid.UUID) -> Equipment:
        statement = (
            self.scoped(*detail_loaders())
            .where(Equipment.id == equipment_id)
            .execution_options(populate_existing=True)
        )
        return self.session.scalars(statement).unique().one()

    def serial_taken(self, serial_number: str, except_id: uuid.UUID | None = None) -> bool:
        statement = select(Equipment.id).where(Equipment.serial_number == serial_number)
        if except_id is not None:
            statement = statement.where(Equipment.id != except_id)
        return self.session.scalar(statement.limit(1)) is not None

    def employee(self, employee_id: uuid.UUID) -> Employee | None:
        """An employee of this company, or None (unknown or another company's)."""
        statement = select(Employee).where(Employee.id == employee_id)
        return self.session.scalars(statement).one_or_none()

    def first_department_name(self, employee_id: uuid.UUID) -> str | None:
        statement = (
            select(Department.name)
            .join(UserDepartment, UserDepartment.department_id == Department.id)
            .where(
                UserDepartment.user_id == employee_id,
                UserDepartment.status == MEMBERSHIP_ACTIVE,
                UserDepartment.deleted_at.is_(None),
                Department.deleted_at.is_(None),
            )
            .order_by(UserDepartment.created_at, UserDepartment.id)
            .limit(1)
        )
        return self.session.scalar(statement)
