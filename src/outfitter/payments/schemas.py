"""Request and response shapes of the payment endpoints."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator, model_validator

from outfitter.core.schemas import DecimalNumber, DecimalString, Documented, OneOf, Schema, Timestamp
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
# What _check_redirect_url accepts, documented.
RedirectUrl = Annotated[
    str,
    Documented(format="uri", pattern="^[Hh][Tt][Tt][Pp][Ss]?://", minLength=10),
]


def _check_redirect_url(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not value.lower().startswith(("http://", "https://")) or len(value) < 10:
        raise ValueError("Give an absolute http:// or https:// URL.")
    return value


class PricingOrder(BaseModel):
    model_config = ConfigDict(extra="forbid")

    asset_pricing_id: str = Field(max_length=100)
    # Strict: true and "2" are not quantities (decisions 12).
    quantity: StrictInt = Field(default=1, ge=1, le=MAX_QUANTITY)


class InitiateRequest(BaseModel):
    """`orders` maps each employee id to what they get; a flat list of
    `{"employee_id", "asset_pricing_id", "quantity"}` is accepted too and read as that map."""

    model_config = ConfigDict(extra="forbid")

    payment_method: PaymentMethod
    employee_country_id: str = Field(max_length=100)
    redirect_url: RedirectUrl | None = Field(default=None, max_length=2000)
    orders: dict[str, Annotated[list[PricingOrder], Documented(minItems=1)]] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _flat_orders(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("orders"), list):
            return data
        rows = data["orders"]
        if not all(isinstance(row, dict) and isinstance(row.get("employee_id"), str) for row in rows):
            return data  # let the map validation name what is wrong
        grouped: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            item = {key: value for key, value in row.items() if key != "employee_id"}
            grouped.setdefault(row["employee_id"], []).append(item)
        return {**data, "orders": grouped}

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


class StorageInitiateRequest(BaseModel):
    """`orders` maps each employee id to the ids of the storage equipment they receive."""

    model_config = ConfigDict(extra="forbid")

    payment_method: PaymentMethod
    employee_country_id: str = Field(max_length=100)
    redirect_url: RedirectUrl | None = Field(default=None, max_length=2000)
    orders: dict[str, Annotated[list[str], Documented(minItems=1)]] = Field(min_length=1)

    @field_validator("orders", mode="before")
    @classmethod
    def _ids_from_objects(cls, value: Any) -> Any:
        # Also accept [{"equipment_id": "..."}] per employee.
        if isinstance(value, dict):
            return {
                key: [item.get("equipment_id") if isinstance(item, dict) else item for item in items]
                if isinstance(items, list)
                else items
                for key, items in value.items()
            }
        return value

    @field_validator("orders")
    @classmethod
    def _each_employee_gets_something(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for employee_id, items in value.items():
            if not items:
                raise ValueError(f"Employee {employee_id} receives nothing: give at least one equipment id.")
        return value

    _redirect = field_validator("redirect_url")(_check_redirect_url)


class OffboardDevice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    equipment_id: str = Field(max_length=100)
    destination: RetrievalDestination = RetrievalDestination.STORAGE


class OffboardInitiateRequest(BaseModel):
    """`orders` maps each employee id to the devices to collect from them: `{equipment_id,
    destination}` objects or plain equipment ids (destination `storage`). `country_id` is
    accepted for `employee_country_id`."""

    model_config = ConfigDict(extra="forbid")

    payment_method: PaymentMethod
    employee_country_id: str = Field(max_length=100)
    redirect_url: RedirectUrl | None = Field(default=None, max_length=2000)
    orders: dict[
        str, Annotated[list[OffboardDevice | Annotated[str, Field(max_length=100)]], Documented(minItems=1)]
    ] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _country_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and "country_id" in data and "employee_country_id" not in data:
            data = {("employee_country_id" if key == "country_id" else key): v for key, v in data.items()}
        return data

    @field_validator("orders")
    @classmethod
    def _each_employee_returns_something(
        cls, value: dict[str, list[OffboardDevice | str]]
    ) -> dict[str, list[OffboardDevice | str]]:
        for employee_id, items in value.items():
            if not items:
                raise ValueError(f"Employee {employee_id} returns nothing: give at least one equipment id.")
        return value

    def devices(self) -> list[tuple[str, int, OffboardDevice]]:
        """(employee key, position, device) of every device named, plain ids read as storage."""
        return [
            (key, index, item if isinstance(item, OffboardDevice) else OffboardDevice(equipment_id=item))
            for key, items in self.orders.items()
            for index, item in enumerate(items)
        ]

    _redirect = field_validator("redirect_url")(_check_redirect_url)


class _TransactionBase(Schema):
    tx_ref: str
    kind: TransactionKind
    payment_method: PaymentMethod
    currency: str
    status: TransactionStatus
    order_id: uuid.UUID | None = None
    created_at: Timestamp
    expires_at: Timestamp


class TransactionInitiatedOut(_TransactionBase):
    """The initiate answer: amounts as JSON numbers, with the checkout `link` (null for Credit)."""

    amount: DecimalNumber
    insurance: DecimalNumber
    gateway_fee: DecimalNumber
    onboarding_fee: DecimalNumber
    device_config_fee: DecimalNumber
    platform_fee: DecimalNumber
    retrieval_fee: DecimalNumber
    inspection_fee: DecimalNumber
    storage_fee: DecimalNumber
    total_amount: DecimalNumber
    link: str | None


class TransactionOut(_TransactionBase):
    """Verify and list answers: amounts as decimal strings, no link."""

    amount: DecimalString
    insurance: DecimalString
    gateway_fee: DecimalString
    onboarding_fee: DecimalString
    device_config_fee: DecimalString
    platform_fee: DecimalString
    retrieval_fee: DecimalString
    inspection_fee: DecimalString
    storage_fee: DecimalString
    total_amount: DecimalString


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
    price: DecimalString
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
    total_amount: DecimalString
    items: list[OrderItemOut]
    created_at: Timestamp
    updated_at: Timestamp


class WalletBalanceOut(Schema):
    currency: str
    balance: DecimalString
    updated_at: Timestamp


class WalletEntryOut(Schema):
    id: uuid.UUID
    currency: str
    kind: WalletEntryKind
    amount: DecimalString
    balance_after: DecimalString
    description: str
    transaction_id: uuid.UUID | None
    created_at: Timestamp


class WalletOut(Schema):
    balances: list[WalletBalanceOut]
    entries: list[WalletEntryOut]


class WebhookOut(Schema):
    # `received` is only the stored event's state while it is handled, never an answer.
    outcome: Annotated[
        WebhookOutcome, OneOf(*(outcome for outcome in WebhookOutcome if outcome != WebhookOutcome.RECEIVED))
    ]
