"""Equipment request and response shapes, field for field as docs/equipment.md lists them."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    WithJsonSchema,
    field_validator,
)

from outfitter.core.money import MAX_AMOUNT
from outfitter.core.schemas import (
    NOT_BLANK,
    CursorPage,
    Documented,
    Money,
    NotNull,
    OneOf,
    Page,
    Schema,
    Timestamp,
    page_mode,
)
from outfitter.core.timestamps import as_utc
from outfitter.db.base import composed
from outfitter.models import (
    CurrencyStatus,
    EquipmentEvent,
    EquipmentSource,
    EquipmentState,
    EquipmentStatus,
    EquipmentType,
)

# The list's type filter: Laptop/Workstation stands for Laptop and Workstation too.
TypeFilter = Annotated[
    EquipmentType,
    OneOf(
        EquipmentType.LAPTOP_WORKSTATION,
        EquipmentType.PHONES,
        EquipmentType.ACCESSORIES,
        EquipmentType.TABLET,
    ),
]
# A device is registered Unassigned, In_Storage or Assigned; Sold and Archived are moves after that.
CreateStatus = Annotated[
    EquipmentStatus,
    OneOf(EquipmentStatus.UNASSIGNED, EquipmentStatus.IN_STORAGE, EquipmentStatus.ASSIGNED),
]

# What parse_price accepts: a decimal string (up to six decimal places), >= 0, below
# core.money.MAX_AMOUNT (10^12); never a JSON number, which a client's float may already have rounded.
PRICE_PATTERN = r"^\s*[0-9]{1,12}(\.[0-9]{1,6})?\s*$"  # ASCII digits only: no sign, exponent or "_"
PRICE_SCHEMA = WithJsonSchema(
    {
        "anyOf": [
            {"type": "string", "pattern": PRICE_PATTERN, "examples": ["1299.99"]},
            {"type": "null"},
        ]
    }
)
# An image's address: a web URL (a client shows it as an image or a link: no javascript:), or blank.
WEB_URL_OR_BLANK = Documented(pattern=r"^\s*$|^\s*[Hh][Tt][Tt][Pp][Ss]?://")

# --- responses -------------------------------------------------------------------------------


class EquipmentCurrencyOut(Schema):
    """The equipment's currency (catalog.schemas.CurrencyOut is the reference-data one)."""

    id: uuid.UUID
    name: str
    code: str
    symbol: str
    status: CurrencyStatus
    created_at: Timestamp
    updated_at: Timestamp


class SpecsOut(Schema):
    memory: str | None = None
    storage: str | None = None
    color: str | None = None


class AssigneeBrief(Schema):
    id: uuid.UUID
    name: str


class AssigneeOut(AssigneeBrief):
    email: str
    job_title: str | None
    department: str | None
    level: str | None
    country: str | None
    country_code: str | None
    address: str | None
    employment_type: str | None
    phone: str | None


class HistoryBrief(Schema):
    id: uuid.UUID
    event_type: EquipmentEvent
    event_date: Timestamp
    assignee: AssigneeBrief | None


class HistoryOut(HistoryBrief):
    equipment: str
    actor: str | None
    payload: dict[str, Any] | None


class EquipmentBase(Schema):
    id: uuid.UUID
    title: str
    year: str | None
    make: str | None
    model: str | None
    state: EquipmentState | None
    source: EquipmentSource
    purchase_date: Timestamp | None
    purchase_price: Money | None
    type: str | None
    hash_code: str | None
    asset_order_id: uuid.UUID | None
    catalog: dict[str, Any] | None
    currency: EquipmentCurrencyOut | None
    image_url: str | None
    serial_number: str | None
    other_details: str
    specs: SpecsOut
    description: str
    status: EquipmentStatus
    country: str | None
    country_code: str | None
    custom_fields: dict[str, Any] = Field(
        default_factory=dict,
        description="The company's custom fields (docs/custom-fields.md), sensitive ones left out",
    )
    location_id: uuid.UUID | None
    home_location_id: uuid.UUID | None
    created_at: Timestamp
    updated_at: Timestamp


class EquipmentListItem(EquipmentBase):
    assignee: AssigneeBrief | None
    history: list[HistoryBrief]


class EquipmentOut(EquipmentBase):
    """Single retrieve, create, patch and delete: the list fields and the extended ones."""

    assignee: AssigneeOut | None
    history: list[HistoryOut]
    device_setup: dict[str, Any] | None
    score: int
    missing_information: list[str]
    has_missing_information: bool
    insurance_expiring_in: str | None
    usage_duration: str
    storage_duration: str | None
    documents: list[dict[str, Any]]


class EquipmentPageEnvelope(Schema):
    """The equipment lists carry the counters inside `data` and beside `success` (docs/api.md, Pagination)."""

    success: bool = True
    message: str
    data: Page[EquipmentListItem]
    total: int
    per_page: int
    current_page: int
    last_page: int


class EquipmentCursorEnvelope(Schema):
    """In cursor mode likewise: `next_cursor` and `limit` inside `data` and beside `success`."""

    success: bool = True
    message: str
    data: CursorPage[EquipmentListItem]
    next_cursor: str | None
    limit: int


EquipmentListEnvelope = Annotated[
    Annotated[EquipmentPageEnvelope, Tag("page")] | Annotated[EquipmentCursorEnvelope, Tag("cursor")],
    Discriminator(page_mode),
]


# --- requests --------------------------------------------------------------------------------


def parse_purchase_date(value: object) -> datetime | None:
    """ISO 8601 (offset or Z), 'YYYY-MM-DD HH:MM:SS' or a plain date; no offset means UTC."""
    if value is None:
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        parsed = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(
                "Give an ISO 8601 time (2024-05-01T09:30:00Z), 'YYYY-MM-DD HH:MM:SS' or a date."
            ) from None
    else:
        raise ValueError("Give the purchase date as a string.")
    parsed = as_utc(parsed)
    if parsed > datetime.now(UTC):
        raise ValueError("A purchase date cannot be in the future.")
    return parsed


_PRICE = re.compile(PRICE_PATTERN)
_OUT_OF_RANGE = re.compile(r"-[0-9.]+|[0-9]{13,}(\.[0-9]*)?")
_TOO_PRECISE = re.compile(r"[0-9]+\.[0-9]{7,}")


def parse_price(value: object) -> Decimal | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("Give the price as a decimal string such as '1299.99', not a number.")
    text = value.strip()
    if _PRICE.fullmatch(value) is None:  # the pattern the OpenAPI document gives
        if _OUT_OF_RANGE.fullmatch(text):
            raise ValueError(f"The price must be 0 or more and below {MAX_AMOUNT:,}, written without a sign.")
        if _TOO_PRECISE.fullmatch(text):
            raise ValueError("The price has more than six decimal places.")
        raise ValueError(
            "Give the price as a decimal string of the digits 0-9 and at most one point, such as "
            "'1299.99' (no sign, exponent, separators or other scripts' digits)."
        )
    return Decimal(text)


class SpecsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory: str | None = Field(default=None, max_length=50)
    storage: str | None = Field(default=None, max_length=50)
    color: str | None = Field(default=None, max_length=50)


class EquipmentFields(BaseModel):
    """Fields a client may set on create and change with PATCH."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    make: str | None = Field(default=None, max_length=100)
    model: str | None = Field(default=None, max_length=200)
    year: str | None = Field(default=None, pattern=r"^[0-9]{4}$", examples=["2023"])  # ASCII digits only
    type: EquipmentType | None = None
    state: EquipmentState | None = None
    serial_number: str | None = Field(default=None, max_length=200)
    purchase_date: datetime | None = Field(default=None, description="Not in the future")
    purchase_price: Annotated[Decimal | None, PRICE_SCHEMA] = None
    currency: str | None = Field(default=None, max_length=3, description="ISO 4217 code")
    country: str | None = Field(default=None, max_length=100, description="Country id, name or code")
    specs: SpecsIn | None = None
    description: str | None = Field(default=None, max_length=4000)
    image_url: Annotated[str, WEB_URL_OR_BLANK] | None = Field(default=None, max_length=1000)
    other_details: list[str] | None = Field(default=None, max_length=100)
    assignee_id: uuid.UUID | None = None
    custom_fields: dict[str, Any] | None = Field(
        default=None,
        max_length=100,
        description="Values of the company's custom fields by key; a null clears one (docs/custom-fields.md)",
    )
    location_id: uuid.UUID | None = Field(
        default=None, description="Where the device is now (not while Assigned); docs/locations.md"
    )
    home_location_id: uuid.UUID | None = Field(default=None, description="Where the device belongs")

    @field_validator("purchase_date", mode="before")
    @classmethod
    def _purchase_date(cls, value: object) -> datetime | None:
        return parse_purchase_date(value)

    @field_validator("purchase_price", mode="before")
    @classmethod
    def _purchase_price(cls, value: object) -> Decimal | None:
        return parse_price(value)

    @field_validator("serial_number", "make", "model", "image_url", "currency", "country")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value or None

    @field_validator("image_url")
    @classmethod
    def _web_url(cls, value: str | None) -> str | None:
        if value is not None and not value.lower().startswith(("http://", "https://")):
            raise ValueError("Give an http:// or https:// URL (or leave it out).")
        return value


class EquipmentCreate(EquipmentFields):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "title": "MacBook Pro 14",
                    "make": "Apple",
                    "model": "MacBook Pro 14 M3",
                    "year": "2023",
                    "type": "Laptop",
                    "state": "Brand_New",
                    "serial_number": "C02XK0ABJGH5",
                    "purchase_date": "2024-05-01T09:30:00Z",
                    "purchase_price": "1299.99",
                    "currency": "USD",
                    "country": "NG",
                    "specs": {"memory": "16GB", "storage": "512GB"},
                    "status": "In_Storage",
                }
            ]
        }
    )

    title: Annotated[str, NOT_BLANK, AfterValidator(composed)] = Field(min_length=1, max_length=300)
    status: CreateStatus = EquipmentStatus.UNASSIGNED


class EquipmentPatch(EquipmentFields):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"status": "In_Storage", "description": "Back from repair, new battery"}]
        }
    )

    title: Annotated[Annotated[str, NOT_BLANK, AfterValidator(composed)] | None, NotNull()] = Field(
        default=None, min_length=1, max_length=300
    )
    status: EquipmentStatus | None = None


class EquipmentBulkCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "equipment": [
                        {"title": "MacBook Pro 14", "serial_number": "C02XK0ABJGH5"},
                        {"title": "iPhone 15", "type": "Phones", "status": "In_Storage"},
                    ]
                }
            ]
        },
    )

    equipment: list[EquipmentCreate] = Field(
        min_length=1,
        max_length=1000,
        description="Up to 1,000 devices, each the body of POST /client/equipment",
    )


class EquipmentBulkMove(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "equipment_ids": [
                        "9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
                        "2a3b4c5d-6e7f-4a8b-9c0d-e1f2a3b4c5d6",
                    ],
                    "status": "In_Storage",
                }
            ]
        },
    )

    equipment_ids: list[uuid.UUID] = Field(
        min_length=1, max_length=1000, description="Up to 1,000 of the company's devices, each once"
    )
    status: EquipmentStatus
    assignee_id: uuid.UUID | None = Field(default=None, description="Required when status is Assigned")
    location_id: uuid.UUID | None = Field(
        default=None, description="Where the devices go (Unassigned or In_Storage only); docs/locations.md"
    )
