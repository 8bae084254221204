"""Locations: a tree per company (sites, offices, warehouses, rooms) where devices are kept.

The tree is a materialized path: each location keeps `path`, the hex ids of its ancestors and its
own, each followed by `/` (`/<root>/<child>/`). Everything beneath a location is then one range of
one index, `path >= '/a/b/' AND path < '/a/b/~'` (every character of a path sorts before `~`),
on SQLite and PostgreSQL alike; PostgreSQL compares the column byte by byte (collation "C") so that
the range holds whatever the database's locale. A move of a subtree rewrites the paths of the
rows in that range in one UPDATE (docs/locations.md).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

from sqlalchemy import ForeignKey, Index, String, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from outfitter.db.base import (
    Base,
    ChangeTracked,
    CompanyOwned,
    IdMixin,
    company_key,
    company_reference,
    str_enum,
)
from outfitter.models.catalog import Country

MAX_DEPTH = 8  # a root is at depth 1: site > building > floor > room > cabinet, with room to spare
PATH_LENGTH = 1 + 33 * MAX_DEPTH  # 265
# Binary order on PostgreSQL (SQLite's default is binary already): the subtree range relies on it.
PATH_TYPE = String(PATH_LENGTH).with_variant(String(PATH_LENGTH, collation="C"), "postgresql")
BEYOND_PATH = "~"  # sorts after every character a path holds (hex digits and `/`)


class LocationKind(StrEnum):
    SITE = "Site"
    OFFICE = "Office"
    WAREHOUSE = "Warehouse"
    ROOM = "Room"
    OTHER = "Other"


def path_segment(location_id: uuid.UUID) -> str:
    return f"{location_id.hex}/"


def subtree_end(path: str) -> str:
    """The exclusive upper bound of the paths at and beneath `path`."""
    return path + BEYOND_PATH


def ancestor_ids(path: str) -> list[uuid.UUID]:
    """The ids a path names, the root first and the location itself last."""
    return [uuid.UUID(part) for part in path.strip("/").split("/") if part]


_DEFAULT_STORAGE = text("is_default_storage")


class Location(IdMixin, ChangeTracked, CompanyOwned, Base):
    __tablename__ = "locations"
    indexes_company_id = False  # every index is led by it
    __table_args__ = (
        # Names are unique among a parent's live children: `sibling_name` is the parent's id and
        # the lower-cased name while the location is not deleted (NULLs never clash).
        UniqueConstraint("company_id", "sibling_name"),
        company_key("locations"),
        *company_reference("locations", "parent_id", "locations"),
        *ChangeTracked.company_indexes("locations"),
        Index("ix_locations_company_path", "company_id", "path"),
        # At most one default storage location per company (docs/locations.md, "Storage").
        Index(
            "uq_locations_company_default_storage",
            "company_id",
            unique=True,
            postgresql_where=_DEFAULT_STORAGE,
            sqlite_where=_DEFAULT_STORAGE,
        ),
    )

    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[LocationKind] = mapped_column(str_enum(LocationKind, 20), default=LocationKind.OTHER)
    parent_id: Mapped[uuid.UUID | None]
    path: Mapped[str] = mapped_column(PATH_TYPE)
    depth: Mapped[int]
    address: Mapped[str | None] = mapped_column(String(500))
    country_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("countries.id"))
    is_default_storage: Mapped[bool] = mapped_column(default=False)
    sibling_name: Mapped[str | None] = mapped_column(String(250))
    deleted_at: Mapped[datetime | None]

    country: Mapped[Country | None] = relationship(lazy="raise")
