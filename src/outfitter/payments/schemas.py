"""Request and response shapes of the payment endpoints."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    StrictInt,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from outfitter.core.schemas import (
    WEB_URL,
    WEB_URL_PATTERN,
    Documented,
    DocumentedAs,
    Money,
    OneOf,
    Schema,
    Timestamp,
    UuidText,
)
from outfitter.models import (
    OrderKind,
    OrderStage,
    OrderStatus,
    PaymentMethod,
    RetrievalDestination,
    TransactionKind,
    TransactionStatus,
    WalletEntryKind,
    WebhookOutcome,
)

MAX_QUANTITY = 100
# What _check_redirect_url accepts, documented: an absolute http(s) URL with no space or control
# character (the payer is sent there: a CR/LF or a C1 control would reach the Location header).
RedirectUrl = Annotated[
    str,
    Documented(format="uri", pattern=WEB_URL_PATTERN, minLength=10),
]


def _check_redirect_url(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not value.lower().startswith(("http://", "https://")) or len(value) < 10:
        raise ValueError("Give an absolute http:// or https:// URL.")
    if not WEB_URL.fullmatch(value):
        raise ValueError(
            "The URL may not contain spaces or control characters: percent-encode them (a space is %20)."
        )
    return value


# The initiate answer's amounts: JSON numbers, as that answer has always given them and clients code
# against (verify and the lists give the same amounts as Money strings): the one exception to Money.
INITIATE_AMOUNT_SCHEMA: dict[str, Any] = {
    "type": "number",
    # The format generators that know it read as a decimal type (docs/api.md, "Money").
    "format": "decimal",
    "description": "The same decimal amount that verify and the lists give as a decimal string, given "
    "here as a JSON number, as the initiate answer always has (a fixed part of the API): parse it as a "
    "decimal, not a float (e.g. `json.loads(text, parse_float=Decimal)`); its digits are exact, at the "
    "currency's minor unit.",
    "examples": [1299.99],
}
InitiateAmount = Annotated[
    Decimal,
    PlainSerializer(float, return_type=float),
    WithJsonSchema(INITIATE_AMOUNT_SCHEMA, mode="serialization"),
]
# `orders` is keyed by employee id.
EMPLOYEE_KEYS = Documented(propertyNames={"format": "uuid"})


class PricingOrder(BaseModel):
    model_config = ConfigDict(extra="forbid")

    asset_pricing_id: UuidText = Field(max_length=100)
    # Strict: true and "2" are not quantities (docs/payments.md).
    quantity: StrictInt = Field(default=1, ge=1, le=MAX_QUANTITY)


class FlatPricingOrder(PricingOrder):
    """A line of the flat form of `orders` (documented; read as the map by employee)."""

    employee_id: UuidText


class StorageDevice(BaseModel):
    """A device of storage onboarding given as an object (documented; read as its id)."""

    model_config = ConfigDict(extra="forbid")

    equipment_id: UuidText


PricingOrdersByEmployee = Annotated[
    dict[str, Annotated[list[PricingOrder], Documented(minItems=1)]],
    EMPLOYEE_KEYS,
    Documented(minProperties=1),
]
# Both forms the service reads, so that schema-driven clients can send either.
PRICING_ORDERS = DocumentedAs(
    PricingOrdersByEmployee | Annotated[list[FlatPricingOrder], Documented(minItems=1)]
)
STORAGE_ORDERS = DocumentedAs(dict[str, Annotated[list[UuidText | StorageDevice], Documented(minItems=1)]])


class InitiateRequest(BaseModel):
    """`orders` maps each employee id to what they get; a flat list of
    `{"employee_id", "asset_pricing_id", "quantity"}` is accepted too and read as that map."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "payment_method": "Card",
                    "employee_country_id": "NG",
                    "redirect_url": "https://example.com/outfitter/paid",
                    "orders": {
                        "5b6c1f0e-8a2d-4c3b-9e1f-7a2b3c4d5e6f": [
                            {"asset_pricing_id": "4e5f6a7b-8c9d-4e0f-a1b2-c3d4e5f6a7b8", "quantity": 1}
                        ]
                    },
                }
            ]
        },
    )

    payment_method: PaymentMethod
    employee_country_id: str = Field(max_length=100)
    redirect_url: RedirectUrl | None = Field(default=None, max_length=2000)
    orders: Annotated[dict[str, list[PricingOrder]], PRICING_ORDERS] = Field(min_length=1)

    @field_validator("orders", mode="before")
    @classmethod
    def _flat_orders(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        grouped: dict[str, list[dict[str, Any]]] = {}
        for index, row in enumerate(value):
            if not isinstance(row, dict) or not isinstance(row.get("employee_id"), str):
                raise ValueError(
                    f"Line {index} of the list needs an employee_id: each line is "
                    '{"employee_id", "asset_pricing_id", "quantity"} (or give orders as a map of '
                    "employee ids to their lines)."
                )
            item = {key: cell for key, cell in row.items() if key != "employee_id"}
            grouped.setdefault(row["employee_id"], []).append(item)
        return grouped

    @field_validator("orders")
    @classmethod
    def _each_employee_orders_something(
        cls, value: dict[str, list[PricingOrder]]
    ) -> dict[str, list[PricingOrder]]:
        for employee_id, items in value.items():
            if not items:
                raise ValueError(
                    f"Employee {employee_id} orders nothing: give at least one asset_pricing_id."
                )
        return value

    _redirect = field_validator("redirect_url")(_check_redirect_url)


def _devices_as_objects(cls: Any, value: Any) -> Any:
    """A device named by its id alone is read as the object form (`{"equipment_id": id}`): each
    item is checked as one shape, its errors at its own path (`orders.<employee>.0.destination`)
    rather than once per form the item could have taken."""
    if not isinstance(value, dict):
        return value
    return {
        key: [item if isinstance(item, dict) else {"equipment_id": item} for item in items]
        if isinstance(items, list)
        else items
        for key, items in value.items()
    }


class StorageInitiateRequest(BaseModel):
    """`orders` maps each employee id to the ids of the storage equipment they receive."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "payment_method": "Credit",
                    "employee_country_id": "NG",
                    "orders": {
                        "5b6c1f0e-8a2d-4c3b-9e1f-7a2b3c4d5e6f": ["9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"]
                    },
                }
            ]
        },
    )

    payment_method: PaymentMethod
    employee_country_id: str = Field(max_length=100)
    redirect_url: RedirectUrl | None = Field(default=None, max_length=2000)
    orders: Annotated[
        dict[str, list[StorageDevice]], STORAGE_ORDERS, EMPLOYEE_KEYS, Documented(minProperties=1)
    ] = Field(min_length=1)

    _ids_as_objects = field_validator("orders", mode="before")(_devices_as_objects)

    @field_validator("orders")
    @classmethod
    def _each_employee_gets_something(
        cls, value: dict[str, list[StorageDevice]]
    ) -> dict[str, list[StorageDevice]]:
        for employee_id, items in value.items():
            if not items:
                raise ValueError(f"Employee {employee_id} receives nothing: give at least one equipment id.")
        return value

    _redirect = field_validator("redirect_url")(_check_redirect_url)

    def device_ids(self) -> dict[str, list[str]]:
        """The equipment ids each employee receives, by the key the request named them with."""
        return {key: [device.equipment_id for device in devices] for key, devices in self.orders.items()}


class OffboardDevice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    equipment_id: UuidText = Field(max_length=100)
    destination: RetrievalDestination = RetrievalDestination.STORAGE


class OffboardInitiateRequest(BaseModel):
    """`orders` maps each employee id to the devices to collect from them: `{equipment_id,
    destination}` objects or plain equipment ids (destination `storage`). `country_id` is
    accepted for `employee_country_id`."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "payment_method": "Card",
                    "employee_country_id": "NG",
                    "orders": {
                        "5b6c1f0e-8a2d-4c3b-9e1f-7a2b3c4d5e6f": [
                            {"equipment_id": "9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", "destination": "storage"}
                        ]
                    },
                }
            ]
        },
    )

    payment_method: PaymentMethod
    employee_country_id: str = Field(max_length=100)
    redirect_url: RedirectUrl | None = Field(default=None, max_length=2000)
    orders: Annotated[
        dict[str, list[OffboardDevice]],
        DocumentedAs(
            dict[
                str,
                Annotated[
                    list[OffboardDevice | Annotated[UuidText, Field(max_length=100)]], Documented(minItems=1)
                ],
            ]
        ),
        EMPLOYEE_KEYS,
        Documented(minProperties=1),
    ] = Field(min_length=1)

    _ids_as_objects = field_validator("orders", mode="before")(_devices_as_objects)

    @model_validator(mode="before")
    @classmethod
    def _country_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and "country_id" in data:
            if "employee_country_id" in data:
                raise ValueError("Give employee_country_id or country_id (the same field), not both.")
            data = {("employee_country_id" if key == "country_id" else key): v for key, v in data.items()}
        return data

    @field_validator("orders")
    @classmethod
    def _each_employee_returns_something(
        cls, value: dict[str, list[OffboardDevice]]
    ) -> dict[str, list[OffboardDevice]]:
        for employee_id, items in value.items():
            if not items:
                raise ValueError(f"Employee {employee_id} returns nothing: give at least one equipment id.")
        return value

    def devices(self) -> list[tuple[str, int, OffboardDevice]]:
        """(employee key, position, device) of every device named, plain ids read as storage."""
        return [(key, index, item) for key, items in self.orders.items() for index, item in enumerate(items)]

    _redirect = field_validator("redirect_url")(_check_redirect_url)


class OrderReceivedRequest(BaseModel):
    """Which items of a retrieval came back to the office; without `item_ids` (or with no body),
    every item coming back to the office that is not received yet."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"item_ids": ["3f2a1b0c-9d8e-4f7a-8b6c-5d4e3f2a1b0c"]}]},
    )

    item_ids: list[uuid.UUID] | None = Field(
        default=None, min_length=1, max_length=1000, description="Items of the order (its `items[].id`)"
    )


class _TransactionBase(Schema):
    tx_ref: str
    kind: TransactionKind
    payment_method: PaymentMethod
    currency: str
    status: TransactionStatus
    order_id: uuid.UUID | None = None
    created_at: Timestamp
    updated_at: Timestamp = Field(
        description="When the transaction last changed (its status): where an `updated_since` sync resumes"
    )
    expires_at: Timestamp


class TransactionOut(_TransactionBase):
    """Verify and list answers (amounts as decimal strings, as everywhere)."""

    amount: Money
    insurance: Money
    gateway_fee: Money
    onboarding_fee: Money
    device_config_fee: Money
    platform_fee: Money
    retrieval_fee: Money
    inspection_fee: Money
    storage_fee: Money
    total_amount: Money


class TransactionInitiatedOut(_TransactionBase):
    """The initiate answer: amounts as JSON numbers (`InitiateAmount`, the one exception to Money),
    with the checkout `link` (null for Credit)."""

    amount: InitiateAmount
    insurance: InitiateAmount
    gateway_fee: InitiateAmount
    onboarding_fee: InitiateAmount
    device_config_fee: InitiateAmount
    platform_fee: InitiateAmount
    retrieval_fee: InitiateAmount
    inspection_fee: InitiateAmount
    storage_fee: InitiateAmount
    total_amount: InitiateAmount
    link: str | None


class EmployeeRef(Schema):
    id: uuid.UUID | None
    name: str


class StageOut(Schema):
    stage: OrderStage
    at: Timestamp
    note: str | None


class OrderItemOut(Schema):
    id: uuid.UUID
    employee: EmployeeRef
    asset_spec_id: uuid.UUID | None
    asset_pricing_id: uuid.UUID | None
    price: Money
    equipment_id: uuid.UUID | None
    destination: RetrievalDestination | None  # retrieval items only
    stage: OrderStage
    stages: list[StageOut]  # oldest first; the last is `stage`


class OrderOut(Schema):
    id: uuid.UUID
    tx_ref: str
    kind: OrderKind
    status: OrderStatus
    payment_method: PaymentMethod
    country: str
    country_code: str
    currency: str
    total_amount: Money
    items: list[OrderItemOut]
    created_at: Timestamp
    updated_at: Timestamp


class WalletBalanceOut(Schema):
    currency: str
    balance: Money
    updated_at: Timestamp


class WalletEntryOut(Schema):
    id: uuid.UUID
    currency: str
    kind: WalletEntryKind
    amount: Money
    balance_after: Money
    description: str
    transaction_id: uuid.UUID | None
    tx_ref: str | None = Field(
        description="The reference of the transaction this entry paid (verify, lists and orders name it)"
    )
    created_at: Timestamp


class WalletOut(Schema):
    balances: list[WalletBalanceOut]
    entries: list[WalletEntryOut]


class WebhookOut(Schema):
    # `received` is only the stored event's state while it is handled, never an answer.
    outcome: Annotated[
        WebhookOutcome, OneOf(*(outcome for outcome in WebhookOutcome if outcome != WebhookOutcome.RECEIVED))
    ]
