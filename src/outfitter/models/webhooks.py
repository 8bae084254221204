"""Outgoing webhooks: the endpoints a company registers, one delivery row per (event, endpoint)
written in the event's own transaction (an outbox), every attempt to send it, the leases by
which workers share the periodic jobs, and the workers' heartbeats."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Index, String, text
from sqlalchemy.orm import Mapped, mapped_column

from outfitter.db.base import (
    Base,
    CompanyOwned,
    IdMixin,
    TimestampMixin,
    company_key,
    company_reference,
    str_enum,
    utcnow,
)

PING_EVENT_TYPE = "ping"  # sent by POST .../ping; not an activity-log event (no `events` row)
# Sends in flight to one endpoint at once, as its company may set them (docs/webhooks.md): enough
# for a receiver that answers in tens of milliseconds to take hundreds a second, few enough for a
# small one; a worker never sends more than its own places (OUTFITTER_WORKER_CONCURRENCY, up to 64).
ENDPOINT_CONCURRENCY_DEFAULT = 16
ENDPOINT_CONCURRENCY_MAX = 64


class DeliveryStatus(StrEnum):
    PENDING = "pending"  # due at next_attempt_at (a worker may hold it: claimed_until)
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # the schedule ran out, the receiver answered 410, or the endpoint went away


class WebhookEndpoint(IdMixin, CompanyOwned, TimestampMixin, Base):
    __tablename__ = "webhook_endpoints"
    __table_args__ = (
        # The list's order, and the fan-out's "enabled endpoints of this company" (every write).
        Index("ix_webhook_endpoints_company_created", "company_id", "created_at", "id"),
        Index("ix_webhook_endpoints_company_enabled", "company_id", "enabled"),
        company_key("webhook_endpoints"),
    )

    url: Mapped[str] = mapped_column(String(2048))
    # Empty: every type.
    event_types: Mapped[list[str]] = mapped_column(JSON, default=list)
    description: Mapped[str | None] = mapped_column(String(500))
    enabled: Mapped[bool] = mapped_column(default=True)
    disabled_reason: Mapped[str | None] = mapped_column(String(300))
    # Kept in clear: signing needs the secret itself (HMAC), not a hash of it.
    secret: Mapped[str] = mapped_column(String(100))
    # After a rotation, the old secret also signs every delivery until it expires.
    previous_secret: Mapped[str | None] = mapped_column(String(100))
    previous_secret_expires_at: Mapped[datetime | None]
    # Start of the current run of failures (none since): 5 days of them disable the endpoint.
    failing_since: Mapped[datetime | None]
    # The most deliveries in flight to it at once (worker.scheduling).
    concurrency: Mapped[int] = mapped_column(
        default=ENDPOINT_CONCURRENCY_DEFAULT, server_default=text(str(ENDPOINT_CONCURRENCY_DEFAULT))
    )


class WebhookDelivery(IdMixin, CompanyOwned, Base):
    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        # SQLite's claim: pending ones whose time has come, oldest due first. PostgreSQL has it not
        # (migration 0014): its planner took it for the claim below, walking a backlog again.
        Index("ix_webhook_deliveries_status_due", "status", "next_attempt_at").ddl_if(dialect="sqlite"),
        # PostgreSQL's claim visits each endpoint with pending deliveries and takes its oldest due
        # ones (webhooks.dispatch): one endpoint's backlog is not walked to reach another's.
        Index(
            "ix_webhook_deliveries_pending_endpoint_due",
            "endpoint_id",
            "next_attempt_at",
            postgresql_where=text("status = 'pending'"),
        ).ddl_if(dialect="postgresql"),
        # The delivery log of one endpoint, newest first, optionally by status.
        Index("ix_webhook_deliveries_endpoint_created", "endpoint_id", "created_at", "id"),
        Index("ix_webhook_deliveries_endpoint_status_created", "endpoint_id", "status", "created_at"),
        company_key("webhook_deliveries"),
        *company_reference("webhook_deliveries", "endpoint_id", "webhook_endpoints", ondelete="CASCADE"),
    )

    endpoint_id: Mapped[uuid.UUID]
    # The event's id (`webhook-id`, the same on every attempt); no foreign key: a ping has no event.
    event_id: Mapped[uuid.UUID]
    event_type: Mapped[str] = mapped_column(String(64))
    # `{id, type, timestamp, data}`, as sent: the body is rebuilt byte for byte on every attempt.
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[DeliveryStatus] = mapped_column(
        str_enum(DeliveryStatus, 16), default=DeliveryStatus.PENDING
    )
    attempts: Mapped[int] = mapped_column(default=0)
    # The schedule counts from round_started_at (creation, or a manual retry), round_attempts in it.
    round_started_at: Mapped[datetime] = mapped_column(default=utcnow)
    round_attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(default=utcnow)
    # A worker's lease: while claimed_until is in the future no other worker takes it.
    claimed_by: Mapped[str | None] = mapped_column(String(100))
    claimed_until: Mapped[datetime | None]
    last_status_code: Mapped[int | None]
    last_error: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    delivered_at: Mapped[datetime | None]
    # The W3C trace of the request that caused it (its event's), sent as `traceparent` (core.tracing).
    trace_id: Mapped[str | None] = mapped_column(String(32))


class WebhookAttempt(IdMixin, CompanyOwned, Base):
    """One try at sending a delivery: what came back (or why nothing did) and how long it took."""

    __tablename__ = "webhook_attempts"
    __table_args__ = (
        Index("ix_webhook_attempts_delivery_attempted", "delivery_id", "attempted_at"),
        *company_reference("webhook_attempts", "delivery_id", "webhook_deliveries", ondelete="CASCADE"),
    )

    delivery_id: Mapped[uuid.UUID]
    attempted_at: Mapped[datetime] = mapped_column(default=utcnow)
    status_code: Mapped[int | None]
    error: Mapped[str | None] = mapped_column(String(500))
    duration_ms: Mapped[int]
    worker: Mapped[str] = mapped_column(String(100))


class WorkerJob(Base):
    """A periodic job (expire transactions, reconcile payments) and the lease of the worker running
    it: claiming is one conditional UPDATE, so of any number of workers one runs each round."""

    __tablename__ = "worker_jobs"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    next_run_at: Mapped[datetime] = mapped_column(default=utcnow)
    claimed_by: Mapped[str | None] = mapped_column(String(100))
    claimed_until: Mapped[datetime | None]
    last_finished_at: Mapped[datetime | None]


class WorkerHeartbeat(Base):
    """A running worker, as it last said (every few seconds: worker.status): `outfitter status` and
    /readyz count the workers whose beat is recent. Operator-level, of no company."""

    __tablename__ = "worker_heartbeats"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int]
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    beat_at: Mapped[datetime] = mapped_column(default=utcnow)
