"""What an operator sees of the work done outside requests: the webhook queue (its depth, its
oldest delivery, how late the due ones are), the workers alive (each beats every few seconds in
`worker_heartbeats`) and the endpoints that are failing. Read at the time it is asked for, by
`/metrics` (`QueueCollector`), `/readyz` and `outfitter status`: a few indexed aggregates, never
counted on the way by every write.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, delete, func, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from outfitter.db.base import utcnow
from outfitter.db.tenancy import across_companies
from outfitter.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint, WorkerHeartbeat

logger = logging.getLogger("outfitter.worker")
HEARTBEAT_SECONDS = 5.0
# A worker whose last beat is older is taken for gone (stopped, killed, or stuck).
ALIVE_SECONDS = 30.0
# The rows of workers gone for longer are deleted by the next beat of any worker.
FORGET_AFTER = timedelta(days=1)
FAILING_ENDPOINTS_SHOWN = 20


@dataclass(frozen=True)
class QueueState:
    """The pending deliveries to enabled endpoints (a disabled endpoint's wait for it)."""

    depth: int
    due: int  # of them, due now (in flight included)
    oldest_age: float | None  # seconds since the oldest was created (a retry's waits included)
    lag: float  # seconds the longest-waiting due delivery is past its time: 0 when none is due

    def behind(self, threshold: float) -> bool:
        return self.lag > threshold


@dataclass(frozen=True)
class WorkerState:
    name: str
    host: str
    pid: int
    started_at: datetime
    beat_at: datetime
    alive: bool


@dataclass(frozen=True)
class FailingEndpoint:
    id: uuid.UUID
    company_id: uuid.UUID
    url: str
    failing_since: datetime
    pending: int  # deliveries still to send to it
    last_error: str | None


def queue_state(session: Session, now: datetime | None = None) -> QueueState:
    now = now or utcnow()
    is_due = WebhookDelivery.next_attempt_at <= now
    row = session.execute(
        select(
            func.count(),
            func.coalesce(func.sum(case((is_due, 1), else_=0)), 0),
            func.min(WebhookDelivery.created_at),
            func.min(case((is_due, WebhookDelivery.next_attempt_at))),
        )
        .select_from(WebhookDelivery)
        .join(WebhookEndpoint, WebhookEndpoint.id == WebhookDelivery.endpoint_id)
        .where(WebhookDelivery.status == DeliveryStatus.PENDING, WebhookEndpoint.enabled.is_(True))
    ).one()
    depth, due, oldest, oldest_due = row
    return QueueState(
        depth=int(depth),
        due=int(due),
        oldest_age=_seconds_since(oldest, now),
        lag=_seconds_since(oldest_due, now) or 0.0,
    )


def _seconds_since(moment: Any, now: datetime) -> float | None:
    if moment is None:
        return None
    if isinstance(moment, str):  # SQLite's aggregate of a CASE comes back as stored
        moment = datetime.fromisoformat(moment)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=now.tzinfo)
    return max(0.0, float((now - moment).total_seconds()))


def workers(session: Session, now: datetime | None = None) -> list[WorkerState]:
    """Every worker that beat within FORGET_AFTER, most recent first; `alive` within ALIVE_SECONDS."""
    now = now or utcnow()
    rows = session.execute(select(WorkerHeartbeat).order_by(WorkerHeartbeat.beat_at.desc())).scalars()
    return [
        WorkerState(
            name=row.name,
            host=row.host,
            pid=row.pid,
            started_at=row.started_at,
            beat_at=row.beat_at,
            alive=(now - row.beat_at).total_seconds() <= ALIVE_SECONDS,
        )
        for row in rows
    ]


def failing_endpoints(session: Session, limit: int = FAILING_ENDPOINTS_SHOWN) -> list[FailingEndpoint]:
    """The enabled endpoints in a run of failures (`failing_since`), longest first, each with its
    pending deliveries and its last error."""
    endpoints = session.execute(
        select(
            WebhookEndpoint.id, WebhookEndpoint.company_id, WebhookEndpoint.url, WebhookEndpoint.failing_since
        )
        .where(WebhookEndpoint.failing_since.is_not(None), WebhookEndpoint.enabled.is_(True))
        .order_by(WebhookEndpoint.failing_since)
        .limit(limit)
    ).all()
    found = []
    for endpoint in endpoints:
        pending = session.scalar(
            select(func.count())
            .select_from(WebhookDelivery)
            .where(
                WebhookDelivery.endpoint_id == endpoint.id, WebhookDelivery.status == DeliveryStatus.PENDING
            )
        )
        last_error = session.scalar(
            select(WebhookDelivery.last_error)
            .where(WebhookDelivery.endpoint_id == endpoint.id, WebhookDelivery.last_error.is_not(None))
            .order_by(WebhookDelivery.created_at.desc())
            .limit(1)
        )
        found.append(
            FailingEndpoint(
                endpoint.id,
                endpoint.company_id,
                endpoint.url,
                endpoint.failing_since,
                pending or 0,
                last_error,
            )
        )
    return found


# -- the heartbeat -------------------------------------------------------------------------------


def beat(sessions: sessionmaker[Session], name: str, started_at: datetime) -> None:
    """Say this worker is alive (insert or stamp its row), and forget workers long gone."""
    now = utcnow()
    with sessions() as session, session.begin():
        stamped = session.execute(
            update(WorkerHeartbeat)
            .where(WorkerHeartbeat.name == name)
            .values(beat_at=now)
            .execution_options(synchronize_session=False)
        )
        if not getattr(stamped, "rowcount", 0):
            session.add(
                WorkerHeartbeat(
                    name=name[:100],
                    host=socket.gethostname()[:255],
                    pid=os.getpid(),
                    started_at=started_at,
                    beat_at=now,
                )
            )
        session.execute(
            delete(WorkerHeartbeat)
            .where(WorkerHeartbeat.beat_at < now - FORGET_AFTER)
            .execution_options(synchronize_session=False)
        )


def forget(sessions: sessionmaker[Session], name: str) -> None:
    """A worker that stops removes its row: it is gone, not late."""
    with sessions() as session, session.begin():
        session.execute(
            delete(WorkerHeartbeat)
            .where(WorkerHeartbeat.name == name)
            .execution_options(synchronize_session=False)
        )


# -- /metrics ------------------------------------------------------------------------------------


class QueueCollector:
    """The queue, the workers and the failing endpoints as gauges, read when a scrape asks."""

    def __init__(self, sessions: Callable[[], Session]) -> None:
        self.sessions = sessions

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        try:
            with across_companies(self.sessions()) as session:
                now = utcnow()
                state = queue_state(session, now)
                alive = sum(worker.alive for worker in workers(session, now))
                failing = failing_endpoints(session)
        except SQLAlchemyError as exc:
            logger.warning("metrics: the queue could not be read: %s", type(exc).__name__)
            yield GaugeMetricFamily("outfitter_queue_readable", "Whether the queue could be read", value=0)
            return
        yield GaugeMetricFamily("outfitter_queue_readable", "Whether the queue could be read", value=1)
        yield GaugeMetricFamily(
            "outfitter_webhook_queue_depth",
            "Webhook deliveries pending (to enabled endpoints)",
            value=state.depth,
        )
        yield GaugeMetricFamily("outfitter_webhook_queue_due", "Pending deliveries due now", value=state.due)
        yield GaugeMetricFamily(
            "outfitter_webhook_queue_oldest_age_seconds",
            "Age of the oldest pending delivery (0 when none)",
            value=state.oldest_age or 0.0,
        )
        yield GaugeMetricFamily(
            "outfitter_webhook_queue_lag_seconds",
            "How long the longest-waiting due delivery is past its time (0 when none is due)",
            value=state.lag,
        )
        yield GaugeMetricFamily(
            "outfitter_workers_alive", f"Workers that beat within {ALIVE_SECONDS:g} s", value=alive
        )
        pending = GaugeMetricFamily(
            "outfitter_webhook_endpoint_failing_pending",
            "Pending deliveries of each endpoint in a run of failures",
            labels=["endpoint", "company"],
        )
        for endpoint in failing:
            pending.add_metric([str(endpoint.id), str(endpoint.company_id)], endpoint.pending)
        yield pending
