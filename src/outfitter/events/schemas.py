"""The activity log's shapes: an event as a client reads it."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import Field

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


class CompanyOut(Schema):
    """The `data` of the `company.*` events: the company as Outfitter's operators set it up.
    `suspended_at` is set while its tokens and console sessions are refused."""

    id: uuid.UUID
    name: str
    suspended_at: Timestamp | None
    created_at: Timestamp
    updated_at: Timestamp


class ApiTokenOut(Schema):
    """The `data` of the `api_token.*` events: a token as `outfitter token list` shows it; never the
    token itself or its hash."""

    id: uuid.UUID
    name: str
    scopes: list[str] = Field(validation_alias="scope_list")
    expires_at: Timestamp | None
    revoked_at: Timestamp | None
    created_at: Timestamp


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
