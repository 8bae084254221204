"""The equipment repository: the service's writes and its reads of ORM objects and rows (devices
to move, locked; employees; serial numbers; reservations), and an export's chunks. The list and
detail reads are read plans in `reads.py`, the list's filters in `filters.py`; the names other
modules import from here (EquipmentFilters, EquipmentSort and the plans) stay importable here."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Insert,
    Row,
    Select,
    String,
    Table,
    Text,
    bindparam,
    cast,
    select,
    tuple_,
    type_coerce,
)

from outfitter.db.base import utc_text, uuid_text
from outfitter.db.bulk_rows import rows_holding
from outfitter.db.company_writes import company_insert, company_insert_statement, insert_unless_taken
from outfitter.db.reads import run_in_session
from outfitter.db.tenancy import CompanyRepository, company_rows
from outfitter.equipment import presenters
from outfitter.equipment.filters import EquipmentFilters, EquipmentSort, conditions
from outfitter.equipment.reads import (
    ASSIGNEES,
    DETAILS,
    LABEL,
    cursor_rows,
    detail_row,
    history_rows,
    page_rows,
    with_references,
)
from outfitter.models import (
    RETRIEVAL_STAGES_BEFORE_RECEIPT,
    Country,
    Currency,
    Employee,
    Equipment,
    EquipmentHistory,
    EquipmentReservation,
    EquipmentStatus,
    Order,
    OrderItem,
    OrderKind,
    OrderStatus,
    Transaction,
)
from outfitter.outbox import events_written_with, events_written_with_values, record_event_rows
from outfitter.people.repository import EmployeeRepository

__all__ = [
    "EquipmentFilters",
    "EquipmentRepository",
    "EquipmentSort",
    "cursor_rows",
    "detail_row",
    "history_rows",
    "page_rows",
]


_AFTER_CREATED = bindparam("after_created", type_=Equipment.created_at.type)
_AFTER_ID = bindparam("after_id", type_=Equipment.id.type)


# An export's row: the CSV's columns (equipment.export.COLUMNS) in its order, as near to their
# text as the database gives them (ids, times and JSON as text, a spec as its string, statuses as
# plain strings), so that writing a row is little more than escaping it.
_EXPORT_COLUMNS = (
    uuid_text(Equipment.id).label("id"),
    Equipment.title,
    Equipment.year,
    Equipment.make,
    Equipment.model,
    type_coerce(Equipment.state, String),
    type_coerce(Equipment.source, String),
    utc_text(Equipment.purchase_date),
    Equipment.purchase_price,
    Currency.code,
    Currency.name,
    Currency.symbol,
    Equipment.type,
    Equipment.hash_code,
    uuid_text(Equipment.asset_order_id),
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
    uuid_text(Equipment.location_id).label("location_id"),
    uuid_text(Equipment.home_location_id).label("home_location_id"),
    uuid_text(Employee.id).label("assignee_id"),
    Employee.first_name,
    Employee.last_name,
    cast(Equipment.catalog, Text),
    utc_text(Equipment.created_at).label("created_at"),
    utc_text(Equipment.updated_at),
)


@functools.cache
def _chunk(shape: tuple[object, ...], after: bool, sensitive: bool = False) -> Select[Any]:
    """The list's rows in its order (newest first), from a keyset: after the row (created_at, id).
    Then the custom fields' values, and the sensitive ones only when the export asks for them."""
    values = (Equipment.custom_fields, *([Equipment.sensitive_fields] if sensitive else []))
    statement = with_references(select(*_EXPORT_COLUMNS, *values)).where(*conditions(shape))
    if after:
        # A row value, not an OR of comparisons: the index (company, created_at, id) seeks to it,
        # so a chunk deep in the list costs what the first does.
        statement = statement.where(
            tuple_(Equipment.created_at, Equipment.id) < tuple_(_AFTER_CREATED, _AFTER_ID)
        )
    return statement.order_by(Equipment.created_at.desc(), Equipment.id.desc()).limit(bindparam("limit"))


_SERIAL_NUMBER = ("company_id", "serial_number")
# A history row's columns taken from the device the same statement writes, not from parameters.
_FROM_DEVICE = {"company_id": "company_id", "equipment_id": "id"}


@functools.cache
def _device_created(
    device_columns: tuple[str, ...],
    history_columns: tuple[str, ...],
    entries: int,
    event_columns: tuple[str, ...],
    events: int,
) -> Insert:
    """`WITH device AS (INSERT INTO equipment ... ON CONFLICT (company_id, serial_number) DO NOTHING
    RETURNING id, company_id) INSERT INTO equipment_history ... SELECT ... FROM device RETURNING id`,
    one INSERT ... SELECT per history row (all but the last as CTEs too), and the events with their
    deliveries as CTEs selected from `device` too (outbox.events_written_with); parameters
    named as the device's columns, `history_<n>_<column>` and the events'. No row back: the serial
    number is taken, and nothing was written."""
    equipment: Table = getattr(Equipment, "__table__")  # noqa: B009 (typed as a Table)
    history: Table = getattr(EquipmentHistory, "__table__")  # noqa: B009
    device = company_insert_statement(
        equipment, columns=device_columns, unique=_SERIAL_NUMBER, returning=("id", "company_id")
    ).cte("device")

    def entry(position: int) -> Select[Any]:
        return select(
            *(
                device.c[_FROM_DEVICE[name]]
                if name in _FROM_DEVICE
                else bindparam(f"history_{position}_{name}", type_=history.c[name].type)
                for name in history_columns
            )
        )

    ctes = [
        company_insert_statement(history, columns=history_columns, select=entry(position)).cte(
            f"entry_{position}"
        )
        for position in range(entries - 1)
    ] + [
        written.statement().cte(f"announced_{position}")
        for position, written in enumerate(events_written_with(device, event_columns, events))
    ]
    return company_insert_statement(
        history, columns=history_columns, select=entry(entries - 1), returning=("id",), ctes=ctes
    )


# Every place that takes a device's id answers an unknown one (or another company's) alike.
UNKNOWN_DEVICE = "Unknown equipment: give the id of one of your devices."


class EquipmentRepository(CompanyRepository[Equipment]):
    model = Equipment
    label = LABEL

    def chunk(
        self,
        filters: EquipmentFilters,
        after: tuple[datetime, uuid.UUID] | None,
        limit: int,
        *,
        sensitive: bool = False,
    ) -> Sequence[Row[Any]]:
        """Up to `limit` rows of the filtered list after the keyset `after`: an export's chunk, its
        columns those of the CSV file (see _EXPORT_COLUMNS)."""
        values = filters.parameters() | {"limit": limit}
        if after is not None:
            values |= {"after_created": after[0], "after_id": after[1]}
        return company_rows(self.session, _chunk(filters.shape(), after is not None, sensitive), values)

    def details(self, equipment_ids: list[uuid.UUID]) -> dict[uuid.UUID, Row[Any]]:
        """Many devices' detail rows in one statement (bulk answers, the events of a batch), by id."""
        if not equipment_ids:
            return {}
        rows = company_rows(self.session, DETAILS, {"equipment_ids": equipment_ids})
        return {row.id: row for row in rows}

    def answers(self, equipment_ids: list[uuid.UUID]) -> list[dict[str, Any]]:
        """Many devices as the single retrieve answers them, in the order given: two statements."""
        rows = self.details(equipment_ids)
        history = self.history(equipment_ids, full=True)
        return [presenters.detail(rows[device], history[device]) for device in equipment_ids]

    def assignee_fields(self, employee_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, Row[Any]]:
        """What a detail row holds of each of these employees as its assignee (`assignee_*`), by id."""
        if not employee_ids:
            return {}
        rows = company_rows(self.session, ASSIGNEES, {"employee_ids": list(employee_ids)})
        return {row.id: row for row in rows}

    def history(self, equipment_ids: list[uuid.UUID], *, full: bool) -> dict[uuid.UUID, list[Row[Any]]]:
        return run_in_session(self.session, history_rows(equipment_ids, full=full))

    def insert_unless_taken(self, device: dict[str, Any]) -> bool:
        """Insert a new device's row unless the company has its serial number already: whether it did."""
        return insert_unless_taken(self.session, Equipment, device, _SERIAL_NUMBER)

    def insert_created(
        self, device: dict[str, Any], history: Sequence[dict[str, Any]], events: Sequence[dict[str, Any]]
    ) -> bool:
        """Insert a new device's row, its history rows and its events (`outbox.event_rows`,
        with their deliveries) unless the company has its serial number already: whether it did.
        On PostgreSQL one statement, the device a CTE that its history and its events are selected
        from (so a taken serial number writes none of them); SQLite has no data-modifying CTE, so
        there the device's INSERT, then its history's, then its events'."""
        if self.session.get_bind().dialect.name != "postgresql":
            if not self.insert_unless_taken(device):
                return False
            company_insert(self.session, EquipmentHistory, history)
            record_event_rows(self.session, events)
            return True
        statement = _device_created(
            tuple(device), tuple(history[0]), len(history), tuple(events[0]) if events else (), len(events)
        )
        entries = {
            f"history_{position}_{name}": value
            for position, entry in enumerate(history)
            for name, value in entry.items()
            if name not in _FROM_DEVICE
        }
        values = {**device, **entries, **events_written_with_values(device["company_id"], events)}
        result = company_insert(self.session, statement, parameters=values)
        return result is not None and result.first() is not None

    def serial_holder(
        self, serial_number: str, except_id: uuid.UUID | None = None
    ) -> tuple[uuid.UUID, EquipmentStatus] | None:
        """The company's device (id, status) carrying `serial_number`, other than `except_id`."""
        statement = select(Equipment.id, Equipment.status).where(Equipment.serial_number == serial_number)
        if except_id is not None:
            statement = statement.where(Equipment.id != except_id)
        row = self.session.execute(statement.limit(1)).first()
        return (row.id, row.status) if row is not None else None

    def employee(self, employee_id: uuid.UUID) -> Employee | None:
        """An employee of this company to assign a device to, or None (unknown or another
        company's): held as `EmployeeRepository.referenced` holds it."""
        return self.employees({employee_id}).get(employee_id)

    def serial_holders(self, serial_numbers: Collection[str]) -> dict[str, tuple[uuid.UUID, EquipmentStatus]]:
        """The company's devices (id, status) carrying any of `serial_numbers`, by number."""
        rows = rows_holding(
            self.session, Equipment.serial_number, serial_numbers, Equipment.id, Equipment.status
        )
        return {serial: (row.id, row.status) for serial, row in rows.items()}

    def employees(self, employee_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, Employee]:
        """The company's employees among `employee_ids` (another company's are simply absent), to
        assign devices to: held as `EmployeeRepository.referenced` holds them."""
        return EmployeeRepository(self.session).referenced(employee_ids)

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

    def retrieving_orders(
        self, equipment_ids: Collection[uuid.UUID]
    ) -> dict[uuid.UUID, tuple[uuid.UUID, str]]:
        """The id and tx_ref of the retrieval in progress bringing back each of `equipment_ids` that
        one is bringing back (its item not yet received). A paid offboarding holds its devices as
        a Pending one does: a move would strand the order."""
        if not equipment_ids:
            return {}
        statement = (
            select(OrderItem.equipment_id, Order.id, Order.tx_ref)
            .join(Order, Order.id == OrderItem.order_id)
            .where(
                OrderItem.equipment_id.in_(equipment_ids),
                Order.kind == OrderKind.RETRIEVAL,
                Order.status == OrderStatus.IN_PROGRESS,
                OrderItem.stage.in_(RETRIEVAL_STAGES_BEFORE_RECEIPT),
            )
        )
        found: dict[uuid.UUID, tuple[uuid.UUID, str]] = {}
        for equipment_id, order_id, tx_ref in self.session.execute(statement):
            if equipment_id is not None:  # never, with the IN above
                found[equipment_id] = (order_id, tx_ref)
        return found
