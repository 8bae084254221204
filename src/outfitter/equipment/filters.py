"""The equipment list's filters and sort orders: what a list (and its export) compares, checked and
resolved by the service, and the WHERE conditions each combination of filters builds, once."""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    String,
    bindparam,
    or_,
    select,
    union_all,
)
from sqlalchemy.orm import aliased

from outfitter.customfields import filters as custom_filters
from outfitter.customfields.filters import CustomFilter
from outfitter.db.base import search_pattern, search_text
from outfitter.db.keyset import Keyset
from outfitter.locations.reads import in_subtree
from outfitter.models import (
    Employee,
    Equipment,
    EquipmentStatus,
    EquipmentType,
)
from outfitter.models.locations import subtree_end

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
    location_path: str | None = None  # at this location or beneath it (`location_id`)
    home_location_path: str | None = None  # home at this location or beneath it (`home_location_id`)
    updated_since: datetime | None = None  # every status, changed at or after this time...
    horizon: datetime | None = None  # ...and before this one (db.keyset.SYNC_HORIZON)
    custom: tuple[CustomFilter, ...] = ()  # `cf_<key>=...` (customfields.filters)

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
            tuple(custom.shape for custom in self.custom),
            self.location_path is not None,
            self.home_location_path is not None,
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
            **custom_filters.parameters(self.custom),
        }
        for name in ("location_path", "home_location_path"):
            path = getattr(self, name)
            if path is not None:
                values |= {name: path, f"{name}_end": subtree_end(path)}
        return {name: value for name, value in values.items() if value is not None}


@functools.cache
def conditions(shape: tuple[object, ...]) -> list[ColumnElement[bool]]:
    status, type_kind, memory, storage, country, serials, search, since, custom, location, home = shape
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
    conditions.extend(custom_filters.conditions(Equipment.custom_fields, custom))  # type: ignore[arg-type]
    if location:
        conditions.append(in_subtree(Equipment.location_id, "location_path"))
    if home:
        conditions.append(in_subtree(Equipment.home_location_id, "home_location_path"))
    if since:
        conditions.append(Equipment.updated_at >= bindparam("updated_since", type_=Equipment.updated_at.type))
        conditions.append(Equipment.updated_at < bindparam("horizon", type_=Equipment.updated_at.type))
    return conditions


_matching = aliased(Equipment)


def _search() -> ColumnElement[bool]:
    """`q`: the devices whose title or serial number contains it, whatever the case (trigram indexes
    on PostgreSQL), or whose assignee's name or email does. A union of the three, not an OR:
    PostgreSQL cannot combine an OR holding a subquery with the indexes (a scan of the company's
    every row)."""
    pattern: BindParameter[str] = bindparam("search", type_=String())

    def like(column: Any) -> ColumnElement[bool]:
        return search_text(column, pattern)

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
