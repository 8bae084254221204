"""Webhooks drain as fast as the receiver allows: a lone endpoint that answers quickly is lent every
place of the worker, never more than the concurrency its company set (through the API), and a 429
or 503 with Retry-After holds the endpoint's next attempts back. Fairness between companies that
both wait is in test_worker.py."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from outfitter.config import Settings
from outfitter.models import DeliveryStatus, EventType
from tests.factories import Api
from tests.webhooks.conftest import attempts, deliveries, emit, make_worker, register
from tests.webhooks.receiver import Receiver, running_receiver
from tests.webhooks.test_worker import received, serving


def patient(settings: Settings) -> Settings:
    """No send ends at its deadline while the receiver holds it: each request the receiver holds is
    one the worker still has in flight."""
    return settings.model_copy(update={"webhook_timeout_seconds": 60})


def test_a_lone_endpoint_is_lent_every_place_of_the_worker(
    api: Api, private_ok: Settings, engine: Engine, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker of 4 places gives an endpoint 1 of them when others wait (a company half, an
    endpoint half of that). Alone, an endpoint that has answered quickly gets all 4: the receiver
    answers its first 6 requests at once and holds the rest, and 4 are then open at once. Before,
    one send at a time went to it however long the queue."""
    # "Quick" and "slow" are the machine's seconds: on a loaded one the first held send could turn
    # slow before the worker starts the others. Slowness has tests of its own (test_scheduling).
    monkeypatch.setattr("outfitter.worker.scheduling.SLOW_AFTER", 20.0)
    with running_receiver() as receiver:
        receiver.hold = threading.Event()
        receiver.hold_after = 6
        register(api, receiver.url)
        emit(engine, api.company_id, *[EventType.EMPLOYEE_UPDATED] * 14)
        runner = make_worker(engine, patient(private_ok), concurrency=4)
        with serving(runner, receiver.hold):
            assert received(receiver, 6 + 4, seconds=30) == 6 + 4
            time.sleep(0.5)  # a fifth would have arrived by now if the worker sent one
            assert len(receiver.received) == 10 and receiver.in_flight == 4
        assert receiver.most_in_flight == 4


def test_an_endpoint_never_has_more_sends_in_flight_than_its_company_set(
    api: Api, private_ok: Settings, engine: Engine, db: Session
) -> None:
    """Concurrency 3 on the endpoint (POST), in a worker of 8 places: 3 held at once at most, then
    2 after a PATCH; every delivery arrives in the end."""
    with running_receiver() as receiver:
        receiver.hold = threading.Event()
        receiver.hold_after = 6
        endpoint = register(api, receiver.url, concurrency=3)
        assert endpoint["concurrency"] == 3
        emit(engine, api.company_id, *[EventType.EMPLOYEE_UPDATED] * 20)
        runner = make_worker(engine, patient(private_ok), concurrency=8)
        with serving(runner, receiver.hold):
            assert received(receiver, 6 + 3, seconds=30) == 6 + 3
            time.sleep(0.5)
            assert len(receiver.received) == 9 and receiver.most_in_flight == 3
            patched = api.patch(f"/client/webhook-endpoints/{endpoint['id']}", {"concurrency": 2})
            assert patched.status_code == 200 and patched.json()["data"]["concurrency"] == 2
            receiver.most_in_flight = 0
            receiver.hold_after = 10**6  # answer everything at once from now on
            receiver.hold.set()
            assert received(receiver, 20, seconds=30) == 20
        assert receiver.most_in_flight <= 3
    rows = deliveries(db)
    assert [row.status for row in rows] == [DeliveryStatus.SUCCEEDED] * 20


def test_a_429_with_retry_after_holds_back_the_endpoint_s_next_attempts(
    api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, db: Session
) -> None:
    """The first request is answered 429 with `Retry-After: 2`: no request reaches the endpoint for
    2 s after it (the retry schedule here says at once), then every delivery arrives; the delivery
    that met the 429 was retried no sooner either. Its log shows the 429."""
    receiver.script = [429]
    receiver.retry_after = "2"
    endpoint = register(api, receiver.url)
    emit(engine, api.company_id, *[EventType.EMPLOYEE_UPDATED] * 3)
    runner = make_worker(engine, private_ok, concurrency=4)
    try:
        deadline = time.monotonic() + 30
        pending = [DeliveryStatus.PENDING]
        while time.monotonic() < deadline and pending in ([row.status] for row in deliveries(db)):
            runner.run_once(jobs=False)
    finally:
        runner.close()
    assert [row.status for row in deliveries(db)] == [DeliveryStatus.SUCCEEDED] * 3
    first, *after = receiver.arrived_at
    assert len(after) == 3 and min(after) - first >= 2.0, [at - first for at in after]
    (refused,) = [row for row in deliveries(db) if row.attempts == 2]
    tried = attempts(db, refused.id)
    assert [attempt.status_code for attempt in tried] == [429, 200]
    assert (tried[1].attempted_at - tried[0].attempted_at).total_seconds() >= 2.0
    log = api.get(f"/client/webhook-endpoints/{endpoint['id']}/deliveries").json()["data"]["data"]
    assert sorted(row["attempts"] for row in log) == [1, 1, 2]
