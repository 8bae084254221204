"""Devices a company owns, and the history of everything that happened to each."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column, relationship, validates

from outfitter.db.base import (
    Base,
    ChangeTracked,
    CompanyOwned,
    IdMixin,
    company_key,
    company_reference,
    str_enum,
    trigram_index,
    utcnow,
)
from outfitter.models.catalog import Country, Currency
from outfitter.models.customfields import EMPTY_VALUES, CustomValues, custom_values_index
from outfitter.models.people import Employee


class EquipmentStatus(StrEnum):
    """Where a device is in its life; `equipment.lifecycle` holds the moves between them."""

    ASSIGNED = "Assigned"
    UNASSIGNED = "Unassigned"
    SOLD = "Sold"
    IN_STORAGE = "In_Storage"
    ARCHIVED = "Archived"


class EquipmentSource(StrEnum):
    EXTERNAL = "External"  # registered by the company
    PLATFORM = "Platform"  # bought through our catalog


class EquipmentState(StrEnum):
    """The device's condition."""

    BRAND_NEW = "Brand_New"
    USED = "Used"


class EquipmentType(StrEnum):
    """The types a device may have (or none). `Equipment.type` is a string column: a device bought
    from the catalog takes its category's type (payments.fulfilment.TYPE_FOR_CATEGORY), or none."""

    LAPTOP = "Laptop"
    WORKSTATION = "Workstation"
    LAPTOP_WORKSTATION = "Laptop/Workstation"  # as a list filter, also matches Laptop and Workstation
    PHONES = "Phones"
    ACCESSORIES = "Accessories"
    TABLET = "Tablet"


class EquipmentEvent(StrEnum):
    """What a history entry records: the device's registration, then each move of its status."""

    EQUIPMENT_ADDED = "equipment_added"
    ASSIGNED = "assigned"
    UNASSIGNED = "unassigned"
    MOVED_TO_STORAGE = "moved_to_storage"
    SOLD = "sold"
    ARCHIVED = "archived"
    MOVED = "moved"  # its location changed (payload: from and to)


def fold_spec(value: object) -> str | None:
    """'16 GB' -> '16gb': the form the memory and storage filters compare."""
    if value is None:
        return None
    folded = "".join(str(value).split()).lower()
    return folded[:50] or None


_FILTER_COLUMNS = ("type", "country_id", "memory_key", "storage_key")
_OTHER = {column: [other for other in _FILTER_COLUMNS if other != column] for column in _FILTER_COLUMNS}


def _set_only_index(column: str) -> Index:
    """An index of the rows where `column` is set: a lookup by value (`= x`, `IN`) can use it."""
    where = text(f"{column} IS NOT NULL")
    return Index(f"ix_equipment_{column}", column, postgresql_where=where, sqlite_where=where)


def _location_index(column: str) -> Index:
    where = text(f"{column} IS NOT NULL")
    return Index(
        f"ix_equipment_company_{column}",
        "company_id",
        column,
        "status",
        "created_at",
        "id",
        postgresql_where=where,
        sqlite_where=where,
    )


class Equipment(IdMixin, ChangeTracked, CompanyOwned, Base):
    __tablename__ = "equipment"
    __table_args__ = (
        UniqueConstraint("company_id", "serial_number"),
        company_key("equipment"),
        *company_reference("equipment", "assignee_id", "employees", ondelete="SET NULL"),
        *company_reference("equipment", "asset_order_id", "orders"),
        *company_reference("equipment", "location_id", "locations"),
        *company_reference("equipment", "home_location_id", "locations"),
        # The list sorts newest first within a company, usually filtered by status.
        Index("ix_equipment_company_status_created", "company_id", "status", "created_at", "id"),
        # The other sorts (`updated_at` also orders `updated_since`), and the search `q`.
        *ChangeTracked.company_indexes("equipment"),
        Index("ix_equipment_company_title", "company_id", "title", "id"),
        # A device's assignee and order, when it has them: most devices have neither, and an index
        # entry for each NULL would cost every insert and serve no lookup (migration 0011).
        *(_set_only_index(column) for column in ("assignee_id", "asset_order_id")),
        # A location's devices (and its subtree's: locations.repository), in the list's order, and
        # its counts by status: only devices at a location have an entry.
        _location_index("location_id"),
        _location_index("home_location_id"),
        trigram_index("equipment", "title"),
        custom_values_index("equipment"),
        trigram_index("equipment", "serial_number"),
        # One per filter, led by it and carrying the other filter columns: a count or an id page
        # with any mix of filters is an index-only scan of the narrowest one.
        Index(
            "ix_equipment_company_type", "company_id", "type", "status", "created_at", "id", *_OTHER["type"]
        ),
        Index(
            "ix_equipment_company_country",
            "company_id",
            "country_id",
            "status",
            "created_at",
            "id",
            *_OTHER["country_id"],
        ),
        Index(
            "ix_equipment_company_memory",
            "company_id",
            "memory_key",
            "status",
            "created_at",
            "id",
            *_OTHER["memory_key"],
        ),
        Index(
            "ix_equipment_company_storage",
            "company_id",
            "storage_key",
            "status",
            "created_at",
            "id",
            *_OTHER["storage_key"],
        ),
    )

    title: Mapped[str] = mapped_column(String(300))
    year: Mapped[str | None] = mapped_column(String(4))
    make: Mapped[str | None] = mapped_column(String(100))
    model: Mapped[str | None] = mapped_column(String(200))
    type: Mapped[str | None] = mapped_column(String(50))  # an EquipmentType, or a catalog category
    state: Mapped[EquipmentState | None] = mapped_column(str_enum(EquipmentState, 20))
    source: Mapped[EquipmentSource] = mapped_column(str_enum(EquipmentSource, 20))
    status: Mapped[EquipmentStatus] = mapped_column(str_enum(EquipmentStatus, 20))
    purchase_date: Mapped[datetime | None]
    purchase_price: Mapped[Decimal | None]
    currency_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("currencies.id"))
    country_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("countries.id"))
    assignee_id: Mapped[uuid.UUID | None]
    asset_order_id: Mapped[uuid.UUID | None]
    # Where the device is now (None while it is with an employee, or gone) and where it belongs.
    location_id: Mapped[uuid.UUID | None]
    home_location_id: Mapped[uuid.UUID | None]
    asset_spec_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("asset_specifications.id"))
    serial_number: Mapped[str | None] = mapped_column(String(200))
    hash_code: Mapped[str | None] = mapped_column(String(200))
    image_url: Mapped[str | None] = mapped_column(String(1000))
    description: Mapped[str] = mapped_column(String(4000), default="")
    other_details: Mapped[list[str]] = mapped_column(JSON, default=list)
    specs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # specs.memory / specs.storage folded (lower case, no spaces) so the filters can use an index.
    memory_key: Mapped[str | None] = mapped_column(String(50))
    storage_key: Mapped[str | None] = mapped_column(String(50))
    catalog: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    device_setup: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    documents: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    insurance_expires_at: Mapped[datetime | None]
    # The company's own fields (models.customfields): the sensitive ones apart, never in an answer.
    custom_fields: Mapped[dict[str, Any]] = mapped_column(
        CustomValues, default=dict, server_default=EMPTY_VALUES
    )
    sensitive_fields: Mapped[dict[str, Any]] = mapped_column(
        CustomValues, default=dict, server_default=EMPTY_VALUES
    )
    status_changed_at: Mapped[datetime] = mapped_column(default=utcnow)

    currency: Mapped[Currency | None] = relationship(lazy="raise")
    country: Mapped[Country | None] = relationship(lazy="raise")
    assignee: Mapped[Employee | None] = relationship(lazy="raise", foreign_keys="Equipment.assignee_id")
    history: Mapped[list[EquipmentHistory]] = relationship(
        back_populates="equipment",
        lazy="raise",
        foreign_keys="EquipmentHistory.equipment_id",
        order_by=lambda: [EquipmentHistory.event_date, EquipmentHistory.seq],
    )

    @validates("specs")
    def _fold_spec_keys(self, _key: str, specs: dict[str, Any] | None) -> dict[str, Any]:
        """Keep memory_key / storage_key in step with specs, whoever assigns them."""
        specs = dict(specs or {})
        self.memory_key = fold_spec(specs.get("memory"))
        self.storage_key = fold_spec(specs.get("storage"))
        return specs

    _history_written = 0  # not mapped: entries written through this object in this unit of work

    def next_history_seq(self) -> int:
        """Orders entries written in the same instant (equipment_added, then assigned)."""
        self._history_written += 1
        return self._history_written

    _moved = False  # not mapped: its location changed in this unit of work, no event for it yet

    def note_moved(self) -> None:
        self._moved = True

    def take_moved(self) -> bool:
        """Whether its location changed since last asked (an `equipment.moved` event is due)."""
        moved, self._moved = self._moved, False
        return moved


class EquipmentHistory(IdMixin, CompanyOwned, Base):
    __tablename__ = "equipment_history"
    __table_args__ = (
        Index("ix_equipment_history_equipment_date", "equipment_id", "event_date", "seq"),
        *company_reference("equipment_history", "equipment_id", "equipment", ondelete="CASCADE"),
        *company_reference("equipment_history", "assignee_id", "employees", ondelete="SET NULL"),
    )

    equipment_id: Mapped[uuid.UUID]
    event_type: Mapped[EquipmentEvent] = mapped_column(str_enum(EquipmentEvent, 50))
    event_date: Mapped[datetime] = mapped_column(default=utcnow)
    seq: Mapped[int] = mapped_column(default=0)  # orders events written in the same instant
    assignee_id: Mapped[uuid.UUID | None]
    assignee_name: Mapped[str | None] = mapped_column(String(200))  # kept if the employee is deleted
    actor: Mapped[str | None] = mapped_column(String(200))
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    equipment: Mapped[Equipment] = relationship(
        back_populates="history", lazy="raise", foreign_keys="EquipmentHistory.equipment_id"
    )
