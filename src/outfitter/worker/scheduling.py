"""The webhook worker's scheduling policy: which delivery starts next, what a claim leaves out, what
goes back. Pure: no event loop, no database, no clock of its own (every `now` is the caller's
monotonic time), so that tests drive it step by step (tests/webhooks/test_scheduling.py).
`worker.deliveries` does the I/O and asks this policy at every step.

Fairness, only when others wait: a company has at most half the worker's places
(`Shares.company`) and each endpoint at most half of its company's (`Shares.endpoint`). A freed
place goes first to the company with the fewest sends in flight that has a delivery it may start
within those shares, and within it to the endpoint with the fewest (one that is not slow first,
then the oldest claim). Only a place that no delivery can take within the shares is lent: to an
endpoint that answers quickly, up to its own limit (below). So a lone endpoint may use every place,
and whatever another company brings takes the next place that frees.

An endpoint's limit is the least of the concurrency its company set on it and its window: the
window starts at the endpoint's share, grows by one with each 2xx, and halves (once per round of
sends) on a 429, a 503, a timeout or a connection failure. A 429 or 503 also pauses the endpoint:
for its Retry-After (which the sender bounds), or without one for FIRST_PAUSE, doubling with each
such answer in a row; nothing starts to it or is claimed for it meanwhile, and what waits for it
goes back.

Slow endpoints: one with a send in flight for SLOW_AFTER seconds is slow until a send to it ends
sooner SLOW_MEMORY after its last slow one. A slow endpoint is never lent a place (the back-off
when a receiver slows). Its sends in flight do not count against its company's room for claims
(they hold places, not supply), it holds at most one delivery waiting (the rest goes back when it
turns slow), a company's slow endpoints together send in at most half its places
(`Shares.slow`) and wait with at most half its room.

Claims keep the same proportions: a company or endpoint that holds its share (times CLAIM_AHEAD)
is left out of the claim; when that claim comes back short (nothing else is due), a second claim
lends the rest of the room to the endpoints left out that answer quickly, up to their limit.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter, deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from outfitter.webhooks.sender import Outcome, Outgoing
from outfitter.worker.endpoints import Limit, SlowEndpoints

# Deliveries held (claimed, waiting or sending) per place to send: keeps the sends busy between claims.
CLAIM_AHEAD = 2
# A send in flight this long makes its endpoint slow (see above); receivers answer in milliseconds.
SLOW_AFTER = 1.0
# The pause after a 429 or 503 without Retry-After, doubled for each such answer in a row, up to
# MAX_PAUSE_UNASKED.
FIRST_PAUSE = 1.0
MAX_PAUSE_UNASKED = 60.0
# Answers that ask the sender to slow down.
SLOW_DOWN = frozenset({429, 503})


@dataclass(frozen=True)
class Shares:
    """A worker's places and the fair shares of them."""

    concurrency: int

    @property
    def company(self) -> int:
        return max(1, self.concurrency // 2)

    @property
    def endpoint(self) -> int:
        return max(1, self.company // 2)

    @property
    def slow(self) -> int:  # a company's slow endpoints together
        return max(1, self.company // 2)


@dataclass(frozen=True)
class Held:
    """A claimed delivery that has not started; `claimed_at` (monotonic) was read before the claim's
    transaction began, so the lease it got ends no sooner than `claimed_at` + the lease."""

    claimed_at: float
    outgoing: Outgoing
    order: int  # of the claims this worker has taken: the lower, the older


@dataclass(frozen=True)
class Claim:
    """What one claim asks the database for."""

    limit: int
    exclude_endpoints: tuple[uuid.UUID, ...]
    exclude_companies: tuple[uuid.UUID, ...]
    lending: bool  # the second claim: the rest of the room, lent beyond the shares
    left_out: bool  # an endpoint or company with deliveries maybe due was excluded


class Scheduler:
    """What one worker holds: the deliveries waiting (claimed, not started) and sending, and what
    it knows of each endpoint. The caller starts what `starts` answers, reports each send's end
    (`ended`), and sends back what `releases` answers."""

    def __init__(
        self, concurrency: int, *, lease: float, longest_wait: float, poll: float, now: float
    ) -> None:
        """`lease`: how long a claim lasts; `longest_wait`: how long a claimed delivery may wait and
        still start (its lease must outlive its send); `poll`: how often a claim that left
        endpoints out is tried again at the latest."""
        self.shares = Shares(concurrency)
        self.lease = lease
        self.longest_wait = longest_wait
        self.poll = poll
        # Claimed, not started, per company and endpoint (oldest claim first); the order of the
        # companies is the turn. Per endpoint, so that a start looks at endpoints, not deliveries.
        self.waiting: dict[uuid.UUID, dict[uuid.UUID, deque[Held]]] = {}
        self._taken = 0
        self.sending: dict[uuid.UUID, tuple[Outgoing, float]] = {}  # by delivery: and its start
        self.slow = SlowEndpoints(now)
        self.limits: dict[uuid.UUID, Limit] = {}
        self.held_by_company: Counter[uuid.UUID] = Counter()  # waiting or sending
        self.held_by_endpoint: Counter[uuid.UUID] = Counter()
        self.sending_by_company: Counter[uuid.UUID] = Counter()
        self.sending_by_endpoint: Counter[uuid.UUID] = Counter()
        self.gone: set[uuid.UUID] = set()  # answered 410 here, until a claim began after its record
        self.gone_recorded: set[uuid.UUID] = set()  # of those, the ones whose 410 is recorded
        self.to_release: list[uuid.UUID] = []
        # The last claim that found nothing because it left some out: when, and whom.
        self._fruitless: tuple[float, frozenset[uuid.UUID]] | None = None

    # -- what the run asks -----------------------------------------------------------------------

    @property
    def held(self) -> int:
        return self.held_by_company.total()

    def releases(self) -> list[uuid.UUID]:
        """The deliveries to give back now (each once)."""
        ids, self.to_release = self.to_release, []
        return ids

    def waiting_endpoints(self) -> set[uuid.UUID]:
        return {endpoint for queues in self.waiting.values() for endpoint in queues}

    def next_wake(self, now: float) -> float:
        """Seconds until something changes by the clock alone: a send turns slow (which frees
        room), or a pause ends (its endpoint may be claimed again)."""
        turns_slow = (
            started + SLOW_AFTER - now
            for outgoing, started in self.sending.values()
            if outgoing.endpoint_id not in self.slow
        )
        pauses = (limit.paused_until - now for limit in self.limits.values() if limit.paused_until > now)
        return max(0.0, min(min(turns_slow, default=math.inf), min(pauses, default=math.inf)))

    # -- claiming --------------------------------------------------------------------------------

    def claim(self, now: float) -> Claim | None:
        """The first claim of a round, within the shares; None when there is no room worth a claim
        (claims go in batches, when half the room is free) or when the last claim found nothing but
        what it left out, and none of that has freed half its room since (nor has the poll passed)."""
        self._note_slow_sends(now)
        supply = self._supply_by_company()
        room = self.shares.concurrency * CLAIM_AHEAD - supply.total()
        if room < self.shares.concurrency:
            return None
        if self._fruitless is not None:
            at, left_out = self._fruitless
            if now - at < self.poll and not any(self._has_half_room(key) for key in left_out):
                return None
        full_companies = tuple(company for company in supply if self._company_full(company, supply))
        slow_waiting = self._slow_waiting_by_company()
        full_endpoints = [
            endpoint
            for endpoint in self.held_by_endpoint
            if self._endpoint_full(endpoint, slow_waiting, self._fair_most(endpoint))
        ]
        # The slow endpoints of a company whose slow ones hold their half, held here or not.
        full_endpoints += self.slow.of_companies(
            {company for company, waiting in slow_waiting.items() if waiting >= self._slow_room}
        )
        excluded = (*full_endpoints, *self._paused(now), *self.gone)
        return Claim(
            # No more than one endpoint's room at once: what a claim brings beyond a company's or an
            # endpoint's room goes straight back, and a big claim would mostly go back.
            limit=min(room, self.shares.endpoint * CLAIM_AHEAD),
            exclude_endpoints=tuple(dict.fromkeys(excluded)),
            exclude_companies=full_companies,
            lending=False,
            left_out=bool(excluded or full_companies),
        )

    def lend(self, first: Claim, found: int, now: float) -> Claim | None:
        """After a first claim that came back short (nothing else is due): a second claim for the
        endpoints it left out that may be lent places (quick, below their own limit), with the rest
        of the room. None when there is none."""
        if found >= first.limit or not first.left_out:
            return None
        room = self.shares.concurrency * CLAIM_AHEAD - self._supply_by_company().total()
        borrowers = [endpoint for endpoint in self.held_by_endpoint if self._may_borrow_more(endpoint, now)]
        room = min(
            room,
            sum(
                self.limits[endpoint].most * CLAIM_AHEAD - self.held_by_endpoint[endpoint]
                for endpoint in borrowers
            ),
        )
        if room <= 0:
            return None
        lenders = set(borrowers)
        others = [endpoint for endpoint in self.held_by_endpoint if endpoint not in lenders]
        excluded = (
            *others,
            *self.slow.of_companies(set(self.held_by_company)),
            *self._paused(now),
            *self.gone,
        )
        return Claim(
            limit=room,
            exclude_endpoints=tuple(dict.fromkeys(excluded)),
            exclude_companies=(),
            lending=True,
            left_out=True,
        )

    def take(self, claim: Claim, claimed: Sequence[Outgoing], claimed_at: float) -> None:
        """Hold what a claim brought; what it brought beyond a company's or endpoint's room (or for
        an endpoint answering 410 or paused meanwhile) goes back. A first claim that came back
        short found nothing else due: what it brought beyond the shares is lent, as a lending
        claim's would be, to an endpoint that may borrow, rather than sent back and claimed again."""
        supply = self._supply_by_company()
        slow_waiting = self._slow_waiting_by_company()
        short = len(claimed) < claim.limit
        for outgoing in claimed:
            endpoint = outgoing.endpoint_id
            limit = self._limit_of(outgoing)
            lent = claim.lending or (short and self._may_borrow_more(endpoint, claimed_at))
            too_many = (
                self._endpoint_full(endpoint, slow_waiting, limit.most)
                if lent
                else self._company_full(outgoing.company_id, supply)
                or self._endpoint_full(endpoint, slow_waiting, self._fair_most(endpoint))
            )
            if endpoint in self.gone or limit.paused_until > claimed_at or too_many:
                self.to_release.append(outgoing.delivery_id)
                continue
            self._taken += 1
            queues = self.waiting.setdefault(outgoing.company_id, {})
            queues.setdefault(endpoint, deque()).append(Held(claimed_at, outgoing, self._taken))
            self.held_by_company[outgoing.company_id] += 1
            self.held_by_endpoint[endpoint] += 1
            supply[outgoing.company_id] += 1
            if endpoint in self.slow:  # it had none waiting (else it was full)
                slow_waiting[outgoing.company_id] += 1

    def claimed(
        self, claims: list[tuple[Claim, int]], gone_recorded: Collection[uuid.UUID], now: float
    ) -> bool:
        """The round of claims is over (each with how many it brought); `gone_recorded` were the
        410s recorded before the first began. Answers whether the due deliveries ran out: only if
        the last claim came back short and nothing was left out."""
        # A claim that began after a 410 was recorded could not bring that endpoint's deliveries.
        self.gone -= set(gone_recorded)
        self.gone_recorded -= set(gone_recorded)
        first, first_count = claims[0]
        last, count = claims[-1]
        if first_count == 0 and first.left_out:
            # Nothing but what it left out was due (a lending claim may have brought some of that):
            # the next claim waits until what it left out frees half its room, or the poll passes,
            # so that a lone endpoint's claims come in batches, not one at each send's end.
            self._fruitless = (now, frozenset({*first.exclude_endpoints, *first.exclude_companies}))
        else:
            self._fruitless = None
        return count < last.limit and not any(claim.left_out for claim, _ in claims)

    # -- starting and ending sends ---------------------------------------------------------------

    def starts(self, now: float) -> list[Outgoing]:
        """Fill the free places: first within the shares, each to the company with the fewest sends
        in flight that has a delivery it may start; then, with what is left, lent to quick
        endpoints below their own limit. The caller starts each send it answers, at `now`."""
        self.expire_waiting(now)  # so that nothing starts with too little of its lease left
        started: list[Outgoing] = []
        while len(self.sending) < self.shares.concurrency:
            outgoing = self._start_fairly(now) or self._start_lent(now)
            if outgoing is None:
                break
            started.append(outgoing)
        return started

    def ended(self, outgoing: Outgoing, outcome: Outcome | None, now: float) -> None:
        """A send ended with `outcome`, or without one (cancelled: it goes back, to be sent again)."""
        endpoint = outgoing.endpoint_id
        entry = self.sending.pop(outgoing.delivery_id, None)
        started = entry[1] if entry else now
        if entry is not None:
            if now - started < SLOW_AFTER:
                self.slow.answered_quickly(endpoint, now)
            else:
                self.slow.mark(endpoint, outgoing.company_id, now)
            _less(self.sending_by_company, outgoing.company_id)
            _less(self.sending_by_endpoint, endpoint)
        self._let_go(outgoing)
        if outcome is None:
            self.to_release.append(outgoing.delivery_id)
            return
        self._heed(outgoing, outcome, started, now)
        if outcome.gone:
            # The endpoint is disabled by this answer: nothing more of what is held goes to it.
            self.gone.add(endpoint)
            self._drop_waiting_for(endpoint)

    def recorded_gone(self, endpoint: uuid.UUID) -> None:
        """Its 410 is recorded (the endpoint disabled): the next claim leaves it out by itself."""
        self.gone_recorded.add(endpoint)

    def withdraw(self, endpoints: Collection[uuid.UUID]) -> None:
        """These endpoints were deleted or disabled since their deliveries were claimed."""
        for endpoint in endpoints:
            self._drop_waiting_for(endpoint)

    def expire_waiting(self, now: float) -> None:
        """Release what has waited so long that its lease could end under its send (the oldest of
        each endpoint first: its queue is in the order of the claims)."""
        latest = now - self.longest_wait
        for queues in list(self.waiting.values()):
            for endpoint, queue in list(queues.items()):
                if queue[0].claimed_at < latest:
                    self._drop_waiting_for(endpoint, keep=lambda held: held.claimed_at >= latest)

    def release_waiting(self) -> int:
        """Give back everything waiting (stopping); answers how many."""
        count = 0
        for endpoint in self.waiting_endpoints():
            count += self._drop_waiting_for(endpoint)
        return count

    # -- inside ------------------------------------------------------------------------------------

    def _heed(self, outgoing: Outgoing, outcome: Outcome, started: float, now: float) -> None:
        """What the answer says about the endpoint's limit and pause."""
        limit = self._limit_of(outgoing)
        if outcome.delivered:
            limit.window = min(limit.configured, limit.window + 1)
            limit.slow_downs = 0
            limit.quick = limit.quick or now - started < SLOW_AFTER
            return
        if outcome.status_code in SLOW_DOWN or outcome.status_code is None:
            limit.quick = False
            if started >= limit.decreased_at:  # one halving per round of sends, not per send
                limit.window = max(1, limit.window // 2)
                limit.decreased_at = now
        if outcome.status_code in SLOW_DOWN:
            if outcome.retry_after is not None:
                pause = outcome.retry_after
            else:
                pause = min(MAX_PAUSE_UNASKED, FIRST_PAUSE * 2**limit.slow_downs)
            limit.slow_downs += 1
            limit.paused_until = max(limit.paused_until, now + pause)
            self._drop_waiting_for(outgoing.endpoint_id)

    def _limit_of(self, outgoing: Outgoing) -> Limit:
        """The endpoint's limit, its configured concurrency as the latest claim read it."""
        limit = self.limits.get(outgoing.endpoint_id)
        if limit is None:
            configured = max(1, outgoing.concurrency)
            limit = self.limits[outgoing.endpoint_id] = Limit(
                configured, min(configured, self.shares.endpoint)
            )
        elif limit.configured != outgoing.concurrency:
            limit.configured = max(1, outgoing.concurrency)
            limit.window = min(limit.window, limit.configured)
        return limit

    def _most(self, endpoint: uuid.UUID) -> int:
        limit = self.limits.get(endpoint)
        return limit.most if limit else self.shares.endpoint

    def _fair_most(self, endpoint: uuid.UUID) -> int:
        return min(self.shares.endpoint, self._most(endpoint))

    def _paused(self, now: float) -> list[uuid.UUID]:
        return [endpoint for endpoint, limit in self.limits.items() if limit.paused_until > now]

    def _is_quick(self, endpoint: uuid.UUID) -> bool:
        """It answered quickly lately and is not slow: it may be lent places."""
        limit = self.limits.get(endpoint)
        return limit is not None and limit.quick and endpoint not in self.slow

    def _is_paused(self, endpoint: uuid.UUID, now: float) -> bool:
        limit = self.limits.get(endpoint)
        return limit is not None and limit.paused_until > now

    def _may_borrow_more(self, endpoint: uuid.UUID, now: float) -> bool:
        """Quick, not paused nor gone, and holding less than its own limit's room."""
        return (
            self._is_quick(endpoint)
            and endpoint not in self.gone
            and not self._is_paused(endpoint, now)
            and self.held_by_endpoint[endpoint] < self.limits[endpoint].most * CLAIM_AHEAD
        )

    def _has_half_room(self, key: uuid.UUID) -> bool:
        """Whether an endpoint or company left out of a fruitless claim has freed half its room."""
        if key in self.held_by_endpoint or key in self.limits:
            return self.held_by_endpoint[key] <= self._most(key) * CLAIM_AHEAD // 2
        if key in self.held_by_company:
            return self.held_by_company[key] <= self.shares.company * CLAIM_AHEAD // 2
        return True  # holds nothing here now

    def _supply_by_company(self) -> Counter[uuid.UUID]:
        """What each company holds here, less its slow endpoints' sends in flight: the deliveries
        that keep its sends going, which its room for claims bounds."""
        supply = Counter(self.held_by_company)
        supply.subtract(
            outgoing.company_id
            for outgoing, _started in self.sending.values()
            if outgoing.endpoint_id in self.slow
        )
        return supply

    def _company_full(self, company: uuid.UUID, supply: Counter[uuid.UUID]) -> bool:
        return supply[company] >= self.shares.company * CLAIM_AHEAD

    def _endpoint_full(self, endpoint: uuid.UUID, slow_waiting: Counter[uuid.UUID], most: int) -> bool:
        if self.held_by_endpoint[endpoint] >= most * CLAIM_AHEAD:
            return True
        company = self.slow.company_of(endpoint)
        if company is None:
            return False
        # A slow endpoint: one delivery waiting at most, and its company's slow ones half its room.
        return bool(self._waiting_for(endpoint)) or slow_waiting[company] >= self._slow_room

    @property
    def _slow_room(self) -> int:
        return self.shares.company * CLAIM_AHEAD // 2

    def _slow_waiting_by_company(self) -> Counter[uuid.UUID]:
        """Per company, its slow endpoints that have a delivery waiting here."""
        return Counter(
            company
            for endpoint in self.held_by_endpoint
            if self._waiting_for(endpoint) and (company := self.slow.company_of(endpoint)) is not None
        )

    def _waiting_for(self, endpoint: uuid.UUID) -> int:
        return self.held_by_endpoint[endpoint] - self.sending_by_endpoint[endpoint]

    def _note_slow_sends(self, now: float) -> None:
        """Mark the endpoints of sends in flight for SLOW_AFTER as slow, and release what each holds
        waiting beyond its oldest delivery: that could not start before its slow sends end."""
        newly = {
            outgoing.endpoint_id: outgoing.company_id
            for outgoing, started in self.sending.values()
            if now - started >= SLOW_AFTER
        }
        if self.slow.forget_idle(self.held_by_endpoint, self.lease, now):
            self.limits = {
                endpoint: limit
                for endpoint, limit in self.limits.items()
                if endpoint in self.held_by_endpoint or limit.paused_until > now
            }
        for endpoint, company in list(newly.items()):
            if endpoint in self.slow:
                del newly[endpoint]
            self.slow.mark(endpoint, company, now)  # marked, or the mark renewed
        for endpoint in newly:
            oldest = self._oldest_waiting(endpoint)
            if oldest is not None:
                self._drop_waiting_for(endpoint, keep=oldest.__eq__)

    def _start_fairly(self, now: float) -> Outgoing | None:
        turn = sorted(
            (company for company in self.waiting if self.sending_by_company[company] < self.shares.company),
            key=lambda company: self.sending_by_company[company],
        )
        for company in turn:
            slow_lane_full = self._slow_sends_of(company) >= self.shares.slow

            def may_start(endpoint: uuid.UUID, slow_lane_full: bool = slow_lane_full) -> bool:
                return (
                    self.sending_by_endpoint[endpoint] < self._fair_most(endpoint)
                    and not (slow_lane_full and endpoint in self.slow)
                    and not self._is_paused(endpoint, now)
                )

            held = self._pick(company, may_start)
            if held is not None:
                return self._start(held, now)
        return None

    def _start_lent(self, now: float) -> Outgoing | None:
        """A place no delivery can take within the shares: lent to a quick endpoint below its limit."""
        for company in sorted(self.waiting, key=lambda company: self.sending_by_company[company]):
            held = self._pick(
                company,
                lambda endpoint: (
                    self._is_quick(endpoint)
                    and self.sending_by_endpoint[endpoint] < self._most(endpoint)
                    and not self._is_paused(endpoint, now)
                ),
            )
            if held is not None:
                return self._start(held, now)
        return None

    def _pick(self, company: uuid.UUID, may_start: Callable[[uuid.UUID], bool]) -> Held | None:
        """The company's delivery whose endpoint may start one and has the fewest sends in flight,
        one that is not slow first, then the oldest claim."""
        queues = self.waiting[company]
        endpoints = [endpoint for endpoint in queues if may_start(endpoint)]
        if not endpoints:
            return None
        endpoint = min(
            endpoints,
            key=lambda endpoint: (
                self.sending_by_endpoint[endpoint],
                endpoint in self.slow,
                queues[endpoint][0].order,
            ),
        )
        return queues[endpoint][0]

    def _start(self, held: Held, now: float) -> Outgoing:
        outgoing = held.outgoing
        company, endpoint = outgoing.company_id, outgoing.endpoint_id
        queues = self.waiting.pop(company)
        queues[endpoint].popleft()  # `_pick` answers the head of its endpoint's queue
        if not queues[endpoint]:
            del queues[endpoint]
        if queues:
            self.waiting[company] = queues  # to the back of the turn
        self.sending[outgoing.delivery_id] = (outgoing, now)
        self.sending_by_company[company] += 1
        self.sending_by_endpoint[endpoint] += 1
        return outgoing

    def _slow_sends_of(self, company: uuid.UUID) -> int:
        if not self.slow.of_companies({company}):
            return 0
        return sum(
            1
            for outgoing, _started in self.sending.values()
            if outgoing.company_id == company and outgoing.endpoint_id in self.slow
        )

    def _oldest_waiting(self, endpoint: uuid.UUID) -> Held | None:
        for queues in self.waiting.values():
            if endpoint in queues:
                return queues[endpoint][0]
        return None

    def _drop_waiting_for(self, endpoint: uuid.UUID, keep: Callable[[Held], bool] | None = None) -> int:
        """Give back what waits for the endpoint (but what `keep` keeps); answers how many."""
        for company, queues in list(self.waiting.items()):
            queue = queues.get(endpoint)
            if queue is None:
                continue
            kept = deque(held for held in queue if keep is not None and keep(held))
            dropped = len(queue) - len(kept)
            for held in queue:
                if keep is None or not keep(held):
                    self._let_go(held.outgoing)
                    self.to_release.append(held.outgoing.delivery_id)
            if kept:
                queues[endpoint] = kept
            else:
                del queues[endpoint]
            if not queues:
                del self.waiting[company]
            return dropped
        return 0

    def _let_go(self, outgoing: Outgoing) -> None:
        _less(self.held_by_company, outgoing.company_id)
        _less(self.held_by_endpoint, outgoing.endpoint_id)


def _less(counter: Counter[uuid.UUID], key: uuid.UUID) -> None:
    """One fewer; a key at zero leaves (the counters list only what is held)."""
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]
