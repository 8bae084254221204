"""One run of the worker's event loop: the deliveries it claims, sends and records.

Fairness: up to `concurrency` sends at once; a company has at most half of them (`company_share`)
and each of its endpoints at most half of the company's (`endpoint_share`). A freed place goes to
the company with the fewest sends in flight, and within it to the endpoint with the fewest (one
that is not slow first, then the oldest claim). So a company whose receivers are slow holds its
share and no more, and another company's delivery starts at once, never behind those slow sends;
inside the company, a healthy endpoint takes the first place a slow send frees and keeps it.
Claims keep the same proportions: a company or endpoint that has its share (times CLAIM_AHEAD) in
this worker's hands is left out of the next claim, so the room goes to the others.

Slow endpoints: one with a send in flight for SLOW_AFTER seconds is slow until a send to it ends
sooner. Its sends in flight do not count against its company's room for claims (they hold places,
not supply), it holds at most one delivery waiting (the rest is released when it turns slow), and
a company's slow endpoints together wait with at most half its room. So a company whose endpoints
are mostly slow still has deliveries claimed for its healthy ones.

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
import math
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from outfitter.db.base import utcnow
from outfitter.webhooks.dispatch import (
    claim_deliveries,
    enabled_among,
    lease_seconds,
    record_outcomes,
    release,
)
from outfitter.webhooks.sender import Outcome, Outgoing, make_client, send

if TYPE_CHECKING:
    from outfitter.worker.loop import Worker

logger = logging.getLogger("outfitter.worker")
# Deliveries held (claimed, waiting or sending) per place to send: keeps the sends busy between claims.
CLAIM_AHEAD = 2
# A send in flight this long makes its endpoint slow (see above); receivers answer in milliseconds.
SLOW_AFTER = 1.0
# A slow endpoint stays slow this long after its last slow send, however quickly it answers the
# others meanwhile: one slow one time in two is slow (its slow sends would take the places again).
SLOW_MEMORY = 30.0
# How often what waits here is checked against its endpoint (deleted or disabled since the claim).
WITHDRAWN_CHECK = 0.5
T = TypeVar("T")


@dataclass(frozen=True)
class Held:
    """A claimed delivery that has not started; `claimed_at` (monotonic) was read before the claim's
    transaction began, so the lease it got ends no sooner than `claimed_at` + the lease."""

    claimed_at: float
    outgoing: Outgoing


class SlowEndpoints:
    """The endpoints this worker knows to be slow, each with its company: one is slow once a send
    to it has been in flight SLOW_AFTER, until a send to it ends sooner SLOW_MEMORY after its last
    slow one. A mark neither renewed (by another slow send) nor needed (nothing held for it) for a
    lease's time is forgotten, so the marks stay as few as the endpoints slow lately."""

    def __init__(self) -> None:
        self._marks: dict[uuid.UUID, tuple[uuid.UUID, float]] = {}  # endpoint -> company, when
        self._swept = time.monotonic()

    def __contains__(self, endpoint: uuid.UUID) -> bool:
        return endpoint in self._marks

    def mark(self, endpoint: uuid.UUID, company: uuid.UUID) -> None:
        self._marks[endpoint] = (company, time.monotonic())

    def answered_quickly(self, endpoint: uuid.UUID) -> None:
        mark = self._marks.get(endpoint)
        if mark is not None and time.monotonic() - mark[1] >= SLOW_MEMORY:
            del self._marks[endpoint]

    def company_of(self, endpoint: uuid.UUID) -> uuid.UUID | None:
        mark = self._marks.get(endpoint)
        return mark[0] if mark else None

    def of_companies(self, companies: Collection[uuid.UUID]) -> list[uuid.UUID]:
        return [endpoint for endpoint, (company, _) in self._marks.items() if company in companies]

    def forget_idle(self, held: Collection[uuid.UUID], after: float) -> None:
        now = time.monotonic()
        if now - self._swept >= after:  # a sweep per lease: the marks' size, not a claim's
            self._swept = now
            self._marks = {
                endpoint: mark
                for endpoint, mark in self._marks.items()
                if endpoint in held or now - mark[1] < after
            }


class DeliveryRun:
    """One run of the event loop (run_once's or run_forever's): what this worker holds, sends and
    has yet to record. Everything here runs on the loop's thread."""

    def __init__(self, worker: Worker, loop: asyncio.AbstractEventLoop) -> None:
        self.worker = worker
        self.settings = worker.settings
        self.loop = loop
        self.client = make_client(worker.settings, worker.concurrency)
        self.lease = lease_seconds(worker.settings)
        # Claimed, not started, per company (oldest claim first); the dict's order is the turn.
        self.waiting: dict[uuid.UUID, deque[Held]] = {}
        self.sending: dict[asyncio.Task[None], tuple[Outgoing, float]] = {}  # and its start (monotonic)
        self.slow = SlowEndpoints()
        self.held_by_company: Counter[uuid.UUID] = Counter()  # waiting or sending
        self.held_by_endpoint: Counter[uuid.UUID] = Counter()
        self.sending_by_company: Counter[uuid.UUID] = Counter()
        self.sending_by_endpoint: Counter[uuid.UUID] = Counter()
        self.gone: set[uuid.UUID] = set()  # answered 410 here, until a claim began after its record
        self.gone_recorded: set[uuid.UUID] = set()  # of those, the ones whose 410 is recorded
        self.withdrawn_checked = time.monotonic()
        self.outcomes: list[tuple[Outgoing, Outcome]] = []
        self.recording: asyncio.Task[None] | None = None
        self.batches_recorded = 0
        self.to_release: list[uuid.UUID] = []
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
            self.expire_waiting()
            await self.drop_withdrawn()
            await self.release_now()
            found, exhausted = await self.claim()
            self.worker.start_jobs_if_due()
            # Look again after the poll interval, or sooner: to check what waits here against its
            # endpoint, or when a send turns slow (which frees room).
            wait = min(poll, self.until_a_send_turns_slow(), WITHDRAWN_CHECK if self.waiting else poll)
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
            if exhausted and not self.sending and not self.held_by_company.total():
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
        """Claim into the free room; answers how many were claimed and whether the due ones ran out."""
        self.send_finished.clear()
        worker = self.worker
        self.note_slow_sends()
        supply = self.supply_by_company()
        room = worker.concurrency * CLAIM_AHEAD - supply.total()
        if room < worker.concurrency:
            return 0, False  # claim in batches, when half the room is free: fewer transactions
        full_companies = [company for company in supply if self._company_full(company, supply)]
        slow_waiting = self.slow_waiting_by_company()
        full_endpoints = [
            endpoint for endpoint in self.held_by_endpoint if self._endpoint_full(endpoint, slow_waiting)
        ]
        # The slow endpoints of a company whose slow ones hold their half, held here or not.
        full_endpoints += self.slow.of_companies(
            {company for company, waiting in slow_waiting.items() if waiting >= self._slow_room}
        )
        # No more than one endpoint's room at once: what a claim brings beyond a company's or an
        # endpoint's room goes straight back (below), and a big claim would mostly go back.
        limit = min(room, worker.endpoint_share * CLAIM_AHEAD)
        claimed_at = time.monotonic()
        gone_recorded = set(self.gone_recorded)  # disabled in the database before this claim
        try:
            claimed = await self.in_thread(
                claim_deliveries,
                worker.sessions,
                worker.name,
                limit,
                self.settings,
                [*full_endpoints, *self.gone],
                full_companies,
            )
        except Exception:
            self.worker.failures.failed("claiming deliveries failed; retrying shortly")
            return 0, True
        for outgoing in claimed:
            # One claim can bring more of a company or endpoint than its share: the rest goes back.
            # A 410 that came while the claim ran: not sent.
            if (
                outgoing.endpoint_id in self.gone
                or self._company_full(outgoing.company_id, supply)
                or self._endpoint_full(outgoing.endpoint_id, slow_waiting)
            ):
                self.to_release.append(outgoing.delivery_id)
                continue
            self.waiting.setdefault(outgoing.company_id, deque()).append(Held(claimed_at, outgoing))
            self.held_by_company[outgoing.company_id] += 1
            self.held_by_endpoint[outgoing.endpoint_id] += 1
            supply[outgoing.company_id] += 1
            if outgoing.endpoint_id in self.slow:  # it had none waiting (else it was full)
                slow_waiting[outgoing.company_id] += 1
        # A claim that began after a 410 was recorded could not bring that endpoint's deliveries.
        self.gone -= gone_recorded
        self.gone_recorded -= gone_recorded
        self.start_sends()
        # Ran out only if nothing was left out: with a full endpoint or company excluded, more may
        # be due for it as soon as one of its sends ends.
        left_out = full_companies or full_endpoints or self.gone
        return len(claimed), len(claimed) < limit and not left_out

    def supply_by_company(self) -> Counter[uuid.UUID]:
        """What each company holds here, less its slow endpoints' sends in flight: the deliveries
        that keep its sends going, which its room for claims bounds."""
        supply = Counter(self.held_by_company)
        supply.subtract(self.slow_sends_by_company())
        return supply

    def _company_full(self, company: uuid.UUID, supply: Counter[uuid.UUID]) -> bool:
        return supply[company] >= self.worker.company_share * CLAIM_AHEAD

    def _endpoint_full(self, endpoint: uuid.UUID, slow_waiting: Counter[uuid.UUID]) -> bool:
        if self.held_by_endpoint[endpoint] >= self.worker.endpoint_share * CLAIM_AHEAD:
            return True
        company = self.slow.company_of(endpoint)
        if company is None:
            return False
        # A slow endpoint: one delivery waiting at most, and its company's slow ones half its room.
        return bool(self._waiting_for(endpoint)) or slow_waiting[company] >= self._slow_room

    @property
    def _slow_room(self) -> int:
        return self.worker.company_share * CLAIM_AHEAD // 2

    def slow_waiting_by_company(self) -> Counter[uuid.UUID]:
        """Per company, its slow endpoints that have a delivery waiting here."""
        return Counter(
            company
            for endpoint in self.held_by_endpoint
            if self._waiting_for(endpoint) and (company := self.slow.company_of(endpoint)) is not None
        )

    def slow_sends_by_company(self) -> Counter[uuid.UUID]:
        """Per company, its slow endpoints' sends in flight."""
        return Counter(
            outgoing.company_id
            for outgoing, _started in self.sending.values()
            if outgoing.endpoint_id in self.slow
        )

    def _waiting_for(self, endpoint: uuid.UUID) -> int:
        return self.held_by_endpoint[endpoint] - self.sending_by_endpoint[endpoint]

    def until_a_send_turns_slow(self) -> float:
        now = time.monotonic()
        return min(
            (
                started + SLOW_AFTER - now
                for outgoing, started in self.sending.values()
                if outgoing.endpoint_id not in self.slow
            ),
            default=math.inf,  # no send to watch: the poll interval decides
        )

    def note_slow_sends(self) -> None:
        """Mark the endpoints of sends in flight for SLOW_AFTER as slow, and release what each holds
        waiting beyond its oldest delivery: that could not start before its slow sends end."""
        now = time.monotonic()
        newly = {
            outgoing.endpoint_id: outgoing.company_id
            for outgoing, started in self.sending.values()
            if now - started >= SLOW_AFTER
        }
        self.slow.forget_idle(self.held_by_endpoint, self.lease)
        for endpoint, company in list(newly.items()):
            if endpoint in self.slow:
                del newly[endpoint]
            self.slow.mark(endpoint, company)  # marked, or the mark renewed
        kept: set[uuid.UUID] = set()

        def beyond_the_oldest(held: Held) -> bool:
            endpoint = held.outgoing.endpoint_id
            if endpoint not in newly:
                return False
            if endpoint in kept:
                return True
            kept.add(endpoint)
            return False

        self._drop_waiting(beyond_the_oldest)

    def start_sends(self) -> None:
        """Fill the free places: each to the company with the fewest sends in flight that has a
        delivery it may start (its endpoint below its share)."""
        worker = self.worker
        self.expire_waiting()  # so that nothing starts with less than 1.5 deadlines of lease left
        while len(self.sending) < worker.concurrency and not self.stopped.is_set():
            turn = sorted(
                (
                    company
                    for company in self.waiting
                    if self.sending_by_company[company] < worker.company_share
                ),
                key=lambda company: self.sending_by_company[company],
            )
            started = next((company for company in turn if self._start_one_of(company)), None)
            if started is None:
                return
            self.waiting[started] = self.waiting.pop(started, deque())  # to the back of the turn
            if not self.waiting[started]:
                del self.waiting[started]

    def _start_one_of(self, company: uuid.UUID) -> bool:
        """Start the company's delivery whose endpoint has the fewest sends in flight (below its
        share), one that is not slow first, then the oldest claim (`min` keeps the first of equals)."""
        queue = self.waiting[company]
        slow_lane_full = self.slow_sends_by_company()[company] >= self.worker.slow_share
        startable = [
            held
            for held in queue
            if self.sending_by_endpoint[held.outgoing.endpoint_id] < self.worker.endpoint_share
            and not (slow_lane_full and held.outgoing.endpoint_id in self.slow)
        ]
        if not startable:
            return False
        held = min(
            startable,
            key=lambda held: (
                self.sending_by_endpoint[held.outgoing.endpoint_id],
                held.outgoing.endpoint_id in self.slow,
            ),
        )
        queue.remove(held)
        outgoing = held.outgoing
        task = asyncio.create_task(self.deliver(outgoing))
        self.sending[task] = (outgoing, time.monotonic())
        self.sending_by_company[outgoing.company_id] += 1
        self.sending_by_endpoint[outgoing.endpoint_id] += 1
        return True

    async def drop_withdrawn(self) -> None:
        """Every WITHDRAWN_CHECK seconds: release, unsent, what waits here for an endpoint deleted or
        disabled since its claim."""
        if time.monotonic() - self.withdrawn_checked < WITHDRAWN_CHECK:
            return
        self.withdrawn_checked = time.monotonic()
        waiting_for = {held.outgoing.endpoint_id for queue in self.waiting.values() for held in queue}
        if not waiting_for:
            return
        try:
            enabled = await self.in_thread(enabled_among, self.worker.sessions, waiting_for)
        except Exception:
            self.worker.failures.failed(
                f"checking the endpoints of {len(waiting_for)} waiting deliveries failed"
            )
            return
        withdrawn = waiting_for - enabled
        if withdrawn:
            self._drop_waiting(lambda held: held.outgoing.endpoint_id in withdrawn)

    def expire_waiting(self) -> None:
        """Release what has waited so long that its lease could end under its send."""
        latest = time.monotonic() - (self.lease - 1.5 * self.settings.webhook_timeout_seconds)
        self._drop_waiting(lambda held: held.claimed_at < latest)

    def _drop_waiting(self, condition: Callable[[Held], bool]) -> None:
        for company in list(self.waiting):
            queue = self.waiting[company]
            for held in [held for held in queue if condition(held)]:
                queue.remove(held)
                self._let_go(held.outgoing)
                self.to_release.append(held.outgoing.delivery_id)
            if not queue:
                del self.waiting[company]

    def _let_go(self, outgoing: Outgoing) -> None:
        _less(self.held_by_company, outgoing.company_id)
        _less(self.held_by_endpoint, outgoing.endpoint_id)

    async def release_now(self) -> None:
        ids, self.to_release = self.to_release, []
        if ids:
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
            self.to_release.append(outgoing.delivery_id)  # shutting down: unknown, so sent again
            self._ended(outgoing)
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
        self._ended(outgoing)
        self.outcomes.append((outgoing, outcome))
        if outcome.gone:
            # The endpoint is disabled by this answer: nothing more of what is held goes to it.
            self.gone.add(outgoing.endpoint_id)
            self._drop_waiting(lambda held: held.outgoing.endpoint_id == outgoing.endpoint_id)
        self.record_soon()
        self.start_sends()

    def _ended(self, outgoing: Outgoing) -> None:
        task = asyncio.current_task()
        if task in self.sending:
            _outgoing, started = self.sending.pop(task)
            if time.monotonic() - started < SLOW_AFTER:
                self.slow.answered_quickly(outgoing.endpoint_id)
            else:
                self.slow.mark(outgoing.endpoint_id, outgoing.company_id)
        _less(self.sending_by_company, outgoing.company_id)
        _less(self.sending_by_endpoint, outgoing.endpoint_id)
        self._let_go(outgoing)
        self.send_finished.set()

    def record_soon(self) -> None:
        """Record what has finished, in one batch, unless a batch is being written: then the next
        batch (all that finished meanwhile) follows it."""
        if self.outcomes and (self.recording is None or self.recording.done()):
            batch, self.outcomes = self.outcomes, []
            self.recording = asyncio.create_task(self.record(batch))

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
                self.gone_recorded.add(outgoing.endpoint_id)  # disabled: the next claim leaves it out
        self.batches_recorded += 1
        self.recording = None  # this batch is done (its task not yet): the next may start
        self.record_soon()

    def recording_pending(self) -> bool:
        return bool(self.outcomes) or (self.recording is not None and not self.recording.done())

    async def records_written(self) -> None:
        while self.recording_pending():
            if self.recording is not None and not self.recording.done():
                await asyncio.wait([self.recording])
            self.record_soon()

    async def shut_down(self) -> None:
        """Finish or release what this worker holds."""
        unstarted = sum(len(queue) for queue in self.waiting.values())
        self._drop_waiting(lambda _held: True)
        await self.release_now()
        finished: set[asyncio.Task[None]] = set()
        unfinished: set[asyncio.Task[None]] = set()
        if self.sending:
            finished, unfinished = await asyncio.wait(list(self.sending), timeout=self.worker.shutdown_grace)
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


def _less(counter: Counter[uuid.UUID], key: uuid.UUID) -> None:
    """One fewer; a key at zero leaves (the counters list only what is held)."""
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]


async def _wait_for(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
