"""Location request and response shapes (docs/locations.md)."""

from __future__ import annotations

import uuid
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from outfitter.core.schemas import ONE_LINE, NotNull, Schema, Timestamp, UuidText
from outfitter.db.base import composed
from outfitter.models import EquipmentStatus, LocationKind

LocationName = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=200),
    ONE_LINE,
    AfterValidator(composed),
]
Address = Annotated[str, StringConstraints(strip_whitespace=True, max_length=500), AfterValidator(composed)]


class Body(BaseModel):
    """A request body: unknown fields are refused with 422 naming them."""

    model_config = ConfigDict(extra="forbid")


class LocationCreate(Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "Lagos office",
                    "kind": "Office",
                    "address": "1 Marina, Lagos",
                    "country": "NG",
                    "parent_id": None,
                }
            ]
        }
    )

    name: LocationName
    kind: LocationKind = LocationKind.OTHER
    parent_id: UuidText | None = Field(None, description="The parent location; none for a root")
    address: Address | None = None
    country: str | None = Field(None, max_length=100, description="Country id, name or two-letter code")
    is_default_storage: bool = Field(
        False, description="Where devices put in storage land when nothing else says (one per company)"
    )


class LocationPatch(Body):
    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "Lagos HQ", "parent_id": None}]})

    name: Annotated[LocationName | None, NotNull()] = None
    kind: Annotated[LocationKind | None, NotNull()] = None
    parent_id: UuidText | None = Field(
        None, description="Move the location (and everything beneath it) under another; null: a root"
    )
    address: Address | None = None
    country: str | None = Field(None, max_length=100, description="Country id, name or code; null clears")
    is_default_storage: Annotated[bool | None, NotNull()] = None


class StatusCounts(Schema):
    """Devices by status, and their total."""

    Assigned: int = 0
    Unassigned: int = 0
    Sold: int = 0
    In_Storage: int = 0
    Archived: int = 0
    total: int = 0


class DeviceCounts(Schema):
    here: StatusCounts = Field(description="Devices whose current location is this one")
    beneath: StatusCounts = Field(description="Devices here and at every location beneath it")


class LocationBrief(Schema):
    id: uuid.UUID
    name: str


class LocationOut(Schema):
    id: uuid.UUID
    name: str
    kind: LocationKind
    parent_id: uuid.UUID | None
    ancestors: list[LocationBrief] = Field(description="From the root down to the parent")
    depth: int = Field(description="1 for a root")
    address: str | None
    country: str | None
    country_code: str | None
    is_default_storage: bool
    device_counts: DeviceCounts
    created_at: Timestamp
    updated_at: Timestamp


class LocationChange(LocationOut):
    """A location in a cursor page: `deleted` marks one deleted (`updated_since` reports it)."""

    deleted: bool = False


class LocationNode(LocationOut):
    children: list[LocationNode] = Field(description="The locations directly inside it", examples=[[]])


def counts_of(by_status: dict[EquipmentStatus, int]) -> StatusCounts:
    return StatusCounts(
        **{status.value: count for status, count in by_status.items()}, total=sum(by_status.values())
    )
