"""One run of the worker's event loop: the deliveries it claims, sends and records. What starts
next, what a claim leaves out and what goes back is the policy's (`worker.scheduling`, which has
the rules); this module does the I/O around it.

Leases: a claimed delivery starts only while 1.5 attempt deadlines of its lease remain (what waited
longer is released, for any worker to claim again); with the deadline on the whole attempt
(`sender.send`) and leases of at least two deadlines (`dispatch.lease_seconds`), no lease ends
under a live send. A 410 disables the endpoint: what this worker holds for it and has not started
is released, not sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Protocol, TypeVar

from sqlalchemy.orm import Session, sessionmaker

from outfitter.config import Settings
from outfitter.core import metrics
from outfitter.db.base import utcnow
from outfitter.webhooks.dispatch import (
    claim_deliveries,
    enabled_among,
    lease_seconds,
    record_outcomes,
    release,
)
from outfitter.webhooks.sender import Outcome, Outgoing, make_client, send
from outfitter.worker.outages import FailureLog
from outfitter.worker.scheduling import Claim, Scheduler

logger = logging.getLogger("outfitter.worker")
# How often what waits here is checked against its endpoint (deleted or disabled since the claim).
WITHDRAWN_CHECK = 0.5
# How long a finished send's outcome may wait for others to be recorded with it in one transaction
# (unless half the worker's places' worth are waiting already): a transaction costs the worker
# more than the rows it writes, and at the receiver's pace the outcomes came one or two a batch.
RECORD_LINGER = 0.02
T = TypeVar("T")


class WorkerSide(Protocol):
    """What a run needs of its worker (`worker.loop.Worker` is one)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def sessions(self) -> sessionmaker[Session]: ...
    @property
    def name(self) -> str: ...
    @property
    def concurrency(self) -> int: ...
    @property
    def database(self) -> Executor: ...  # the threads the database steps run in
    @property
    def failures(self) -> FailureLog: ...
    @property
    def shutdown_grace(self) -> float: ...

    def start_jobs_if_due(self) -> None: ...


class DeliveryRun:
    """One run of the event loop (run_once's or run_forever's): the sends in flight and the
    outcomes yet to record; what it holds is the policy's (`self.policy`). Everything here runs on
    the loop's thread."""

    def __init__(self, worker: WorkerSide, loop: asyncio.AbstractEventLoop) -> None:
        self.worker = worker
        self.settings = worker.settings
        self.loop = loop
        self.client = make_client(worker.settings, worker.concurrency)
        lease = lease_seconds(worker.settings)
        self.policy = Scheduler(
            worker.concurrency,
            lease=lease,
            longest_wait=lease - 1.5 * worker.settings.webhook_timeout_seconds,
            poll=worker.settings.worker_poll_seconds,
            now=time.monotonic(),
        )
        self.tasks: dict[asyncio.Task[None], Outgoing] = {}
        self.withdrawn_checked = time.monotonic()
        self.outcomes: list[tuple[Outgoing, Outcome]] = []
        self.recording: asyncio.Task[None] | None = None
        self.record_timer: asyncio.TimerHandle | None = None
        self.record_batch = max(1, worker.concurrency // 2)
        self.batches_recorded = 0
        self.attempted = 0
        self.send_finished = asyncio.Event()  # also set by stop()
        self.stopped = asyncio.Event()

    def wake_from_another_thread(self) -> None:
        def wake() -> None:
            self.stopped.set()
            self.send_finished.set()

        with contextlib.suppress(RuntimeError):  # the loop has ended
            self.loop.call_soon_threadsafe(wake)

    async def in_thread(self, function: Callable[..., T], *args: object) -> T:
        return await self.loop.run_in_executor(self.worker.database, functools.partial(function, *args))

    # -- the two ways to run ---------------------------------------------------------------------

    async def serve(self) -> None:
        poll = self.settings.worker_poll_seconds
        while not self.stopped.is_set():
            self.policy.expire_waiting(time.monotonic())
            await self.drop_withdrawn()
            await self.release_now()
            found, exhausted = await self.claim()
            self.worker.start_jobs_if_due()
            # Look again after the poll interval, or sooner: to check what waits here against its
            # endpoint, or when a send turns slow (which frees room) or a pause ends.
            wait = min(
                poll,
                self.policy.next_wake(time.monotonic()),
                WITHDRAWN_CHECK if self.policy.waiting else poll,
            )
            if exhausted:  # nothing more is due
                await _wait_for(self.stopped, wait)
            elif not found:  # no room: also look again when a send ends
                await _wait_for(self.send_finished, wait)
        await self.shut_down()

    async def drain(self) -> int:
        while True:
            await self.drop_withdrawn()
            await self.release_now()
            recorded_before = self.batches_recorded
            found, exhausted = await self.claim()
            if exhausted and not self.tasks and not self.policy.held:
                # Done unless a batch was recorded since the claim began: a failure may be due again.
                if not self.recording_pending() and self.batches_recorded == recorded_before:
                    break
                await self.records_written()
                continue
            if not found:
                await _wait_for(self.send_finished, 0.05)
        await self.records_written()
        return self.attempted

    # -- claiming and starting -------------------------------------------------------------------

    async def claim(self) -> tuple[int, bool]:
        """Claim into the free room (within the shares, then lent: `Scheduler.claim`, `lend`);
        answers how many were claimed and whether the due ones ran out."""
        self.send_finished.clear()
        first = self.policy.claim(time.monotonic())
        if first is None:
            return 0, False
        gone_recorded = set(self.policy.gone_recorded)  # disabled in the database before this claim
        rounds: list[tuple[Claim, int]] = []
        claim: Claim | None = first
        while claim is not None:
            claimed_at = time.monotonic()
            try:
                claimed = await self.in_thread(
                    claim_deliveries,
                    self.worker.sessions,
                    self.worker.name,
                    claim.limit,
                    self.settings,
                    claim.exclude_endpoints,
                    claim.exclude_companies,
                )
            except Exception:
                self.worker.failures.failed("claiming deliveries failed; retrying shortly")
                return 0, True
            self.policy.take(claim, claimed, claimed_at)
            rounds.append((claim, len(claimed)))
            claim = None if claim.lending else self.policy.lend(first, len(claimed), time.monotonic())
        exhausted = self.policy.claimed(rounds, gone_recorded, time.monotonic())
        self.start_sends()
        return sum(count for _claim, count in rounds), exhausted

    def start_sends(self) -> None:
        if self.stopped.is_set():
            return
        for outgoing in self.policy.starts(time.monotonic()):
            self.tasks[asyncio.create_task(self.deliver(outgoing))] = outgoing

    async def drop_withdrawn(self) -> None:
        """Every WITHDRAWN_CHECK seconds: release, unsent, what waits here for an endpoint deleted or
        disabled since its claim."""
        if time.monotonic() - self.withdrawn_checked < WITHDRAWN_CHECK:
            return
        self.withdrawn_checked = time.monotonic()
        waiting_for = self.policy.waiting_endpoints()
        if not waiting_for:
            return
        try:
            enabled = await self.in_thread(enabled_among, self.worker.sessions, waiting_for)
        except Exception:
            self.worker.failures.failed(
                f"checking the endpoints of {len(waiting_for)} waiting deliveries failed"
            )
            return
        if withdrawn := waiting_for - enabled:
            self.policy.withdraw(withdrawn)

    async def release_now(self) -> None:
        if ids := self.policy.releases():
            try:
                await self.in_thread(release, self.worker.sessions, self.worker.name, ids)
            except Exception:
                self.worker.failures.failed(
                    f"releasing {len(ids)} deliveries failed; their leases expire instead"
                )

    # -- sending and recording -------------------------------------------------------------------

    async def deliver(self, outgoing: Outgoing) -> None:
        try:
            outcome = await send(self.client, outgoing, self.settings)
        except asyncio.CancelledError:
            self._ended(outgoing, None)  # shutting down: unknown, so released and sent again
            raise
        except Exception as exc:  # a defect, not the receiver's: recorded as a failed attempt
            logger.exception("sending delivery %s failed", outgoing.delivery_id)
            outcome = Outcome(utcnow(), None, f"Not sent: {type(exc).__name__}.", 0)
        if not outcome.delivered:  # an operator sees a failing endpoint here, not only in the API
            logger.warning(
                "delivery %s to endpoint %s failed: %s",
                outgoing.delivery_id,
                outgoing.endpoint_id,
                outcome.error or f"HTTP {outcome.status_code}",
            )
        self.attempted += 1
        if metrics.active is not None:
            result = "succeeded" if outcome.delivered else "gone" if outcome.gone else "failed"
            metrics.active.delivery(result, str(outgoing.endpoint_id))
        self._ended(outgoing, outcome)
        self.outcomes.append((outgoing, outcome))
        self.record_soon()
        self.start_sends()

    def _ended(self, outgoing: Outgoing, outcome: Outcome | None) -> None:
        task = asyncio.current_task()
        if task in self.tasks:
            del self.tasks[task]
        self.policy.ended(outgoing, outcome, time.monotonic())
        self.send_finished.set()

    def record_soon(self, *, now: bool = False) -> None:
        """Record what has finished, in one batch, once `record_batch` outcomes wait or the first
        has waited RECORD_LINGER (at once with `now`), unless a batch is being written: then the
        next batch (all that finished meanwhile) follows it."""
        if not self.outcomes or (self.recording is not None and not self.recording.done()):
            return
        if not now and len(self.outcomes) < self.record_batch:
            if self.record_timer is None:
                self.record_timer = self.loop.call_later(RECORD_LINGER, self._linger_over)
            return
        if self.record_timer is not None:
            self.record_timer.cancel()
            self.record_timer = None
        batch, self.outcomes = self.outcomes, []
        self.recording = asyncio.create_task(self.record(batch))

    def _linger_over(self) -> None:
        self.record_timer = None
        self.record_soon(now=True)

    async def record(self, batch: list[tuple[Outgoing, Outcome]]) -> None:
        try:
            await self.in_thread(
                record_outcomes, self.worker.sessions, self.worker.name, batch, self.settings
            )
        except Exception:
            # Their leases expire and they are sent again: at least once, never lost.
            self.worker.failures.failed(f"recording the outcomes of {len(batch)} deliveries failed")
        for outgoing, outcome in batch:
            if outcome.gone:
                self.policy.recorded_gone(outgoing.endpoint_id)  # disabled: claims leave it out
        self.batches_recorded += 1
        self.recording = None  # this batch is done (its task not yet): the next may start
        self.record_soon()

    def recording_pending(self) -> bool:
        return bool(self.outcomes) or (self.recording is not None and not self.recording.done())

    async def records_written(self) -> None:
        while self.recording_pending():
            if self.recording is not None and not self.recording.done():
                await asyncio.wait([self.recording])
            self.record_soon(now=True)

    async def shut_down(self) -> None:
        """Finish or release what this worker holds."""
        unstarted = self.policy.release_waiting()
        await self.release_now()
        finished: set[asyncio.Task[None]] = set()
        unfinished: set[asyncio.Task[None]] = set()
        if self.tasks:
            finished, unfinished = await asyncio.wait(list(self.tasks), timeout=self.worker.shutdown_grace)
            for task in unfinished:
                task.cancel()
            await asyncio.gather(*unfinished, return_exceptions=True)
        await self.records_written()
        await self.release_now()
        logger.info(
            "worker %s stopped: %d send(s) finished, %d released",
            self.worker.name,
            len(finished),
            unstarted + len(unfinished),
        )


async def _wait_for(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
