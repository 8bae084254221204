"""Webhook endpoint and delivery shapes, field for field as docs/webhooks.md lists them."""

from __future__ import annotations

import uuid
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StringConstraints

from outfitter.core.schemas import Documented, JsonWholeNumber, NotNull, Schema, Timestamp
from outfitter.models import (
    ENDPOINT_CONCURRENCY_DEFAULT,
    ENDPOINT_CONCURRENCY_MAX,
    DeliveryStatus,
    EventType,
)

Url = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=2048),
    Documented(format="uri", pattern=r"^[hH][tT][tT][pP][sS]?://[^/?#@\s]"),  # a host follows
    Field(description="https:// (http:// only where the operator allows it); not a private address"),
]
Description = Annotated[str, StringConstraints(strip_whitespace=True, max_length=500)]
Concurrency = Annotated[
    StrictInt,
    Field(
        ge=1,
        le=ENDPOINT_CONCURRENCY_MAX,
        description=(
            "The most deliveries sent to this endpoint at once "
            f"(1-{ENDPOINT_CONCURRENCY_MAX}; {ENDPOINT_CONCURRENCY_DEFAULT} unless set)"
        ),
    ),
    JsonWholeNumber,  # after the bounds, so that the document keeps them
]
EventTypes = Annotated[
    list[EventType],
    Field(max_length=len(EventType), description="The event types to send; empty: every type"),
]


class Body(BaseModel):
    """A request body: unknown fields are refused with 422 naming them."""

    model_config = ConfigDict(extra="forbid")


class WebhookEndpointCreate(Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "url": "https://hooks.example.com/outfitter",
                    "event_types": ["equipment.assigned", "order.created"],
                    "description": "Keeps our asset register in sync",
                }
            ]
        }
    )

    url: Url
    event_types: EventTypes = Field(default_factory=list)
    description: Description | None = None
    concurrency: Concurrency = ENDPOINT_CONCURRENCY_DEFAULT


class WebhookEndpointPatch(Body):
    model_config = ConfigDict(json_schema_extra={"examples": [{"enabled": False}, {"concurrency": 4}]})

    url: Annotated[Url | None, NotNull()] = None
    event_types: Annotated[EventTypes | None, NotNull()] = None
    description: Description | None = None
    enabled: Annotated[StrictBool | None, NotNull()] = None  # true or false only: never "yes", 0 or "true"
    concurrency: Annotated[Concurrency | None, NotNull()] = None


class WebhookEndpointOut(Schema):
    id: uuid.UUID
    url: str
    event_types: list[str]
    description: str | None
    enabled: bool
    disabled_reason: str | None
    concurrency: int = Field(description="The most deliveries sent to this endpoint at once")
    created_at: Timestamp
    updated_at: Timestamp


class WebhookEndpointWithSecret(WebhookEndpointOut):
    """The endpoint with its signing secret: in the answers to create and rotate-secret only."""

    secret: str = Field(description="`whsec_` + base64; verify each delivery's signature with it")


class WebhookDeliveryOut(Schema):
    id: uuid.UUID
    event_id: uuid.UUID
    event_type: str
    status: DeliveryStatus
    attempts: int
    last_status_code: int | None
    last_error: str | None
    next_attempt_at: Timestamp | None
    created_at: Timestamp
    delivered_at: Timestamp | None
