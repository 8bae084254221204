"""The database side of sending: claim due deliveries, record each attempt's outcome, release what a
stopping worker did not send. Each is one short transaction of its own; the sending happens between
them (`sender.send`), with no transaction open.

Claiming: on PostgreSQL `SELECT ... FOR UPDATE SKIP LOCKED` picks due rows that no other worker is
claiming at that instant, and an UPDATE stamps a lease on them (`claimed_by`, `claimed_until`); the
row locks end with that transaction, the lease is what keeps the rows ours while we send. SQLite
has no SKIP LOCKED, but its writers queue at BEGIN IMMEDIATE (db.session), so the same two
statements run alone there. A worker that dies leaves its lease to expire, after which any worker
claims the delivery again: every delivery is sent at least once, and receivers deduplicate by
`webhook-id`.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from outfitter.config import Settings
from outfitter.core.tenancy import across_companies
from outfitter.db.base import utcnow
from outfitter.models import DeliveryStatus, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from outfitter.webhooks.sender import Outcome, Outgoing

FAILING_DAYS_BEFORE_DISABLING = 5


def claim_deliveries(
    sessions: sessionmaker[Session],
    worker: str,
    limit: int,
    settings: Settings,
    exclude_endpoints: Sequence[uuid.UUID] = (),
) -> list[Outgoing]:
    with across_companies(sessions()) as session, session.begin():
        now = utcnow()
        due = (
            select(WebhookDelivery.id)
            .join(WebhookEndpoint, WebhookEndpoint.id == WebhookDelivery.endpoint_id)
            .where(
                WebhookDelivery.status == DeliveryStatus.PENDING,
                WebhookDelivery.next_attempt_at <= now,
                or_(WebhookDelivery.claimed_until.is_(None), WebhookDelivery.claimed_until < now),
                WebhookEndpoint.enabled.is_(True),
            )
            .order_by(WebhookDelivery.next_attempt_at)
            .limit(limit)
            .with_for_update(of=WebhookDelivery, skip_locked=True)
        )
        if exclude_endpoints:
            due = due.where(WebhookDelivery.endpoint_id.not_in(exclude_endpoints))
        ids = list(session.scalars(due))
        if not ids:
            return []
        session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id.in_(ids))
            .values(claimed_by=worker, claimed_until=now + timedelta(seconds=settings.worker_lease_seconds))
            .execution_options(synchronize_session=False)
        )
        rows = session.execute(
            select(
                WebhookDelivery.id,
                WebhookDelivery.company_id,
                WebhookDelivery.endpoint_id,
                WebhookDelivery.event_id,
                WebhookDelivery.payload,
                WebhookEndpoint.url,
                WebhookEndpoint.secret,
                WebhookEndpoint.previous_secret,
                WebhookEndpoint.previous_secret_expires_at,
            )
            .join(WebhookEndpoint, WebhookEndpoint.id == WebhookDelivery.endpoint_id)
            .where(WebhookDelivery.id.in_(ids))
            .order_by(WebhookDelivery.next_attempt_at)
        ).all()
    return [
        Outgoing(
            delivery_id=row.id,
            company_id=row.company_id,
            endpoint_id=row.endpoint_id,
            url=row.url,
            event_id=row.event_id,
            payload=row.payload,
            secrets=signing_secrets(row.secret, row.previous_secret, row.previous_secret_expires_at, now),
        )
        for row in rows
    ]


def signing_secrets(
    secret: str, previous: str | None, previous_expires_at: datetime | None, now: datetime
) -> tuple[str, ...]:
    if previous and previous_expires_at and previous_expires_at > now:
        return (secret, previous)
    return (secret,)


def next_attempt(
    round_started_at: datetime, round_attempts: int, schedule: Sequence[float], now: datetime
) -> datetime | None:
    """When the next attempt of this round is due, with jitter (so that the retries of many
    deliveries that failed together spread out); None when the schedule has run out."""
    if round_attempts >= len(schedule):
        return None
    gap = schedule[round_attempts] - schedule[round_attempts - 1] if round_attempts else 0.0
    due = round_started_at + timedelta(seconds=schedule[round_attempts] + random.uniform(0, 0.1 * gap))
    return max(due, now)


def record_outcome(
    sessions: sessionmaker[Session], worker: str, outgoing: Outgoing, outcome: Outcome, settings: Settings
) -> None:
    with across_companies(sessions()) as session, session.begin():
        delivery = session.scalars(
            select(WebhookDelivery)
            .where(WebhookDelivery.id == outgoing.delivery_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        ).one_or_none()
        if delivery is None:
            return  # its endpoint was deleted meanwhile, and the delivery with it
        session.add(
            WebhookAttempt(
                company_id=delivery.company_id,
                delivery_id=delivery.id,
                attempted_at=outcome.attempted_at,
                status_code=outcome.status_code,
                error=outcome.error,
                duration_ms=outcome.duration_ms,
                worker=worker[:100],
            )
        )
        now = utcnow()
        delivery.attempts += 1
        delivery.last_status_code = outcome.status_code
        delivery.last_error = outcome.error
        if delivery.claimed_by == worker:
            delivery.claimed_by = None
            delivery.claimed_until = None
        if delivery.status != DeliveryStatus.PENDING:
            return  # another worker, whose claim followed an expired lease of ours, settled it
        if outcome.delivered:
            delivery.status = DeliveryStatus.SUCCEEDED
            delivery.delivered_at = now
            delivery.next_attempt_at = None
            _endpoint_succeeded(session, delivery.endpoint_id)
            return
        delivery.round_attempts += 1
        disabled = _endpoint_failed(session, delivery.endpoint_id, outcome, now)
        due = (
            None
            if disabled
            else next_attempt(
                delivery.round_started_at, delivery.round_attempts, settings.webhook_retry_schedule, now
            )
        )
        delivery.next_attempt_at = due
        if due is None:  # the schedule ran out, or the endpoint is disabled by this failure
            delivery.status = DeliveryStatus.FAILED


def _endpoint_succeeded(session: Session, endpoint_id: uuid.UUID) -> None:
    # Matches no row (and so locks none) unless the endpoint had been failing.
    session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.id == endpoint_id, WebhookEndpoint.failing_since.is_not(None))
        .values(failing_since=None)
        .execution_options(synchronize_session=False)
    )


def _endpoint_failed(session: Session, endpoint_id: uuid.UUID, outcome: Outcome, now: datetime) -> bool:
    """Note the failure on the endpoint; answers whether the endpoint is (now) disabled by it."""
    if outcome.gone:
        reason = f"The endpoint answered 410 Gone on {now:%Y-%m-%d %H:%M} UTC."
        _disable(session, endpoint_id, reason, WebhookEndpoint.enabled.is_(True))
        return True
    session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.id == endpoint_id, WebhookEndpoint.failing_since.is_(None))
        .values(failing_since=now)
        .execution_options(synchronize_session=False)
    )
    cutoff = now - timedelta(days=FAILING_DAYS_BEFORE_DISABLING)
    reason = (
        f"Every delivery failed for {FAILING_DAYS_BEFORE_DISABLING} days (disabled {now:%Y-%m-%d %H:%M} UTC)."
    )
    return _disable(
        session,
        endpoint_id,
        reason,
        WebhookEndpoint.enabled.is_(True),
        WebhookEndpoint.failing_since <= cutoff,
    )


def _disable(session: Session, endpoint_id: uuid.UUID, reason: str, *conditions: object) -> bool:
    result = session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.id == endpoint_id, *conditions)  # type: ignore[arg-type]
        .values(enabled=False, disabled_reason=reason, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    return bool(getattr(result, "rowcount", 0))


def release(sessions: sessionmaker[Session], worker: str, delivery_ids: Sequence[uuid.UUID]) -> None:
    """Give back claimed deliveries that will not be sent (a stopping worker): due again at once."""
    if not delivery_ids:
        return
    with across_companies(sessions()) as session, session.begin():
        session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id.in_(delivery_ids), WebhookDelivery.claimed_by == worker)
            .values(claimed_by=None, claimed_until=None)
            .execution_options(synchronize_session=False)
        )
