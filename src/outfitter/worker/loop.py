"""The worker loop: claim due deliveries (short transaction), send them from a thread pool (no
transaction open), record each outcome (short transaction); between claims, run the periodic jobs
whose round this worker wins.

Concurrency: up to `worker_concurrency` sends at once, so one slow receiver holds one thread, not
the others. Shutdown (`stop()`, SIGTERM/SIGINT in `outfitter worker`): claim nothing more, give the
sends in flight up to `SHUTDOWN_GRACE` to finish and record, then release the leases of the
deliveries not sent, so another worker sends them at once instead of after the lease.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor

from sqlalchemy.orm import Session, sessionmaker

from outfitter.config import Settings
from outfitter.core.tenancy import TenantSession
from outfitter.db.base import utcnow
from outfitter.db.session import make_engine, make_sessionmaker
from outfitter.payments.gateways import GatewayRegistry
from outfitter.webhooks.dispatch import claim_deliveries, record_outcome, release
from outfitter.webhooks.sender import Outgoing, make_client, send
from outfitter.worker.jobs import JOBS, Job, claim_job, finish_job

logger = logging.getLogger("outfitter.worker")
# Deliveries claimed ahead of the free threads, per thread: keeps the pool busy between claims.
CLAIM_AHEAD = 2
JOB_CHECK_SECONDS = 5.0


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        settings: Settings,
        *,
        gateways: GatewayRegistry | None = None,
        name: str | None = None,
        concurrency: int | None = None,
        jobs: tuple[Job, ...] = JOBS,
    ) -> None:
        self.sessions = sessions
        self.settings = settings
        self.gateways = gateways or GatewayRegistry(settings, sessions)
        self.name = name or worker_name()
        self.concurrency = concurrency or settings.worker_concurrency
        self.jobs = jobs
        self.shutdown_grace = settings.webhook_timeout_seconds + 5
        self._client = make_client(settings)
        self._senders = ThreadPoolExecutor(self.concurrency, thread_name_prefix="outfitter-send")
        self._job_runner = ThreadPoolExecutor(1, thread_name_prefix="outfitter-jobs")
        self._job_future: Future[None] | None = None
        self._next_job_check = 0.0
        self._inflight: dict[Future[bool], Outgoing] = {}
        # Claimed, not yet handed to the pool: their endpoint has its share of threads busy.
        self._waiting: list[tuple[float, Outgoing]] = []
        self.per_endpoint = max(1, self.concurrency // 2)
        self._stopping = threading.Event()

    # -- one pass, for tests and `outfitter worker --once` ------------------------------------

    def run_once(self, *, jobs: bool = True) -> int:
        """Send every delivery due now (waiting for each outcome), then run the jobs that are due.
        Answers how many deliveries were attempted."""
        attempted = 0
        while True:
            claimed = claim_deliveries(
                self.sessions, self.name, self.concurrency * CLAIM_AHEAD, self.settings
            )
            if not claimed:
                break
            futures = [self._senders.submit(self._deliver, outgoing) for outgoing in claimed]
            for future in futures:
                future.result()
            attempted += len(claimed)
        if jobs:
            self.run_due_jobs()
        return attempted

    def run_due_jobs(self) -> None:
        for job in self.jobs:
            interval = job.interval(self.settings)
            if not claim_job(
                self.sessions, job.name, self.name, interval, self.settings.worker_lease_seconds
            ):
                continue
            try:
                job.run(self.sessions, self.gateways)
            except Exception:
                logger.exception("job %s failed; it runs again next round", job.name)
            finally:
                finish_job(self.sessions, job.name, self.name)

    # -- the long-running loop -----------------------------------------------------------------

    def stop(self) -> None:
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def run_forever(self) -> None:
        logger.info("worker %s started (%d concurrent sends)", self.name, self.concurrency)
        try:
            while not self._stopping.is_set():
                claimed = self._claim_more()
                self._start_jobs_if_due()
                if not claimed:
                    self._wait(self.settings.worker_poll_seconds)
        except Exception:
            logger.exception("worker %s stops on an unexpected error", self.name)
            raise
        finally:
            self._shutdown()

    def _claim_more(self) -> int:
        self._inflight = {
            future: outgoing for future, outgoing in self._inflight.items() if not future.done()
        }
        self._submit_waiting()
        room = self.concurrency * CLAIM_AHEAD - len(self._inflight)
        if room < self.concurrency:
            return 0  # claim in batches, when a pool's worth of room is free: fewer transactions
        held = Counter(outgoing.endpoint_id for outgoing in self._inflight.values())
        held.update(outgoing.endpoint_id for _, outgoing in self._waiting)
        # Endpoints with their share in hand are left out of the claim: the room goes to the others.
        saturated = [endpoint for endpoint, count in held.items() if count >= self.per_endpoint * CLAIM_AHEAD]
        try:
            claimed = claim_deliveries(
                self.sessions, self.name, room, self.settings, exclude_endpoints=saturated
            )
        except Exception:
            logger.exception("claiming deliveries failed; retrying shortly")
            return 0
        now = time.monotonic()
        self._waiting += [(now, outgoing) for outgoing in claimed]
        self._submit_waiting()
        return len(claimed)

    def _submit_waiting(self) -> None:
        """Hand claimed deliveries to the pool, at most `per_endpoint` per endpoint at a time, so a
        slow receiver holds half the threads at most and the others keep sending. What waits too
        long for its endpoint is released before its lease ends (another worker may take it)."""
        busy = Counter(outgoing.endpoint_id for outgoing in self._inflight.values())
        keep: list[tuple[float, Outgoing]] = []
        stale: list[uuid.UUID] = []
        for since, outgoing in self._waiting:
            if busy[outgoing.endpoint_id] < self.per_endpoint:
                busy[outgoing.endpoint_id] += 1
                self._inflight[self._senders.submit(self._deliver, outgoing)] = outgoing
            elif time.monotonic() - since > self.settings.worker_lease_seconds / 2:
                stale.append(outgoing.delivery_id)
            else:
                keep.append((since, outgoing))
        self._waiting = keep
        if stale:
            release(self.sessions, self.name, stale)

    def _wait(self, seconds: float) -> None:
        """Until a send finishes (room to claim), the poll interval passes, or stop() is called."""
        deadline = time.monotonic() + seconds
        while not self._stopping.is_set() and time.monotonic() < deadline:
            if not self._inflight:
                self._stopping.wait(deadline - time.monotonic())
                return
            # In short slices, so that stop() is noticed at once.
            done, _ = concurrent.futures.wait(list(self._inflight), timeout=0.05, return_when=FIRST_COMPLETED)
            if done:
                return

    def _start_jobs_if_due(self) -> None:
        now = utcnow().timestamp()
        if now < self._next_job_check or (self._job_future is not None and not self._job_future.done()):
            return
        self._next_job_check = now + min(JOB_CHECK_SECONDS, self.settings.worker_poll_seconds * 5)
        self._job_future = self._job_runner.submit(self._guarded(self.run_due_jobs))

    @staticmethod
    def _guarded(function: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                function()
            except Exception:
                logger.exception("the worker's jobs failed; retrying next round")

        return run

    def _deliver(self, outgoing: Outgoing) -> bool:
        """Send and record one delivery; False when it was not sent because the worker is stopping
        (it is then released, not sent late)."""
        if self._stopping.is_set():
            return False
        outcome = send(self._client, outgoing, self.settings)
        try:
            record_outcome(self.sessions, self.name, outgoing, outcome, self.settings)
        except Exception:
            # The lease expires and the delivery is sent again: at least once, never lost.
            logger.exception("recording the outcome of delivery %s failed", outgoing.delivery_id)
        return True

    def _shutdown(self) -> None:
        """Finish or release what this worker holds."""
        held = list(self._inflight)
        # Queued sends that have not started are given back at once rather than sent late.
        for future in held:
            future.cancel()
        running = [future for future in held if not future.cancelled()]
        finished, unfinished = concurrent.futures.wait(running, timeout=self.shutdown_grace)
        unsent = [
            self._inflight[future].delivery_id
            for future in held
            if future.cancelled() or future in unfinished or future.result() is False
        ] + [outgoing.delivery_id for _, outgoing in self._waiting]
        try:
            release(self.sessions, self.name, unsent)
        except Exception:
            logger.exception("releasing %d deliveries failed; their leases expire instead", len(unsent))
        if self._job_future is not None:
            self._job_future.cancel()
        self._senders.shutdown(wait=False, cancel_futures=True)
        self._job_runner.shutdown(wait=False, cancel_futures=True)
        if not unfinished:
            self._client.close()
        logger.info(
            "worker %s stopped: %d send(s) finished, %d released", self.name, len(finished), len(unsent)
        )

    def close(self) -> None:
        """For a worker used with run_once only."""
        self._senders.shutdown(wait=True)
        self._job_runner.shutdown(wait=True)
        self._client.close()


class BackgroundWorker:
    """A worker in a thread of this process, with its own engine (`outfitter serve`'s embedded one)."""

    def __init__(self, settings: Settings) -> None:
        self.engine = make_engine(
            settings.database_url, pool_size=settings.worker_concurrency + 2, max_overflow=0
        )
        self.worker = Worker(make_sessionmaker(self.engine, TenantSession), settings)
        self.thread = threading.Thread(target=self._run, name="outfitter-worker", daemon=True)

    def _run(self) -> None:
        try:
            self.worker.run_forever()
        except Exception:
            logger.exception("the embedded worker stopped")

    def stop(self) -> None:
        """Idempotent: the server calls it on its way out, whichever way that is."""
        self.worker.stop()
        if self.thread.is_alive():
            self.thread.join(timeout=self.worker.shutdown_grace + 5)
        self.engine.dispose()


def start_in_background(settings: Settings) -> BackgroundWorker:
    background = BackgroundWorker(settings)
    background.thread.start()
    return background
