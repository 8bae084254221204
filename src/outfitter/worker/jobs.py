"""The periodic jobs (expiring transactions, reconciling card payments, folding the activity log's
count deltas) and the lease that lets one worker of many run each round.

Claiming a round is one conditional UPDATE on the job's `worker_jobs` row (due, and no live lease):
of any number of workers, on any database, exactly one sees a row change. It moves `next_run_at`
on at once, so a worker that dies in the middle costs one round, not a duplicate run; and each
job's effects are idempotent anyway (a transaction is locked and changed only while Pending). No
row lock is held while a job talks to the gateway.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from outfitter.config import Settings
from outfitter.db.base import utcnow
from outfitter.db.session import insert_if_absent
from outfitter.db.tenancy import across_companies
from outfitter.events.counts import fold_event_counts
from outfitter.models import Transaction, TransactionStatus, WorkerJob
from outfitter.payments.gateways import GatewayRegistry
from outfitter.payments.reconcile import reconcile, settle_with_gateway

logger = logging.getLogger("outfitter.worker")
EXPIRE_BATCH = 500


@dataclass(frozen=True)
class Job:
    name: str
    interval: Callable[[Settings], float]
    run: Callable[[sessionmaker[Session], GatewayRegistry], object]
    postgresql_only: bool = False  # not claimed at all elsewhere: a claim is a write


def claim_job(sessions: sessionmaker[Session], name: str, worker: str, interval: float, lease: float) -> bool:
    """Whether this worker runs the job's round that is due now (if any)."""
    with across_companies(sessions()) as session, session.begin():
        now = utcnow()
        session.execute(insert_if_absent(session, WorkerJob, {"name": name, "next_run_at": now}, ["name"]))
        claimed = session.execute(
            update(WorkerJob)
            .where(
                WorkerJob.name == name,
                WorkerJob.next_run_at <= now,
                or_(WorkerJob.claimed_until.is_(None), WorkerJob.claimed_until < now),
            )
            .values(
                claimed_by=worker,
                claimed_until=now + timedelta(seconds=max(lease, interval)),
                next_run_at=now + timedelta(seconds=interval),
            )
            .execution_options(synchronize_session=False)
        )
        return bool(getattr(claimed, "rowcount", 0))


def finish_job(sessions: sessionmaker[Session], name: str, worker: str) -> None:
    with across_companies(sessions()) as session, session.begin():
        session.execute(
            update(WorkerJob)
            .where(WorkerJob.name == name, WorkerJob.claimed_by == worker)
            .values(claimed_by=None, claimed_until=None, last_finished_at=utcnow())
            .execution_options(synchronize_session=False)
        )


def expire_transactions(sessions: sessionmaker[Session], gateways: GatewayRegistry) -> int:
    """Settle the Pending transactions past their time to live: each one's gateway is asked first
    (outside any database transaction), so one paid but not yet reported is fulfilled, not expired
    with the money taken; the unpaid ones expire, with their `transaction.expired` event. One whose
    gateway does not answer stays Pending until a later run hears from it. `settle` decides each on
    its own reading of the clock."""
    now = utcnow()
    with across_companies(sessions()) as session:
        ids: list[uuid.UUID] = list(
            session.scalars(
                select(Transaction.id)
                .where(Transaction.status == TransactionStatus.PENDING, Transaction.expires_at <= now)
                .order_by(Transaction.expires_at)
                .limit(EXPIRE_BATCH)
            )
        )
    summary = settle_with_gateway(sessions, gateways, ids, "expire")
    expired = summary.outcomes.get(TransactionStatus.EXPIRED, 0)
    if summary.checked:
        logger.info(
            "settled %d transaction(s) past their time to live: %s", summary.checked, summary.described()
        )
    return expired


def _expire(sessions: sessionmaker[Session], gateways: GatewayRegistry) -> object:
    return expire_transactions(sessions, gateways)


def _reconcile(sessions: sessionmaker[Session], gateways: GatewayRegistry) -> object:
    summary = reconcile(sessions, gateways)
    if summary.checked:
        logger.info("reconciled %d pending transaction(s): %s", summary.checked, summary.described())
    return summary


def _fold_event_counts(sessions: sessionmaker[Session], _gateways: GatewayRegistry) -> object:
    with across_companies(sessions()) as session, session.begin():
        return fold_event_counts(session.connection())


JOBS = (
    Job("expire_transactions", lambda settings: settings.worker_expire_interval_seconds, _expire),
    Job("reconcile_payments", lambda settings: settings.worker_reconcile_interval_seconds, _reconcile),
    Job(
        "fold_event_counts",
        lambda settings: settings.worker_fold_event_counts_interval_seconds,
        _fold_event_counts,
        postgresql_only=True,
    ),
)
