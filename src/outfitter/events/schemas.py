"""The activity log's shapes: an event as a client reads it."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import AliasChoices, Field

from outfitter.core.schemas import Money, Schema, Timestamp
from outfitter.models.console import ConsoleRole
from outfitter.models.events import EventType


class EventOut(Schema):
    """`data` is the subject as the API answered it after the change (before it, for `*.deleted`)."""

    id: uuid.UUID
    type: EventType
    subject_type: str
    subject_id: uuid.UUID
    actor: str | None
    created_at: Timestamp
    data: dict[str, Any]


class ConsoleUserOut(Schema):
    """The `data` of the `console_user.*` events: a console user as their company's admins see them.
    No API answers console users; no secret (password hash, TOTP secret, invite) is ever in it."""

    id: uuid.UUID
    email: str
    role: ConsoleRole
    status: Literal["invited", "active", "deactivated"]
    totp_enabled: bool
    created_at: Timestamp
    updated_at: Timestamp


class ConsoleSettingsOut(Schema):
    """The `data` of `console_settings.updated`: the company's console settings after the change."""

    require_totp: bool


class ApiTokenOut(Schema):
    """The `data` of the `api_token.*` events: a token as the console and `outfitter token list`
    show it. Never the token itself (shown once, at creation) nor its hash."""

    id: uuid.UUID
    name: str
    # Read from a token row (its `scope_list`) or given by name.
    scopes: list[str] = Field(validation_alias=AliasChoices("scope_list", "scopes"))
    created_at: Timestamp
    expires_at: Timestamp | None
    last_used_at: Timestamp | None
    revoked_at: Timestamp | None


class ScimSettingsOut(Schema):
    """The `data` of `scim_settings.updated`: the company's SCIM provisioning settings."""

    offboard_retrieval: bool
    default_country: str | None = Field(description="ISO 3166-1 alpha-2, or null: none")
    updated_at: Timestamp


class CompanyOut(Schema):
    """The `data` of the `company.*` events: the company as Outfitter's operators set it up.
    `suspended_at` is set while its tokens and console sessions are refused."""

    id: uuid.UUID
    name: str
    suspended_at: Timestamp | None
    created_at: Timestamp
    updated_at: Timestamp


class PaymentAnomalyOut(Schema):
    """The `data` of `payment_anomaly.resolved`: money a gateway took that no order accounts for,
    as `outfitter payments anomalies` lists it, now handled."""

    id: uuid.UUID
    tx_ref: str
    kind: str
    amount: Money
    currency_code: str
    gateway_reference: str
    created_at: Timestamp
    resolved_at: Timestamp | None
