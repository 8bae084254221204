"""The webhook worker's scheduling policy on its own: no database, no event loop, the clock given.
Each test claims deliveries into a `Scheduler`, asks what starts, and reports how sends end."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import UTC, datetime

from outfitter.webhooks.sender import Outcome, Outgoing
from outfitter.worker.endpoints import SLOW_MEMORY, SlowEndpoints
from outfitter.worker.scheduling import CLAIM_AHEAD, SLOW_AFTER, Claim, Scheduler

OK = Outcome(datetime(2026, 12, 7, tzinfo=UTC), 200, None, 5)
A, B = uuid.UUID(int=0xA), uuid.UUID(int=0xB)


def outgoing(company: uuid.UUID, endpoint: uuid.UUID, concurrency: int = 16) -> Outgoing:
    url = "https://example.com/"
    return Outgoing(uuid.uuid4(), company, endpoint, url, uuid.uuid4(), {}, (), concurrency)


def answer(status: int | None, retry_after: float | None = None) -> Outcome:
    return Outcome(OK.attempted_at, status, None if status == 200 else "failed", 5, retry_after)


def scheduler(concurrency: int = 8) -> Scheduler:
    return Scheduler(concurrency, lease=60.0, longest_wait=30.0, poll=1.0, now=0.0)


def hold(policy: Scheduler, *deliveries: Outgoing, now: float = 0.0) -> None:
    """As a claim would bring them (a lending one: no share sends any back)."""
    policy.take(Claim(len(deliveries), (), (), lending=True, left_out=True), deliveries, now)


def by_company(started: list[Outgoing]) -> Counter[uuid.UUID]:
    return Counter(outgoing.company_id for outgoing in started)


def by_endpoint(started: list[Outgoing]) -> Counter[uuid.UUID]:
    return Counter(outgoing.endpoint_id for outgoing in started)


def warm(
    policy: Scheduler, company: uuid.UUID, endpoint: uuid.UUID, *, answers: int, concurrency: int = 16
) -> None:
    """`answers` quick 2xx from the endpoint, one send at a time: it is known to answer quickly, and
    its window has grown by as many."""
    for _ in range(answers):
        hold(policy, outgoing(company, endpoint, concurrency))
        (started,) = policy.starts(0.0)
        policy.ended(started, OK, 0.01)


def test_two_companies_waiting_share_the_places_evenly() -> None:
    policy = scheduler(concurrency=4)  # a company 2 places, an endpoint 1
    a1, a2, b1, b2 = (uuid.uuid4() for _ in range(4))
    hold(policy, *[outgoing(A, endpoint) for endpoint in (a1, a2) for _ in range(4)])
    hold(policy, *[outgoing(B, endpoint) for endpoint in (b1, b2) for _ in range(4)], now=1.0)
    started = policy.starts(1.0)
    assert by_company(started) == {A: 2, B: 2}  # B's, claimed later, are not behind A's
    assert set(by_endpoint(started).values()) == {1}
    policy.ended(started[0], OK, 1.1)  # a place frees: to the company with fewer in flight
    (next_one,) = policy.starts(1.1)
    assert next_one.company_id == started[0].company_id


def test_a_freed_place_goes_to_the_company_with_fewest_sends_even_if_others_borrowed() -> None:
    policy = scheduler(concurrency=8)
    endpoint = uuid.uuid4()
    warm(policy, A, endpoint, answers=8)
    hold(policy, *[outgoing(A, endpoint) for _ in range(16)])
    assert len(policy.starts(0.0)) == 8  # alone: every place, lent beyond its company's 4
    late = uuid.uuid4()
    hold(policy, *[outgoing(B, late) for _ in range(4)], now=0.5)
    assert policy.starts(0.5) == []  # no place is free: a lent place is not taken back mid-send
    sends_of_a = [sent for sent, _ in policy.sending.values()]
    restarted: list[Outgoing] = []
    for sent in sends_of_a[:4]:
        policy.ended(sent, OK, 0.6)
        restarted += policy.starts(0.6)
    # B takes its endpoint's share (2 of 8) first; A, quick, is lent the rest.
    assert by_company(restarted) == {B: 2, A: 2}
    assert [sent.company_id for sent in restarted[:2]] == [B, B]


def test_a_lone_quick_endpoint_is_lent_every_place_but_no_more_than_its_own_concurrency() -> None:
    policy = scheduler(concurrency=8)  # an endpoint's share: 2
    lone, limited = uuid.uuid4(), uuid.uuid4()
    warm(policy, A, lone, answers=10)
    hold(policy, *[outgoing(A, lone) for _ in range(20)])
    assert len(policy.starts(0.0)) == 8

    policy = scheduler(concurrency=8)
    warm(policy, A, limited, answers=10, concurrency=3)
    hold(policy, *[outgoing(A, limited, concurrency=3) for _ in range(20)])
    assert len(policy.starts(0.0)) == 3  # the company set 3
    assert len(policy.sending) == 3


def test_an_endpoint_not_yet_known_to_answer_quickly_keeps_its_share() -> None:
    """A receiver that has not answered yet may never answer: it is lent nothing, so that it cannot
    hold every place while another company's deliveries wait for one."""
    policy = scheduler(concurrency=8)
    hold(policy, *[outgoing(A, uuid.UUID(int=1)) for _ in range(16)])
    assert len(policy.starts(0.0)) == 2


def test_a_slow_endpoint_is_lent_nothing_and_keeps_one_delivery_waiting() -> None:
    policy = scheduler(concurrency=8)
    endpoint = uuid.uuid4()
    warm(policy, A, endpoint, answers=8)
    hold(policy, *[outgoing(A, endpoint) for _ in range(16)])
    assert len(policy.starts(0.0)) == 8
    policy.claim(SLOW_AFTER)  # a claim marks the endpoints of sends open SLOW_AFTER as slow
    assert endpoint in policy.slow
    assert len(policy.releases()) == 16 - 8 - 1  # what waits beyond its oldest goes back
    for sent, _ in list(policy.sending.values())[:4]:
        policy.ended(sent, OK, SLOW_AFTER + 0.5)
    # Quick again, but within SLOW_MEMORY of its slow sends: slow, so its one waiting delivery
    # starts within its share (2), which its 4 sends in flight already exceed.
    assert policy.starts(SLOW_AFTER + 0.5) == []


def test_a_company_s_slow_endpoints_send_in_half_its_places() -> None:
    policy = scheduler(concurrency=8)  # a company 4 places, its slow endpoints 2 together
    slow = [uuid.uuid4() for _ in range(3)]
    healthy = uuid.uuid4()
    for endpoint in slow:
        policy.slow.mark(endpoint, A, 0.0)
    hold(policy, *[outgoing(A, endpoint) for endpoint in slow])
    hold(policy, *[outgoing(A, healthy) for _ in range(4)])
    started = policy.starts(0.0)
    assert by_endpoint(started)[healthy] == 2 and sum(by_endpoint(started)[e] for e in slow) == 2


def test_a_429_with_retry_after_pauses_the_endpoint_and_sends_back_what_waits() -> None:
    policy = scheduler(concurrency=8)
    endpoint = uuid.uuid4()
    hold(policy, *[outgoing(A, endpoint) for _ in range(4)], now=10.0)  # its share (2) x 2
    first, second = policy.starts(10.0)
    policy.ended(first, answer(429, retry_after=5.0), 10.1)
    assert len(policy.releases()) == 2  # its waiting deliveries, for any worker after the pause
    policy.ended(second, OK, 10.1)  # one already on its way when the 429 came
    assert policy.next_wake(10.1) == 5.0  # the worker looks again when the pause ends
    claim = policy.claim(11.0)
    assert claim is not None and endpoint in claim.exclude_endpoints and claim.left_out
    hold(policy, outgoing(A, endpoint), now=11.0)  # a claim that ran meanwhile: sent back too
    assert policy.releases() and policy.starts(11.0) == []
    claim = policy.claim(15.2)
    assert claim is not None and endpoint not in claim.exclude_endpoints
    hold(policy, outgoing(A, endpoint), now=15.2)
    assert len(policy.starts(15.2)) == 1


def test_a_429_or_503_without_retry_after_pauses_one_second_then_twice_as_long() -> None:
    policy = scheduler(concurrency=8)
    endpoint = uuid.uuid4()
    pauses = []
    for at, status in ((0.0, 503), (10.0, 429), (20.0, 429)):
        hold(policy, outgoing(A, endpoint), now=at)
        (sent,) = policy.starts(at)
        policy.ended(sent, answer(status), at)
        pauses.append(policy.next_wake(at))
    assert pauses == [1.0, 2.0, 4.0]
    hold(policy, outgoing(A, endpoint), now=30.0)
    (sent,) = policy.starts(30.0)
    policy.ended(sent, OK, 30.0)  # a 2xx ends the run of them
    hold(policy, outgoing(A, endpoint), now=40.0)
    (sent,) = policy.starts(40.0)
    policy.ended(sent, answer(503), 40.0)
    assert policy.next_wake(40.0) == 1.0


def test_the_window_halves_once_for_a_round_of_failures_and_grows_with_each_2xx() -> None:
    policy = scheduler(concurrency=16)  # an endpoint's share: 4
    endpoint = uuid.uuid4()
    warm(policy, A, endpoint, answers=8)
    assert policy.limits[endpoint].window == 12
    hold(policy, *[outgoing(A, endpoint) for _ in range(12)])
    started = policy.starts(1.0)
    assert len(started) == 12
    for sent in started:  # all refused together: one halving, not twelve
        policy.ended(sent, answer(None), 1.2)
    assert policy.limits[endpoint].window == 6
    hold(policy, *[outgoing(A, endpoint) for _ in range(12)], now=1.2)
    # No quick answer since: it keeps its share (4), below its window.
    assert len(policy.starts(1.2)) == 4


def test_a_410_sends_back_what_waits_and_claims_leave_the_endpoint_out_until_recorded() -> None:
    policy = scheduler(concurrency=4)
    endpoint = uuid.uuid4()
    hold(policy, *[outgoing(A, endpoint) for _ in range(3)])
    (sent,) = policy.starts(0.0)
    policy.ended(sent, answer(410), 0.1)
    assert len(policy.releases()) == 2
    claim = policy.claim(0.2)
    assert claim is not None and endpoint in claim.exclude_endpoints
    policy.recorded_gone(endpoint)
    recorded = set(policy.gone_recorded)
    policy.claimed([(claim, 0)], recorded, 0.3)
    claim = policy.claim(2.0)
    assert claim is not None and endpoint not in claim.exclude_endpoints  # disabled: the database's


def test_a_company_holding_its_share_is_left_out_and_the_rest_lent_when_nothing_else_is_due() -> None:
    policy = scheduler(concurrency=8)  # a company holds up to 8 (4 places x CLAIM_AHEAD)
    endpoint = uuid.uuid4()
    warm(policy, A, endpoint, answers=8)
    hold(policy, *[outgoing(A, endpoint) for _ in range(8)])
    first = policy.claim(1.0)
    assert first is not None and first.exclude_companies == (A,) and not first.lending
    lent = policy.lend(first, found=0, now=1.0)  # nothing else due: the rest of the room, to A's
    assert lent is not None and lent.lending and lent.exclude_companies == ()
    assert lent.limit == 8 * CLAIM_AHEAD - 8  # the worker's room (its window, 10, allows 12 more)
    assert policy.lend(first, found=first.limit, now=1.0) is None  # others were due: no lending


def test_a_fruitless_claim_is_not_repeated_until_what_it_left_out_frees_half_its_room() -> None:
    policy = scheduler(concurrency=8)
    endpoint = uuid.uuid4()
    # Its share (2) x CLAIM_AHEAD, and its company set 2: its limit stays 2 however it answers.
    hold(policy, *[outgoing(A, endpoint, concurrency=2) for _ in range(4)])
    started = policy.starts(0.0)
    first = policy.claim(0.0)
    assert first is not None and endpoint in first.exclude_endpoints
    policy.claimed([(first, 0)], (), 0.0)
    policy.ended(started[0], OK, 0.1)
    assert policy.claim(0.1) is None  # one send ended: 3 held of 4
    policy.ended(started[1], OK, 0.2)
    assert policy.claim(0.2) is not None  # half its room free
    policy.claimed([(first, 0)], (), 0.2)
    assert policy.claim(1.3) is not None  # or the poll has passed


def test_what_waited_too_long_goes_back_before_anything_starts() -> None:
    policy = scheduler(concurrency=1)
    endpoint = uuid.uuid4()
    hold(policy, *[outgoing(A, endpoint) for _ in range(3)], now=0.0)
    (sent,) = policy.starts(0.0)
    policy.ended(sent, OK, 31.0)
    assert policy.starts(31.0) == []  # claimed 31 s ago, with 30 s of waiting allowed
    assert len(policy.releases()) == 2 and policy.held == 0


def test_a_cancelled_send_goes_back() -> None:
    policy = scheduler(concurrency=2)
    hold(policy, outgoing(A, uuid.uuid4()))
    (sent,) = policy.starts(0.0)
    policy.ended(sent, None, 0.5)
    assert policy.releases() == [sent.delivery_id] and policy.held == 0 and not policy.sending


def test_slow_marks_are_forgotten_only_when_idle_for_a_lease() -> None:
    """The marks stay as few as the endpoints slow lately: one with nothing held is forgotten after
    a lease's time, one with deliveries held is kept."""
    company, held, idle = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    marks = SlowEndpoints(now=0.0)
    marks.mark(held, company, 50.0)
    marks.mark(idle, company, 0.0)
    marks.forget_idle({held}, after=60, now=10.0)  # marked lately: both kept
    assert held in marks and idle in marks
    marks.forget_idle({held}, after=60, now=61.0)  # a lease has passed
    assert held in marks and idle not in marks
    assert marks.of_companies({company}) == [held]
    marks.answered_quickly(held, 62.0)  # one quick answer soon after a slow one: still slow
    assert held in marks


def test_a_slow_mark_ends_with_a_quick_answer_a_while_after_the_last_slow_one() -> None:
    endpoint = uuid.uuid4()
    marks = SlowEndpoints(now=0.0)
    marks.mark(endpoint, uuid.uuid4(), 0.0)
    marks.answered_quickly(endpoint, SLOW_MEMORY - 0.1)
    assert endpoint in marks
    marks.answered_quickly(endpoint, SLOW_MEMORY)
    assert endpoint not in marks and marks.company_of(endpoint) is None
