"""Every equipment query. The session is bound to the company and scopes each one (core.tenancy)."""

from __future__ import annotations

import collections
import functools
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Row,
    ScalarSelect,
    Select,
    String,
    Subquery,
    Text,
    bindparam,
    cast,
    func,
    or_,
    select,
    tuple_,
    type_coerce,
    union_all,
)
from sqlalchemy.orm import aliased

from outfitter.core.errors import NotFound
from outfitter.core.pagination import CursorParams, CursorResult, Keyset, PageParams, PageResult
from outfitter.core.reads import Read, ReadPlan, run_in_session
from outfitter.core.tenancy import CompanyRepository, company_rows, parse_uuid
from outfitter.models import (
    Country,
    Currency,
    Department,
    Employee,
    Equipment,
    EquipmentHistory,
    EquipmentReservation,
    EquipmentStatus,
    EquipmentType,
    MembershipStatus,
    Transaction,
    UserDepartment,
)

# The filter's value Laptop/Workstation matches all three.
LAPTOP_TYPES = [EquipmentType.LAPTOP_WORKSTATION, EquipmentType.LAPTOP, EquipmentType.WORKSTATION]


class EquipmentSort(StrEnum):
    """The list's `sort` values (`-` for descending); `-created_at` is the default."""

    CREATED_AT = "created_at"
    CREATED_AT_DESC = "-created_at"
    UPDATED_AT = "updated_at"
    UPDATED_AT_DESC = "-updated_at"
    NAME = "name"
    NAME_DESC = "-name"
    STATUS = "status"
    STATUS_DESC = "-status"

    @property
    def keyset(self) -> Keyset:
        """The order as a keyset: the sort column, then (for status) the newest, then the id."""
        columns = {
            "created_at": (Equipment.created_at, Equipment.id),
            "updated_at": (Equipment.updated_at, Equipment.id),
            "name": (Equipment.title, Equipment.id),
            "status": (Equipment.status, Equipment.created_at, Equipment.id),
        }[self.value.lstrip("-")]
        return Keyset(columns, descending=self.value.startswith("-"))


# `updated_since`: the changes oldest first, Archived ones included.
CHANGES = Keyset((Equipment.updated_at, Equipment.id), descending=False)


def search_pattern(text: str) -> str:
    """`q` as a LIKE pattern matching any part (its own % and _ taken literally)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


@dataclass(frozen=True)
class EquipmentFilters:
    """Already validated and resolved: folded memory/storage keys, a country id."""

    status: EquipmentStatus | None = None
    type: EquipmentType | None = None
    memory_key: str | None = None
    storage_key: str | None = None
    country_id: uuid.UUID | None = None
    serial_numbers: tuple[str, ...] = field(default_factory=tuple)
    search: str | None = None  # `q`: part of the serial number, title, or assignee's name or email
    updated_since: datetime | None = None  # every status, changed at or after this time...
    horizon: datetime | None = None  # ...and before this one (core.pagination.SYNC_HORIZON)

    def shape(self) -> tuple[object, ...]:
        """Which filters are given (not their values): the statements are built once per shape."""
        laptops = self.type == EquipmentType.LAPTOP_WORKSTATION
        return (
            self.status is not None,
            "laptops" if laptops else self.type is not None,
            self.memory_key is not None,
            self.storage_key is not None,
            self.country_id is not None,
            bool(self.serial_numbers),
            self.search is not None,
            self.updated_since is not None,
        )

    def parameters(self) -> dict[str, object]:
        values: dict[str, object] = {
            "status": self.status,
            "type": LAPTOP_TYPES if self.type == EquipmentType.LAPTOP_WORKSTATION else self.type,
            "memory_key": self.memory_key,
            "storage_key": self.storage_key,
            "country_id": self.country_id,
            "serial_numbers": list(self.serial_numbers) or None,
            "search": search_pattern(self.search) if self.search is not None else None,
            "updated_since": self.updated_since,
            "horizon": self.horizon,
        }
        return {name: value for name, value in values.items() if value is not None}


@functools.cache
def _conditions(shape: tuple[object, ...]) -> list[ColumnElement[bool]]:
    status, type_kind, memory, storage, country, serials, search, since = shape
    conditions: list[ColumnElement[bool]] = []
    if status:
        conditions.append(Equipment.status == bindparam("status"))
    elif not since:
        conditions.append(Equipment.status != EquipmentStatus.ARCHIVED)
    if type_kind == "laptops":
        conditions.append(Equipment.type.in_(bindparam("type", expanding=True)))
    elif type_kind:
        conditions.append(Equipment.type == bindparam("type"))
    if memory:
        conditions.append(Equipment.memory_key == bindparam("memory_key"))
    if storage:
        conditions.append(Equipment.storage_key == bindparam("storage_key"))
    if country:
        conditions.append(Equipment.country_id == bindparam("country_id"))
    if serials:
        conditions.append(Equipment.serial_number.in_(bindparam("serial_numbers", expanding=True)))
    if search:
        conditions.append(_search())
    if since:
        conditions.append(Equipment.updated_at >= bindparam("updated_since", type_=Equipment.updated_at.type))
        conditions.append(Equipment.updated_at < bindparam("horizon", type_=Equipment.updated_at.type))
    return conditions


_matching = aliased(Equipment)


def _search() -> ColumnElement[bool]:
    """`q`: the devices whose title or serial number contains it (trigram indexes on PostgreSQL),
    or whose assignee's name or email does. A union of the three, not an OR: PostgreSQL cannot
    combine an OR holding a subquery with the indexes (a scan of the company's every row)."""
    pattern: BindParameter[str] = bindparam("search", type_=String())

    def like(column: Any) -> ColumnElement[bool]:
        return column.ilike(pattern, escape="\\")  # type: ignore[no-any-return]

    assignees = select(Employee.id).where(
        or_(
            like(Employee.first_name),
            like(Employee.last_name),
            like(Employee.email),
            like(Employee.first_name + " " + Employee.last_name),
        )
    )
    matches = union_all(
        select(_matching.id).where(like(_matching.title)),
        select(_matching.id).where(like(_matching.serial_number)),
        select(_matching.id).where(_matching.assignee_id.in_(assignees)),
    )
    return Equipment.id.in_(matches)


# The hot reads select rows, not ORM objects: the answer's columns, joined, labelled as the
# presenters read them. Still ORM-enabled statements, so the session scopes them to the company.
_assignee_country = aliased(Country)
_BASE_COLUMNS = (
    Equipment.id,
    Equipment.title,
    Equipment.year,
    Equipment.make,
    Equipment.model,
    Equipment.state,
    Equipment.source,
    Equipment.purchase_date,
    Equipment.purchase_price,
    Equipment.type,
    Equipment.hash_code,
    Equipment.asset_order_id,
    Equipment.catalog,
    Equipment.image_url,
    Equipment.serial_number,
    Equipment.other_details,
    Equipment.specs,
    Equipment.description,
    Equipment.status,
    Equipment.country_id,
    Equipment.created_at,
    Equipment.updated_at,
    Currency.id.label("currency_id"),
    Currency.name.label("currency_name"),
    Currency.code.label("currency_code"),
    Currency.symbol.label("currency_symbol"),
    Currency.status.label("currency_status"),
    Currency.created_at.label("currency_created_at"),
    Currency.updated_at.label("currency_updated_at"),
    Country.name.label("country_name"),
    Country.code.label("country_code"),
    Employee.id.label("assignee_id"),
    Employee.first_name.label("assignee_first_name"),
    Employee.last_name.label("assignee_last_name"),
)
_DETAIL_COLUMNS = (
    Equipment.device_setup,
    Equipment.documents,
    Equipment.insurance_expires_at,
    Equipment.status_changed_at,
    Employee.email.label("assignee_email"),
    Employee.job_title.label("assignee_job_title"),
    Employee.level.label("assignee_level"),
    Employee.address.label("assignee_address"),
    Employee.employment_type.label("assignee_employment_type"),
    Employee.phone.label("assignee_phone"),
    _assignee_country.name.label("assignee_country"),
    _assignee_country.code.label("assignee_country_code"),
)


def _with_references(statement: Select[Any]) -> Select[Any]:
    return (
        statement.outerjoin(Currency, Currency.id == Equipment.currency_id)
        .outerjoin(Country, Country.id == Equipment.country_id)
        .outerjoin(Employee, Employee.id == Equipment.assignee_id)
    )


def _first_department_name(employee_id: Any = Equipment.assignee_id) -> ScalarSelect[str]:
    """The employee's (by default the assignee's) first active department, as a column of a row."""
    return (
        select(Department.name)
        .join(UserDepartment, UserDepartment.department_id == Department.id)
        .where(
            UserDepartment.user_id == employee_id,
            UserDepartment.status == MembershipStatus.ACTIVE,
            UserDepartment.deleted_at.is_(None),
            Department.deleted_at.is_(None),
        )
        .order_by(UserDepartment.created_at, UserDepartment.id)
        .limit(1)
        .correlate(employee_id.table)
        .scalar_subquery()
    )


def _detail_rows(condition: ColumnElement[bool]) -> Select[Any]:
    return (
        _with_references(
            select(*_BASE_COLUMNS, *_DETAIL_COLUMNS, _first_department_name().label("assignee_department"))
        )
        .outerjoin(_assignee_country, _assignee_country.id == Employee.country_id)
        .where(condition)
    )


# What a detail row says of its assignee, read for the employees themselves: the answers of devices
# a batch registers, rendered without reading the devices back.
_ASSIGNEES = (
    select(
        Employee.id,
        Employee.first_name.label("assignee_first_name"),
        Employee.last_name.label("assignee_last_name"),
        *(column for column in _DETAIL_COLUMNS if column.name.startswith("assignee_")),
        _first_department_name(Employee.id).label("assignee_department"),
    )
    .outerjoin(_assignee_country, _assignee_country.id == Employee.country_id)
    .where(Employee.id.in_(bindparam("employee_ids", expanding=True)))
)
# Built once: a constant statement keeps its compiled form and cache key between requests.
_DETAILS = _detail_rows(Equipment.id.in_(bindparam("equipment_ids", expanding=True)))
_HISTORY_COLUMNS = (
    EquipmentHistory.equipment_id,
    EquipmentHistory.id,
    EquipmentHistory.event_type,
    EquipmentHistory.event_date,
    EquipmentHistory.assignee_id,
    EquipmentHistory.assignee_name,
)
# One device and its full history in one round trip: its row once per entry, oldest first, the
# entry's columns as history_* (a device has a handful; a second statement cost more than them).
_DETAIL_ENTRY = ("id", "event_type", "event_date", "assignee_id", "assignee_name", "actor", "payload")
_DETAIL = (
    _detail_rows(Equipment.id == bindparam("equipment_id"))
    .add_columns(*(getattr(EquipmentHistory, name).label(f"history_{name}") for name in _DETAIL_ENTRY))
    .outerjoin(EquipmentHistory, EquipmentHistory.equipment_id == Equipment.id)
    .order_by(EquipmentHistory.event_date, EquipmentHistory.seq)
)
HistoryEntry = collections.namedtuple("HistoryEntry", _DETAIL_ENTRY)  # type: ignore[misc]


def _history(*columns: Any) -> Select[Any]:
    return (
        select(*_HISTORY_COLUMNS, *columns)
        .where(EquipmentHistory.equipment_id.in_(bindparam("equipment_ids", expanding=True)))
        .order_by(EquipmentHistory.equipment_id, EquipmentHistory.event_date, EquipmentHistory.seq)
    )


_BRIEF_HISTORY = _history()
_FULL_HISTORY = _history(EquipmentHistory.actor, EquipmentHistory.payload)


_UNFILTERED_COUNT = select(
    select(func.count()).select_from(Equipment).scalar_subquery()
    - select(func.count())
    .select_from(Equipment)
    .where(Equipment.status == EquipmentStatus.ARCHIVED)
    .scalar_subquery()
)


@functools.cache
def _count(shape: tuple[object, ...]) -> Select[Any]:
    return select(func.count()).select_from(Equipment).where(*_conditions(shape))


def _rows_of(ids: Subquery, keyset: Keyset) -> Select[Any]:
    """The rows of a page of ids (read by the index alone), with what they reference, in order."""
    order = [ids.c[column.key] for column in keyset.columns]
    return _with_references(select(*_BASE_COLUMNS).join(ids, ids.c.id == Equipment.id)).order_by(
        *(column.desc() if keyset.descending else column.asc() for column in order)
    )


@functools.cache
def _page(shape: tuple[object, ...], backwards: bool, sort: EquipmentSort) -> Select[Any]:
    """The page's ids by the index (in the sort's order, or the other way for a back-half page),
    then their rows with what they reference, in the sort's order."""
    keyset = sort.keyset
    descending = keyset.descending != backwards
    ids = (
        select(*keyset.columns)
        .where(*_conditions(shape))
        .order_by(*(column.desc() if descending else column.asc() for column in keyset.columns))
        .offset(bindparam("offset"))
        .limit(bindparam("limit"))
        .subquery()
    )
    return _rows_of(ids, keyset)


@functools.cache
def _cursor_page(shape: tuple[object, ...], sort: EquipmentSort | None, after: bool) -> Select[Any]:
    """A cursor page: the ids after the keyset by the index, then their rows, in order (the
    sort's, or the changes' when `sort` is None)."""
    keyset = CHANGES if sort is None else sort.keyset
    ids = select(*keyset.columns).where(*_conditions(shape))
    if after:
        ids = ids.where(keyset.after())
    return _rows_of(ids.order_by(*keyset.order_by()).limit(bindparam("limit")).subquery(), keyset)


_AFTER_CREATED = bindparam("after_created", type_=Equipment.created_at.type)
_AFTER_ID = bindparam("after_id", type_=Equipment.id.type)


# An export's row: the CSV's columns (equipment.export.COLUMNS) in its order, as near to their
# text as the database gives them (JSON as its stored text, a spec as its string, statuses as
# plain strings), so that writing a row is little more than escaping it.
_EXPORT_COLUMNS = (
    Equipment.id,
    Equipment.title,
    Equipment.year,
    Equipment.make,
    Equipment.model,
    type_coerce(Equipment.state, String),
    type_coerce(Equipment.source, String),
    Equipment.purchase_date,
    Equipment.purchase_price,
    Currency.code,
    Currency.name,
    Currency.symbol,
    Equipment.type,
    Equipment.hash_code,
    Equipment.asset_order_id,
    Equipment.image_url,
    Equipment.serial_number,
    cast(Equipment.other_details, Text),
    Equipment.specs["memory"].as_string(),
    Equipment.specs["storage"].as_string(),
    Equipment.specs["color"].as_string(),
    Equipment.description,
    type_coerce(Equipment.status, String),
    Country.name,
    Country.code,
    Employee.id.label("assignee_id"),
    Employee.first_name,
    Employee.last_name,
    cast(Equipment.catalog, Text),
    Equipment.created_at,
    Equipment.updated_at,
)


@functools.cache
def _chunk(shape: tuple[object, ...], after: bool) -> Select[Any]:
    """The list's rows in its order (newest first), from a keyset: after the row (created_at, id)."""
    statement = _with_references(select(*_EXPORT_COLUMNS)).where(*_conditions(shape))
    if after:
        # A row value, not an OR of comparisons: the index (company, created_at, id) seeks to it,
        # so a chunk deep in the list costs what the first does.
        statement = statement.where(
            tuple_(Equipment.created_at, Equipment.id) < tuple_(_AFTER_CREATED, _AFTER_ID)
        )
    return statement.order_by(Equipment.created_at.desc(), Equipment.id.desc()).limit(bindparam("limit"))


def cursor_rows(
    filters: EquipmentFilters, sort: EquipmentSort, params: CursorParams
) -> ReadPlan[CursorResult[Any]]:
    """A cursor page: one statement, no count; any depth costs what the first page does."""
    order = None if filters.updated_since is not None else sort
    keyset = CHANGES if order is None else order.keyset
    values = filters.parameters() | {"limit": params.limit + 1}
    if params.after is not None:
        values |= keyset.parameters(params.after)
    rows = yield Read(_cursor_page(filters.shape(), order, params.after is not None), values)
    return keyset.result(list(rows), params)


def page_rows(
    filters: EquipmentFilters, params: PageParams, sort: EquipmentSort = EquipmentSort.CREATED_AT_DESC
) -> ReadPlan[PageResult[Any]]:
    """One page, newest first, with its exact total: a count, then the page's rows.

    Unfiltered, the count is the company's rows minus its Archived ones: two index-only counts
    cheaper than one that must look at every status. Pages in the back half are read from the
    other end of the index (ascending, a short offset), so the last page costs what the first does.
    """
    shape, values = filters.shape(), filters.parameters()
    count = _UNFILTERED_COUNT if not values else _count(shape)
    total = (yield Read(count, values))[0][0] or 0
    start = params.offset
    end = min(start + params.per_page, total)
    if start >= end:
        return PageResult(items=[], total=total, params=params)
    backwards = start > total - end
    values |= {"offset": total - end if backwards else start, "limit": end - start}
    rows = yield Read(_page(shape, backwards, sort), values)
    return PageResult(items=list(rows), total=total, params=params)


def detail_row(equipment_id: uuid.UUID | str) -> ReadPlan[tuple[Any, list[Any]]]:
    """One device's row with everything the single-record answer shows, and its full history
    (oldest first): 404 for an unknown id or another company's."""
    parsed = parse_uuid(equipment_id)
    rows = (yield Read(_DETAIL, {"equipment_id": parsed})) if parsed else ()
    if not rows:
        raise NotFound.record(EquipmentRepository.label)
    history = [
        HistoryEntry(*(getattr(row, f"history_{name}") for name in _DETAIL_ENTRY))
        for row in rows
        if row.history_id is not None
    ]
    return rows[0], history


def history_rows(equipment_ids: list[Any], *, full: bool) -> ReadPlan[dict[Any, list[Any]]]:
    """Each device's history, oldest first; `full` adds the actor and payload."""
    entries: dict[Any, list[Any]] = {equipment_id: [] for equipment_id in equipment_ids}
    if equipment_ids:
        statement = _FULL_HISTORY if full else _BRIEF_HISTORY
        for entry in (yield Read(statement, {"equipment_ids": equipment_ids})):
            entries[entry.equipment_id].append(entry)
    return entries


class EquipmentRepository(CompanyRepository[Equipment]):
    model = Equipment
    label = "Equipment"

    def chunk(
        self, filters: EquipmentFilters, after: tuple[datetime, uuid.UUID] | None, limit: int
    ) -> Sequence[Row[Any]]:
        """Up to `limit` rows of the filtered list after the keyset `after`: an export's chunk, its
        columns those of the CSV file (see _EXPORT_COLUMNS)."""
        values = filters.parameters() | {"limit": limit}
        if after is not None:
            values |= {"after_created": after[0], "after_id": after[1]}
        return company_rows(self.session, _chunk(filters.shape(), after is not None), values)

    def details(self, equipment_ids: list[uuid.UUID]) -> dict[uuid.UUID, Row[Any]]:
        """Many devices' detail rows in one statement (bulk answers, the events of a batch), by id."""
        if not equipment_ids:
            return {}
        rows = company_rows(self.session, _DETAILS, {"equipment_ids": equipment_ids})
        return {row.id: row for row in rows}

    def assignee_fields(self, employee_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, Row[Any]]:
        """What a detail row holds of each of these employees as its assignee (`assignee_*`), by id."""
        if not employee_ids:
            return {}
        rows = company_rows(self.session, _ASSIGNEES, {"employee_ids": list(employee_ids)})
        return {row.id: row for row in rows}

    def history(self, equipment_ids: list[uuid.UUID], *, full: bool) -> dict[uuid.UUID, list[Row[Any]]]:
        return run_in_session(self.session, history_rows(equipment_ids, full=full))

    def serial_taken(self, serial_number: str, except_id: uuid.UUID | None = None) -> bool:
        statement = select(Equipment.id).where(Equipment.serial_number == serial_number)
        if except_id is not None:
            statement = statement.where(Equipment.id != except_id)
        return self.session.scalar(statement.limit(1)) is not None

    def employee(self, employee_id: uuid.UUID) -> Employee | None:
        """An employee of this company, or None (unknown or another company's)."""
        statement = select(Employee).where(Employee.id == employee_id)
        return self.session.scalars(statement).one_or_none()

    def serials_taken(self, serial_numbers: Collection[str]) -> set[str]:
        """Which of `serial_numbers` the company's devices already carry: one statement."""
        if not serial_numbers:
            return set()
        statement = select(Equipment.serial_number).where(Equipment.serial_number.in_(serial_numbers))
        return {serial for serial in self.session.scalars(statement) if serial is not None}

    def employees(self, employee_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, Employee]:
        """The company's employees among `employee_ids` (another company's are simply absent)."""
        if not employee_ids:
            return {}
        return {
            employee.id: employee
            for employee in self.session.scalars(select(Employee).where(Employee.id.in_(employee_ids)))
        }

    def for_move(self, equipment_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, Equipment]:
        """The company's devices among `equipment_ids`, locked for the move (FOR UPDATE on
        PostgreSQL; SQLite's BEGIN IMMEDIATE already serialises writers): one statement."""
        # In id order, as the initiates lock theirs, so a bulk move and an initiate queue, never deadlock.
        statement = (
            self.select().where(Equipment.id.in_(equipment_ids)).order_by(Equipment.id).with_for_update()
        )
        return {equipment.id: equipment for equipment in self.session.scalars(statement)}

    def reserving_transactions(self, equipment_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The tx_ref of the Pending transaction holding each of `equipment_ids` that one holds.
        Asked with the devices locked: an initiate reserves only under the same lock, so the answer
        cannot change before the move commits."""
        if not equipment_ids:
            return {}
        statement = (
            select(EquipmentReservation.equipment_id, Transaction.tx_ref)
            .join(Transaction, Transaction.id == EquipmentReservation.transaction_id)
            .where(EquipmentReservation.equipment_id.in_(equipment_ids))
        )
        return {equipment_id: tx_ref for equipment_id, tx_ref in self.session.execute(statement)}
