"""The database side of sending: claim due deliveries, record the outcomes of a batch of attempts,
release what a worker will not send. Each is one short transaction of its own; the sending happens
between them (`sender.send`), with no transaction open.

Claiming: on PostgreSQL `SELECT ... FOR UPDATE SKIP LOCKED` picks due rows that no other worker is
claiming at that instant, and an UPDATE stamps a lease on them (`claimed_by`, `claimed_until`); the
row locks end with that transaction, the lease is what keeps the rows ours while we send. SQLite
has no SKIP LOCKED, but its writers queue at BEGIN IMMEDIATE (db.session), so the same two
statements run alone there. A worker that dies leaves its lease to expire, after which any worker
claims the delivery again: every delivery is sent at least once, and receivers deduplicate by
`webhook-id`.

A lease never ends under a live send: it lasts at least twice the attempt's total deadline
(`lease_seconds`), and the worker starts a send only while at least one and a half deadlines of its
lease remain (loop.Worker), so every send ends, by its deadline, with half a deadline of lease to spare.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, Table, bindparam, or_, select, text, update
from sqlalchemy.orm import Session, sessionmaker

from outfitter.config import Settings
from outfitter.db.base import new_id, utcnow
from outfitter.db.company_writes import company_insert
from outfitter.db.tenancy import across_companies
from outfitter.models import DeliveryStatus, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from outfitter.webhooks.sender import Outcome, Outgoing

FAILING_DAYS_BEFORE_DISABLING = 5


def lease_seconds(settings: Settings) -> float:
    """How long a claim on a delivery lasts: the setting, but never less than two total deadlines."""
    return max(settings.worker_lease_seconds, 2 * settings.webhook_timeout_seconds)


def claim_deliveries(
    sessions: sessionmaker[Session],
    worker: str,
    limit: int,
    settings: Settings,
    exclude_endpoints: Collection[uuid.UUID] = (),
    exclude_companies: Collection[uuid.UUID] = (),
) -> list[Outgoing]:
    """Up to `limit` due deliveries, leased to `worker`; none of the excluded endpoints or
    companies (those that have their share in the worker's hands already). On PostgreSQL each
    endpoint's oldest due ones, the endpoints in turn (`_DUE_BY_ENDPOINT`); on SQLite the oldest
    due of all."""
    with across_companies(sessions()) as session, session.begin():
        now = utcnow()
        if session.get_bind().dialect.name == "postgresql":
            parameters = {
                "now": now,
                "limit": limit,
                "excluded_endpoints": list(exclude_endpoints),
                "excluded_companies": list(exclude_companies),
            }
            ids = list(session.scalars(_DUE_BY_ENDPOINT, parameters))
        else:
            ids = list(session.scalars(_oldest_due(now, limit, exclude_endpoints, exclude_companies)))
        if not ids:
            return []
        session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id.in_(ids))
            .values(claimed_by=worker, claimed_until=now + timedelta(seconds=lease_seconds(settings)))
            .execution_options(synchronize_session=False)
        )
        rows = session.execute(
            select(
                WebhookDelivery.id,
                WebhookDelivery.company_id,
                WebhookDelivery.endpoint_id,
                WebhookDelivery.event_id,
                WebhookDelivery.payload,
                WebhookDelivery.trace_id,
                WebhookEndpoint.url,
                WebhookEndpoint.secret,
                WebhookEndpoint.previous_secret,
                WebhookEndpoint.previous_secret_expires_at,
                WebhookEndpoint.concurrency,
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
            concurrency=row.concurrency,
            trace_id=row.trace_id,
        )
        for row in rows
    ]


# The claim on PostgreSQL. A skip scan (a recursive CTE, one seek a step of the pending deliveries'
# index, whose order its ORDER BY names so that no other index serves it) lists the endpoints
# that have pending deliveries; for each enabled one the worker may send to, a lateral subquery
# locks its oldest due deliveries, which no other worker holds; the endpoints' first ones come
# first. So a company's backlog costs a seek, not a walk: with 660,000 of one company's deliveries
# pending, oldest first over all endpoints walked them all whenever that company had its share
# (a second a claim), and another company's delivery waited 15-30 s (migration 0014).
_DUE_BY_ENDPOINT = text(
    """
    WITH RECURSIVE pending AS (
        (SELECT endpoint_id FROM webhook_deliveries WHERE status = 'pending'
         ORDER BY endpoint_id, next_attempt_at LIMIT 1)
        UNION ALL
        SELECT (SELECT d.endpoint_id FROM webhook_deliveries d
                WHERE d.status = 'pending' AND d.endpoint_id > pending.endpoint_id
                ORDER BY d.endpoint_id, d.next_attempt_at LIMIT 1)
        FROM pending WHERE pending.endpoint_id IS NOT NULL
    )
    SELECT due.id FROM pending
    JOIN webhook_endpoints e ON e.id = pending.endpoint_id AND e.enabled
        AND e.id <> ALL(CAST(:excluded_endpoints AS uuid[]))
        AND e.company_id <> ALL(CAST(:excluded_companies AS uuid[]))
    CROSS JOIN LATERAL (
        SELECT d.id, d.next_attempt_at,
               row_number() OVER (ORDER BY d.next_attempt_at) AS turn
        FROM (
            SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
            WHERE d.endpoint_id = pending.endpoint_id AND d.status = 'pending'
              AND d.next_attempt_at <= :now
              AND (d.claimed_until IS NULL OR d.claimed_until < :now)
            ORDER BY d.next_attempt_at
            LIMIT :limit
            FOR UPDATE OF d SKIP LOCKED
        ) d
    ) due
    ORDER BY due.turn, due.next_attempt_at
    LIMIT :limit
    """
)


def _oldest_due(
    now: datetime,
    limit: int,
    exclude_endpoints: Collection[uuid.UUID],
    exclude_companies: Collection[uuid.UUID],
) -> Select[uuid.UUID]:
    """The claim on SQLite, whose one writer claims alone: the oldest due deliveries of all."""
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
    )
    if exclude_endpoints:
        due = due.where(WebhookDelivery.endpoint_id.not_in(exclude_endpoints))
    if exclude_companies:
        due = due.where(WebhookDelivery.company_id.not_in(exclude_companies))
    return due


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


def record_outcomes(
    sessions: sessionmaker[Session],
    worker: str,
    results: Sequence[tuple[Outgoing, Outcome]],
    settings: Settings,
) -> None:
    """Record a batch of attempts in one transaction: an attempt row each, the deliveries' new
    state, and what the outcomes mean for their endpoints (a 410 or five days of failures disable
    one; a success ends its failing spell)."""
    if not results:
        return
    with across_companies(sessions()) as session, session.begin():
        _hold_endpoints_to_note(session, results)
        ids = sorted({outgoing.delivery_id for outgoing, _ in results})
        # Locked in id order: two workers recording at once never wait on each other crosswise.
        found = session.execute(
            select(*_STATE).where(WebhookDelivery.id.in_(ids)).order_by(WebhookDelivery.id).with_for_update()
        )
        states = {row.id: row._asdict() for row in found}
        results = [(outgoing, outcome) for outgoing, outcome in results if outgoing.delivery_id in states]
        if not results:
            return  # their endpoints were deleted meanwhile, and the deliveries with them
        now = utcnow()
        disabled = _note_on_endpoints(session, results, now)
        for outgoing, outcome in results:
            _apply(
                states[outgoing.delivery_id], outcome, worker, outgoing.endpoint_id in disabled, settings, now
            )
        company_insert(
            session,
            WebhookAttempt,
            [
                {
                    "id": new_id(),
                    "company_id": outgoing.company_id,
                    "delivery_id": outgoing.delivery_id,
                    "attempted_at": outcome.attempted_at,
                    "status_code": outcome.status_code,
                    "error": outcome.error,
                    "duration_ms": outcome.duration_ms,
                    "worker": worker[:100],
                }
                for outgoing, outcome in results
            ],
        )
        session.execute(
            _UPDATE_STATE,
            [{f"new_{key}": value for key, value in state.items()} for state in states.values()],
        )


# The columns of a delivery that recording reads and writes.
_STATE = (
    WebhookDelivery.id,
    WebhookDelivery.status,
    WebhookDelivery.attempts,
    WebhookDelivery.round_attempts,
    WebhookDelivery.round_started_at,
    WebhookDelivery.next_attempt_at,
    WebhookDelivery.delivered_at,
    WebhookDelivery.last_status_code,
    WebhookDelivery.last_error,
    WebhookDelivery.claimed_by,
    WebhookDelivery.claimed_until,
)
# Recording's writes as Core statements on the tables, one executemany each: the ORM's bulk
# UPDATE and INSERT built each row through its persistence machinery, most of a batch's cost.
_deliveries: Table = getattr(WebhookDelivery, "__table__")  # noqa: B009 (typed as a Table)
_UPDATE_STATE = (
    update(_deliveries)
    .where(_deliveries.c.id == bindparam("new_id"))
    .values({column.key: bindparam(f"new_{column.key}") for column in _STATE if column.key != "id"})
)


def _apply(
    state: dict[str, Any],
    outcome: Outcome,
    worker: str,
    endpoint_disabled: bool,
    settings: Settings,
    now: datetime,
) -> None:
    state["attempts"] += 1
    state["last_status_code"] = outcome.status_code
    state["last_error"] = outcome.error
    if state["claimed_by"] == worker:
        state["claimed_by"] = None
        state["claimed_until"] = None
    if state["status"] != DeliveryStatus.PENDING:
        return  # another worker, whose claim followed an expired lease of ours, settled it
    if outcome.delivered:
        state["status"] = DeliveryStatus.SUCCEEDED
        state["delivered_at"] = now
        state["next_attempt_at"] = None
        return
    state["round_attempts"] += 1
    due = (
        None
        if endpoint_disabled
        else next_attempt(
            state["round_started_at"], state["round_attempts"], settings.webhook_retry_schedule, now
        )
    )
    if due is not None and outcome.retry_after is not None:
        # The receiver asked for a pause (a 429's or 503's Retry-After, bounded): not before it.
        due = max(due, now + timedelta(seconds=outcome.retry_after))
    state["next_attempt_at"] = due
    if due is None:  # the schedule ran out, or the endpoint is disabled by this batch's failures
        state["status"] = DeliveryStatus.FAILED


def _hold_endpoints_to_note(session: Session, results: Sequence[tuple[Outgoing, Outcome]]) -> None:
    """Lock, as their UPDATE would and in id order, the endpoints `_note_on_endpoints` may change
    (one with a failure in the batch, or in a failing spell), before any delivery: the order in
    which a DELETE of an endpoint takes them (the endpoint, then its deliveries by the cascade).
    Taken the other way round, a DELETE and a recorded failure each waited on the other: a
    deadlock, and a 503 for the DELETE. The usual batch, successes to healthy endpoints, locks none:
    locking those too cost two workers 15% of their deliveries a second (every lock of a row that
    the writes' fan-out also holds, FOR KEY SHARE, makes a multixact)."""
    failed = {outgoing.endpoint_id for outgoing, outcome in results if not outcome.delivered}
    session.execute(
        select(WebhookEndpoint.id)
        .where(
            WebhookEndpoint.id.in_({outgoing.endpoint_id for outgoing, _ in results}),
            or_(WebhookEndpoint.id.in_(failed), WebhookEndpoint.failing_since.is_not(None)),
        )
        .order_by(WebhookEndpoint.id)
        .with_for_update(key_share=True)  # FOR NO KEY UPDATE
    )


def _note_on_endpoints(
    session: Session, results: Sequence[tuple[Outgoing, Outcome]], now: datetime
) -> set[uuid.UUID]:
    """Each endpoint's news from the batch (in a fixed order, so that two workers lock endpoints
    alike): a 410 disables it; otherwise its last outcome counts, a success ending its failing
    spell, a failure starting one or, five days on, disabling it. Answers the endpoints disabled."""
    last: dict[uuid.UUID, Outcome] = {}
    gone: set[uuid.UUID] = set()
    for outgoing, outcome in results:
        last[outgoing.endpoint_id] = outcome
        if outcome.gone:
            gone.add(outgoing.endpoint_id)
    disabled: set[uuid.UUID] = set()
    succeeded: list[uuid.UUID] = []
    for endpoint_id in sorted(last):
        if endpoint_id in gone:
            reason = f"The endpoint answered 410 Gone on {now:%Y-%m-%d %H:%M} UTC."
            _disable(session, endpoint_id, reason, WebhookEndpoint.enabled.is_(True))
            disabled.add(endpoint_id)
        elif last[endpoint_id].delivered:
            succeeded.append(endpoint_id)
        elif _endpoint_failed(session, endpoint_id, now):
            disabled.add(endpoint_id)
    if succeeded:
        _endpoints_succeeded(session, succeeded)
    return disabled


def _endpoints_succeeded(session: Session, endpoint_ids: Sequence[uuid.UUID]) -> None:
    """End the failing spells of these endpoints, in one statement. It matches (and so locks) only
    the endpoints that had been failing, which `_hold_endpoints_to_note` holds already."""
    session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.id.in_(endpoint_ids), WebhookEndpoint.failing_since.is_not(None))
        .values(failing_since=None)
        .execution_options(synchronize_session=False)
    )


def _endpoint_failed(session: Session, endpoint_id: uuid.UUID, now: datetime) -> bool:
    """Note the failure on the endpoint; answers whether the endpoint is (now) disabled by it."""
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


def enabled_among(sessions: sessionmaker[Session], endpoint_ids: Collection[uuid.UUID]) -> set[uuid.UUID]:
    """Those of the endpoints that still exist and are enabled: what a worker holds for the others
    (deleted or disabled since it claimed) is released unsent."""
    with across_companies(sessions()) as session, session.begin():
        return set(
            session.scalars(
                select(WebhookEndpoint.id).where(
                    WebhookEndpoint.id.in_(endpoint_ids), WebhookEndpoint.enabled.is_(True)
                )
            )
        )


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
