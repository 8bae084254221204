"""The equipment reads as read plans (db.reads): a page, a cursor page, one device's detail row,
histories. They select rows, not ORM objects, from statements built once (module constants, or
cached per shape of filters); still ORM-enabled statements, so the session (or db.reads) scopes
each one to the company."""

from __future__ import annotations

import collections
import functools
import uuid
from typing import Any

from sqlalchemy import (
    ColumnElement,
    ScalarSelect,
    Select,
    Subquery,
    bindparam,
    func,
    select,
)
from sqlalchemy.orm import aliased

from outfitter.core.errors import NotFound
from outfitter.db.keyset import CursorParams, CursorResult, Keyset, PageParams, PageResult
from outfitter.db.reads import Read, ReadPlan
from outfitter.db.tenancy import parse_uuid
from outfitter.equipment.filters import CHANGES, EquipmentFilters, EquipmentSort, conditions
from outfitter.models import (
    Country,
    Currency,
    Department,
    Employee,
    Equipment,
    EquipmentHistory,
    EquipmentStatus,
    MembershipStatus,
    UserDepartment,
)

LABEL = "Equipment"


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
    Equipment.custom_fields,
    Equipment.location_id,
    Equipment.home_location_id,
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


def with_references(statement: Select[Any]) -> Select[Any]:
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
        with_references(
            select(*_BASE_COLUMNS, *_DETAIL_COLUMNS, _first_department_name().label("assignee_department"))
        )
        .outerjoin(_assignee_country, _assignee_country.id == Employee.country_id)
        .where(condition)
    )


# What a detail row says of its assignee, read for the employees themselves: the answers of devices
# a batch registers, rendered without reading the devices back.
ASSIGNEES = (
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
DETAILS = _detail_rows(Equipment.id.in_(bindparam("equipment_ids", expanding=True)))
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
    return select(func.count()).select_from(Equipment).where(*conditions(shape))


@functools.cache
def _capped_count(shape: tuple[object, ...]) -> Select[Any]:
    rows = select(Equipment.id).where(*conditions(shape)).limit(bindparam("cap")).subquery()
    return select(func.count()).select_from(rows)


def capped_count(filters: EquipmentFilters, cap: int) -> ReadPlan[int]:
    """How many devices the filters match, counted up to `cap`: a scan that stops there, so a
    list's heading costs the same at 100 devices or a million."""
    rows = yield Read(_capped_count(filters.shape()), filters.parameters() | {"cap": cap})
    return int(rows[0][0] or 0)


def _rows_of(ids: Subquery, keyset: Keyset) -> Select[Any]:
    """The rows of a page of ids (read by the index alone), with what they reference, in order."""
    order = [ids.c[column.key] for column in keyset.columns]
    return with_references(select(*_BASE_COLUMNS).join(ids, ids.c.id == Equipment.id)).order_by(
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
        .where(*conditions(shape))
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
    ids = select(*keyset.columns).where(*conditions(shape))
    if after:
        ids = ids.where(keyset.after())
    return _rows_of(ids.order_by(*keyset.order_by()).limit(bindparam("limit")).subquery(), keyset)


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
        raise NotFound.record(LABEL)
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
