"""The worker: one event loop sends many deliveries at once (`worker.deliveries`, aiohttp), while
the database work runs in a few threads beside it, each step one short transaction: claim due
deliveries, record the outcomes of every send that finished since the last batch (one transaction
for the batch), release what will not be sent. The periodic jobs whose round this worker wins
(`worker.jobs`) run in a thread of their own.

Shutdown (`stop()`, SIGTERM/SIGINT in `outfitter worker`): claim nothing more, release what has not
started, give the sends in flight up to `shutdown_grace` to finish, record every outcome, release
what did not finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor

from sqlalchemy.orm import Session, sessionmaker

from outfitter.config import Settings
from outfitter.db.base import utcnow
from outfitter.payments.gateways import GatewayRegistry
from outfitter.worker.deliveries import DeliveryRun
from outfitter.worker.jobs import JOBS, Job, claim_job, finish_job
from outfitter.worker.outages import FailureLog
from outfitter.worker.status import HEARTBEAT_SECONDS, beat, forget

logger = logging.getLogger("outfitter.worker")
JOB_CHECK_SECONDS = 5.0
# A claim, a batch of outcomes and a release may run at once, each on its own connection.
DATABASE_THREADS = 3


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
        self.database = ThreadPoolExecutor(DATABASE_THREADS, thread_name_prefix="outfitter-db")
        self._job_runner = ThreadPoolExecutor(1, thread_name_prefix="outfitter-jobs")
        self._job_future: Future[None] | None = None
        self._next_job_check = 0.0
        self._stopping = threading.Event()
        self.started_at = utcnow()
        self._next_beat = 0.0
        self._beat_future: Future[None] | None = None
        self.failures = FailureLog()
        self._run: DeliveryRun | None = None

    # -- one pass, for tests and `outfitter worker --once` ------------------------------------

    def run_once(self, *, jobs: bool = True) -> int:
        """Send every delivery due now (waiting for each outcome), then run the jobs that are due.
        Answers how many deliveries were attempted."""
        attempted = asyncio.run(self._drain())
        if jobs:
            self.run_due_jobs()
        return attempted

    def run_due_jobs(self) -> None:
        postgresql = self.sessions.kw["bind"].dialect.name == "postgresql"
        for job in self.jobs:
            if job.postgresql_only and not postgresql:
                continue
            interval = job.interval(self.settings)
            if not claim_job(
                self.sessions, job.name, self.name, interval, self.settings.worker_lease_seconds
            ):
                continue
            try:
                job.run(self.sessions, self.gateways)
            except Exception:
                self.failures.failed(f"job {job.name} failed; it runs again next round")
            finally:
                finish_job(self.sessions, job.name, self.name)

    # -- the long-running loop -----------------------------------------------------------------

    def stop(self) -> None:
        """From any thread (or a signal handler)."""
        self._stopping.set()
        run = self._run
        if run is not None:
            run.wake_from_another_thread()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def run_forever(self) -> None:
        logger.info("worker %s started (%d concurrent sends)", self.name, self.concurrency)
        try:
            asyncio.run(self._serve())
        except Exception:
            logger.exception("worker %s stops on an unexpected error", self.name)
            raise
        finally:
            try:
                forget(self.sessions, self.name)
            except Exception:
                logger.warning("worker %s could not remove its heartbeat; it ages out", self.name)
            if self._job_future is not None:
                self._job_future.cancel()
            self._job_runner.shutdown(wait=False, cancel_futures=True)
            self.database.shutdown(wait=False)

    @contextlib.asynccontextmanager
    async def _a_run(self) -> AsyncIterator[DeliveryRun]:
        run = DeliveryRun(self, asyncio.get_running_loop())
        self._run = run
        if self.stopping:  # stop() came before the run could hear it
            run.stopped.set()
        try:
            yield run
        finally:
            self._run = None
            await run.client.close()

    async def _drain(self) -> int:
        async with self._a_run() as run:
            return await run.drain()

    async def _serve(self) -> None:
        async with self._a_run() as run:
            await run.serve()

    def start_jobs_if_due(self) -> None:
        """The periodic work of the loop: this worker's heartbeat (`worker.status`) and its jobs."""
        self._beat_if_due()
        now = utcnow().timestamp()
        if now < self._next_job_check or (self._job_future is not None and not self._job_future.done()):
            return
        self._next_job_check = now + min(JOB_CHECK_SECONDS, self.settings.worker_poll_seconds * 5)
        self._job_future = self._job_runner.submit(self._guarded(self.run_due_jobs))

    def _beat_if_due(self) -> None:
        now = time.monotonic()
        if now < self._next_beat or (self._beat_future is not None and not self._beat_future.done()):
            return
        self._next_beat = now + HEARTBEAT_SECONDS

        def heartbeat() -> None:
            try:
                beat(self.sessions, self.name, self.started_at)
            except Exception:
                self.failures.failed("the worker's heartbeat failed; it beats again shortly")

        self._beat_future = self.database.submit(heartbeat)

    def _guarded(self, function: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                function()
            except Exception:
                self.failures.failed("the worker's jobs failed; retrying next round")

        return run

    def close(self) -> None:
        """For a worker used with run_once only."""
        self.database.shutdown(wait=True)
        self._job_runner.shutdown(wait=True)
