"""The worker: many share the work without doing it twice, a killed one loses nothing, shutdown
finishes or releases what it holds, and one worker of many runs each round of the periodic jobs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select, text, update
from sqlalchemy.orm import Session
from standardwebhooks import Webhook

from outfitter.config import Settings
from outfitter.db.base import utcnow
from outfitter.db.session import make_engine, make_sessionmaker
from outfitter.db.tenancy import TenantSession, bind_company
from outfitter.models import (
    DeliveryStatus,
    EventType,
    PaymentAnomaly,
    Transaction,
    TransactionStatus,
    WebhookAttempt,
    WebhookDelivery,
    WorkerJob,
)
from outfitter.outbox import NewEvent, record_events
from outfitter.worker import Worker
from outfitter.worker.jobs import JOBS, claim_job, finish_job
from tests.factories import Api, load_demo_catalog
from tests.payments.conftest import card_body, prices
from tests.people.helpers import create_employee
from tests.webhooks.conftest import attempts, count, deliveries, emit, make_worker, register
from tests.webhooks.receiver import Receiver, event_data


def test_two_workers_racing_over_1000_deliveries_send_each_once(
    postgres_only: None, api: Api, private_ok: Settings, receiver: Receiver, database_url: str, db: Session
) -> None:
    register(api, receiver.url)
    engine = make_engine(database_url, pool_size=24, max_overflow=0)
    try:
        with TenantSession(engine) as session, session.begin():
            bind_company(session, api.company_id)
            data = event_data(EventType.EMPLOYEE_UPDATED)
            events = [NewEvent(EventType.EMPLOYEE_UPDATED, uuid.uuid4(), data) for _ in range(1000)]
            ids = record_events(session, events)
        workers = [make_worker(engine, private_ok, concurrency=8, name=f"racer-{n}") for n in range(2)]
        done: list[int] = []
        threads = [threading.Thread(target=lambda w=w: done.append(w.run_once(jobs=False))) for w in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        for runner in workers:
            runner.close()
    finally:
        engine.dispose()
    assert sum(done) == 1000
    received = receiver.ids()
    assert len(received) == 1000 and set(received) == {str(event_id) for event_id in ids}
    rows = deliveries(db)
    assert {row.status for row in rows} == {DeliveryStatus.SUCCEEDED} and {row.attempts for row in rows} == {
        1
    }
    by_worker = {name for (name,) in db.execute(select(WebhookAttempt.worker).distinct())}
    codes = {code for (code,) in db.execute(select(WebhookAttempt.status_code).distinct())}
    db.commit()
    assert codes == {200}
    assert by_worker == {"racer-0", "racer-1"}  # both took a share


def test_a_killed_worker_loses_nothing(
    postgres_only: None,
    api: Api,
    private_ok: Settings,
    receiver: Receiver,
    engine: Engine,
    database_url: str,
    db: Session,
) -> None:
    """`outfitter worker` claims the delivery and is SIGKILLed while the receiver is still answering:
    nothing is recorded, its lease expires, and another worker sends it (the same webhook-id)."""
    register(api, receiver.url)
    receiver.hold = threading.Event()
    (event_id,) = emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
    env = {
        **os.environ,
        "OUTFITTER_DATABASE_URL": database_url,
        "OUTFITTER_WEBHOOK_ALLOW_PRIVATE": "true",
        "OUTFITTER_WORKER_LEASE_SECONDS": "3",  # with a deadline of 1 s, not raised (two deadlines)
        "OUTFITTER_WEBHOOK_TIMEOUT_SECONDS": "1",
        "OUTFITTER_RATE_LIMIT": "off",
    }
    outfitter = Path(sys.executable).parent / "outfitter"
    process = subprocess.Popen([str(outfitter), "worker", "--concurrency", "2"], env=env)
    try:
        assert receiver.arrived.wait(timeout=60), "the worker never sent the delivery"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    (delivery,) = deliveries(db)
    assert delivery.status == DeliveryStatus.PENDING and delivery.claimed_by and delivery.attempts == 0
    held, receiver.hold = receiver.hold, None
    held.set()

    survivor = make_worker(engine, private_ok.model_copy(update={"worker_lease_seconds": 3}))
    try:
        assert survivor.run_once(jobs=False) == 0  # the dead worker's lease still stands
        deadline = time.monotonic() + 15
        while survivor.run_once(jobs=False) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        survivor.close()
    assert receiver.ids() == [str(event_id), str(event_id)]  # at least once; dedupe by webhook-id
    (delivery,) = deliveries(db)
    assert delivery.status == DeliveryStatus.SUCCEEDED and delivery.attempts == 1


def test_shutdown_finishes_the_send_in_flight_and_releases_the_queued(
    api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, db: Session
) -> None:
    register(api, receiver.url)
    receiver.hold = threading.Event()
    emit(engine, api.company_id, EventType.EMPLOYEE_CREATED, EventType.EMPLOYEE_UPDATED)
    runner = make_worker(engine, private_ok, concurrency=1)  # claims 2, sends 1 at a time
    thread = threading.Thread(target=runner.run_forever)
    thread.start()
    assert receiver.arrived.wait(timeout=30)
    runner.stop()
    time.sleep(0.3)
    receiver.hold.set()  # the receiver answers the send in flight, within the grace period
    thread.join(timeout=30)
    assert not thread.is_alive()
    (sent_id,) = receiver.ids()
    rows = deliveries(db)
    (sent,) = [row for row in rows if str(row.event_id) == sent_id]
    (queued,) = [row for row in rows if str(row.event_id) != sent_id]
    assert sent.status == DeliveryStatus.SUCCEEDED and sent.claimed_by is None
    assert queued.status == DeliveryStatus.PENDING and queued.claimed_by is None and queued.attempts == 0


def test_one_worker_of_many_runs_each_round_of_a_job(engine: Engine, private_ok: Settings) -> None:
    sessions = make_sessionmaker(engine, TenantSession)
    assert claim_job(sessions, "expire_transactions", "a", interval=60, lease=60)
    assert not claim_job(sessions, "expire_transactions", "b", interval=60, lease=60)  # a holds it
    finish_job(sessions, "expire_transactions", "a")
    assert not claim_job(sessions, "expire_transactions", "b", interval=60, lease=60)  # next round: in 60 s


def test_recording_a_failure_while_its_endpoint_is_deleted_waits_instead_of_deadlocking(
    postgres_only: None, api: Api, private_ok: Settings, engine: Engine, db: Session
) -> None:
    """A DELETE of an endpoint locks it, then its deliveries (the cascade). Recording a batch took
    the deliveries, then the endpoint (a first failure marks it failing): each waited on the other,
    PostgreSQL aborted one, and the DELETE answered 503 (a black-box probe's Schemathesis run).
    Recording now takes the endpoints first: here it waits for the DELETE, then finds nothing left."""
    from outfitter.webhooks.dispatch import record_outcomes
    from outfitter.webhooks.sender import Outcome, Outgoing

    endpoint = register(api, "https://8.8.8.8/hook")
    emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
    [delivery] = deliveries(db)
    outgoing = Outgoing(
        delivery.id, api.company_id, delivery.endpoint_id, endpoint["url"], delivery.event_id, {}, ()
    )
    failed = Outcome(attempted_at=utcnow(), status_code=500, error=None, duration_ms=3)
    errors: list[BaseException] = []

    def record() -> None:
        try:
            record_outcomes(
                make_sessionmaker(engine, TenantSession), "worker-1", [(outgoing, failed)], private_ok
            )
        except BaseException as error:  # reported by the assertion below
            errors.append(error)

    with engine.connect() as deleting:  # the DELETE's transaction, as delete_endpoint runs it
        row = {"id": delivery.endpoint_id}
        deleting.execute(text("SELECT id FROM webhook_endpoints WHERE id = :id FOR UPDATE"), row)
        recorder = threading.Thread(target=record)
        recorder.start()
        blocked = text("SELECT count(*) FROM pg_stat_activity WHERE :pid = ANY(pg_blocking_pids(pid))")
        own_pid = deleting.execute(text("SELECT pg_backend_pid()")).scalar_one()
        deadline = time.monotonic() + 10
        with engine.connect() as watching:
            while not watching.execute(blocked, {"pid": own_pid}).scalar_one():
                assert time.monotonic() < deadline, "the recording never waited for the DELETE"
                time.sleep(0.02)
        deleting.execute(text("DELETE FROM webhook_endpoints WHERE id = :id"), row)  # cascades
        deleting.commit()
    recorder.join(timeout=30)
    assert not recorder.is_alive() and errors == []
    assert api.get(f"/client/webhook-endpoints/{delivery.endpoint_id}").status_code == 404
    assert deliveries(db) == [] and count(db, WebhookAttempt) == 0


def test_racing_workers_claim_a_job_round_once(postgres_only: None, database_url: str) -> None:
    engine = make_engine(database_url, pool_size=10, max_overflow=0)
    sessions = make_sessionmaker(engine, TenantSession)
    wins: list[bool] = []
    barrier = threading.Barrier(8)

    def race(name: str) -> None:
        barrier.wait()
        wins.append(claim_job(sessions, "reconcile_payments", name, interval=60, lease=60))

    threads = [threading.Thread(target=race, args=(f"w{n}",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    engine.dispose()
    assert sorted(wins) == [False] * 7 + [True]


def test_the_expiry_job_expires_and_announces(
    api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, db: Session
) -> None:
    load_demo_catalog(engine)
    buyer = create_employee(api)
    card = api.post(
        "/client/transactions/initiate",
        json=card_body(uuid.UUID(buyer["id"]), prices(api)[0]["asset_pricing"]["id"]),
    )
    assert card.status_code == 200, card.text
    tx_ref = card.json()["data"]["tx_ref"]
    endpoint = register(api, receiver.url, event_types=["transaction.expired"])
    db.execute(update(Transaction).values(expires_at=utcnow().replace(year=2020)))
    db.commit()

    runner = Worker(make_sessionmaker(engine, TenantSession), private_ok, jobs=JOBS[:1])
    try:
        runner.run_due_jobs()
        assert runner.run_once(jobs=False) == 1
    finally:
        runner.close()
    listed = api.get("/client/transactions").json()["data"]["data"]
    assert [(row["tx_ref"], row["status"]) for row in listed] == [(tx_ref, TransactionStatus.EXPIRED.value)]
    (request,) = receiver.received
    payload = Webhook(endpoint["secret"]).verify(request.body, request.headers)
    assert payload["type"] == "transaction.expired" and payload["data"]["tx_ref"] == tx_ref
    assert payload["data"]["status"] == "Expired"
    assert attempts(db, deliveries(db)[0].id)[0].status_code == 200


def _past_expiry_card_transaction(api: Api, engine: Engine, db: Session, paid: bool) -> str:
    """A Pending card transaction past its time to live; if `paid`, the sandbox took its payment
    and its notice never arrived."""
    from decimal import Decimal

    from tests.payments.conftest import record_sandbox_payment

    load_demo_catalog(engine)
    buyer = create_employee(api)
    pricing_id = prices(api)[0]["asset_pricing"]["id"]
    card = api.post("/client/transactions/initiate", json=card_body(uuid.UUID(buyer["id"]), pricing_id))
    assert card.status_code == 200, card.text
    tx_ref: str = card.json()["data"]["tx_ref"]
    transaction = db.scalars(select(Transaction).where(Transaction.tx_ref == tx_ref)).one()
    db.commit()
    if paid:
        record_sandbox_payment(db, tx_ref, str(Decimal(transaction.total_amount)), transaction.currency_code)
    db.execute(update(Transaction).values(expires_at=utcnow().replace(year=2020)))
    db.commit()
    return tx_ref


def test_the_expiry_job_fulfils_a_payment_the_gateway_took_but_never_reported(
    api: Api, private_ok: Settings, engine: Engine, db: Session
) -> None:
    """Past its time to live, a transaction the gateway was paid for (its notice lost) makes its
    order: the job asks the gateway before expiring, as verify does. Money taken is never left as
    an anomaly because the job ran before verify."""
    tx_ref = _past_expiry_card_transaction(api, engine, db, paid=True)
    runner = Worker(make_sessionmaker(engine, TenantSession), private_ok, jobs=JOBS[:1])
    try:
        runner.run_due_jobs()
    finally:
        runner.close()
    verified = api.get(f"/client/transactions/{tx_ref}/verify").json()["data"]
    assert verified["status"] == TransactionStatus.FULFILLED.value and verified["order_id"] is not None
    assert db.scalar(select(func.count()).select_from(PaymentAnomaly)) == 0
    db.commit()


def test_the_expiry_job_expires_nothing_whose_gateway_does_not_answer(
    api: Api, private_ok: Settings, engine: Engine, db: Session
) -> None:
    """Without the gateway's word a transaction may have been paid: it stays Pending, and the next
    run that hears from the gateway settles it."""
    from outfitter.payments.gateways import GatewayRegistry
    from outfitter.payments.gateways.base import GatewayError

    class Unreachable:
        name = "sandbox"

        def fetch_payment(self, tx_ref: str) -> None:
            raise GatewayError("connection refused")

    tx_ref = _past_expiry_card_transaction(api, engine, db, paid=False)
    sessions = make_sessionmaker(engine, TenantSession)
    down = GatewayRegistry(private_ok, sessions)
    down.put(Unreachable())  # type: ignore[arg-type]
    for gateways in (down, None):
        runner = Worker(sessions, private_ok, jobs=JOBS[:1], gateways=gateways)
        try:
            runner.run_due_jobs()
        finally:
            runner.close()
        listed = api.get("/client/transactions").json()["data"]["data"]
        status = TransactionStatus.PENDING if gateways is down else TransactionStatus.EXPIRED
        assert [(row["tx_ref"], row["status"]) for row in listed] == [(tx_ref, status.value)]
        db.execute(update(WorkerJob).values(next_run_at=utcnow()))  # the next round is due now
        db.commit()


def test_a_slow_receiver_does_not_hold_up_the_others(
    api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, db: Session
) -> None:
    from tests.webhooks.receiver import running_receiver

    register(api, receiver.url, event_types=["employee.created"])
    receiver.hold = threading.Event()  # this receiver never answers until the end
    with running_receiver() as fast:
        register(api, fast.url, event_types=["employee.updated"])
        emit(engine, api.company_id, *[EventType.EMPLOYEE_CREATED] * 6, *[EventType.EMPLOYEE_UPDATED] * 3)
        runner = make_worker(engine, private_ok, concurrency=4)  # one send per endpoint at most
        with serving(runner, receiver.hold):
            assert received(fast, 3, seconds=20) == 3
            assert len(receiver.received) == 1  # the slow one holds one send, not the company's two


def test_the_reconcile_job_settles_a_paid_card_payment(
    api: Api, private_ok: Settings, engine: Engine, db: Session
) -> None:
    """The worker runs payments' reconciliation: a card payment the gateway has (its webhook lost)
    is fulfilled without anyone calling verify."""
    from decimal import Decimal

    from tests.payments.conftest import record_sandbox_payment

    load_demo_catalog(engine)
    buyer = create_employee(api)
    pricing_id = prices(api)[0]["asset_pricing"]["id"]
    card = api.post("/client/transactions/initiate", json=card_body(uuid.UUID(buyer["id"]), pricing_id))
    assert card.status_code == 200, card.text
    tx_ref = card.json()["data"]["tx_ref"]
    transaction = db.scalars(select(Transaction).where(Transaction.tx_ref == tx_ref)).one()
    db.commit()
    record_sandbox_payment(db, tx_ref, str(Decimal(transaction.total_amount)), transaction.currency_code)

    runner = Worker(make_sessionmaker(engine, TenantSession), private_ok, jobs=JOBS[1:])
    try:
        runner.run_due_jobs()
    finally:
        runner.close()
    listed = api.get("/client/transactions").json()["data"]["data"]
    assert [(row["tx_ref"], row["status"]) for row in listed] == [(tx_ref, TransactionStatus.FULFILLED.value)]


def test_a_companys_slow_endpoints_do_not_hold_up_another_company(
    api: Api, other_api: Api, private_ok: Settings, engine: Engine, db: Session
) -> None:
    """Company A has two endpoints on a receiver that never answers (until the end) and a backlog
    older than anything of company B. While every send of A is still held, all of B's arrive: B's
    deliveries never queue behind A's sends, and A holds at most half of the worker's sends."""
    from tests.webhooks.receiver import running_receiver

    with running_receiver() as slow, running_receiver() as fast:
        slow.hold = threading.Event()
        register(api, slow.url, event_types=["employee.created"])
        register(api, slow.url + "/second", event_types=["employee.created"])
        register(other_api, fast.url)
        emit(engine, api.company_id, *[EventType.EMPLOYEE_CREATED] * 8)  # 16 deliveries, the oldest
        emit(engine, other_api.company_id, *[EventType.EMPLOYEE_UPDATED] * 3)
        runner = make_worker(engine, private_ok, concurrency=4)
        with serving(runner, slow.hold):
            assert received(fast, 3, seconds=30) == 3  # all of B's, while A's sends are all still held:
            assert not slow.hold.is_set() and count_attempts(db, api.company_id) == 0  # none of A's ended
            assert 1 <= len(slow.received) <= 2  # A holds half of the 4 sends at most


def test_a_companys_slow_endpoints_do_not_hold_up_its_healthy_one(
    api: Api, private_ok: Settings, engine: Engine, db: Session
) -> None:
    """Company A has three endpoints on a receiver that never answers (each send ends at the
    attempt's 2 s deadline, and is retried at once) and one that answers at once; every event goes
    to all four. Once an endpoint is known to be slow, its company's slow endpoints send in half of
    its places, and the healthy endpoint is claimed for and started in the others."""
    from tests.webhooks.receiver import running_receiver

    settings = private_ok.model_copy(update={"webhook_timeout_seconds": 2})
    with running_receiver() as slow, running_receiver() as fast:
        slow.hold = threading.Event()
        for path in ("/1", "/2", "/3"):
            register(api, slow.url + path, event_types=["employee.created"])
        register(api, fast.url, event_types=["employee.created"])
        emit(engine, api.company_id, *[EventType.EMPLOYEE_CREATED] * 6)  # 24 deliveries, 6 healthy
        runner = make_worker(engine, settings, concurrency=4)  # A: 2 sends at once, 1 per endpoint
        with serving(runner, slow.hold):
            assert received(fast, 6, seconds=60) == 6
            # Each slow endpoint's first send (unknown to be slow until it lasts a second), and
            # in each of those rounds of 2 s at most one more, in the slow half of the company's
            # places: 6. Before, the three endpoints' whole backlog went first (18 sends).
            assert len(slow.received) <= 6, len(slow.received)


@contextmanager
def serving(runner: Worker, hold: threading.Event) -> Iterator[None]:
    """The worker serving in a thread; at the end it stops, the held receiver is let go, and the
    thread must end."""
    thread = threading.Thread(target=runner.run_forever)
    thread.start()
    try:
        yield
    finally:
        runner.stop()
        hold.set()
        thread.join(timeout=30)
    assert not thread.is_alive()


def received(receiver: Receiver, count: int, *, seconds: float) -> int:
    """How many requests `receiver` has had once it has `count`, or once `seconds` have passed."""
    deadline = time.monotonic() + seconds
    while len(receiver.received) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(receiver.received)


def count_attempts(db: Session, company_id: uuid.UUID) -> int:
    value = db.scalar(select(func.count()).where(WebhookAttempt.company_id == company_id)) or 0
    db.commit()
    return value


class Trickle:
    """A receiver that answers one byte at a time, 5 a second, for `seconds`: a send to it lasts as
    long as it likes unless the attempt has a total deadline. Counts the requests for each
    webhook-id and the most that were ever open at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.lock = threading.Lock()
        self.requests: dict[str, int] = {}
        self.open: dict[str, int] = {}
        self.most_open: dict[str, int] = {}
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}/trickle"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = connection.recv(65536)
                if not chunk:
                    return
                data += chunk
            head = data.split(b"\r\n\r\n")[0].decode()
            headers = dict(line.lower().split(":", 1) for line in head.split("\r\n")[1:])
            webhook_id = headers["webhook-id"].strip()
            with self.lock:
                self.requests[webhook_id] = self.requests.get(webhook_id, 0) + 1
                self.open[webhook_id] = self.open.get(webhook_id, 0) + 1
                self.most_open[webhook_id] = max(self.most_open.get(webhook_id, 0), self.open[webhook_id])
            try:
                connection.sendall(b"HTTP/1.1 200 OK\r\nx-trickle: ")
                until = time.monotonic() + self.seconds
                while time.monotonic() < until:
                    connection.sendall(b"a")
                    time.sleep(0.2)
                connection.sendall(b"\r\ncontent-length: 0\r\n\r\n")
            except OSError:
                pass  # the sender gave up
            finally:
                with self.lock:
                    self.open[webhook_id] -= 1

    def close(self) -> None:
        self.server.close()


def test_a_trickling_receiver_gets_one_send_bounded_by_the_total_deadline(
    api: Api, private_ok: Settings, engine: Engine, db: Session
) -> None:
    """The attempt's deadline (1 s here) covers the whole send, however the receiver spreads its
    bytes; and the lease outlives the send even when configured shorter (0.5 s here), so no other
    worker sends the same delivery while the first send is in flight."""
    trickle = Trickle(seconds=6)
    settings = private_ok.model_copy(
        update={"webhook_timeout_seconds": 1, "worker_lease_seconds": 0.5, "webhook_retry_schedule": [0]}
    )
    register(api, trickle.url)
    (event_id,) = emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
    runners = [make_worker(engine, settings, concurrency=2, name=f"w{n}") for n in range(2)]
    threads = [threading.Thread(target=runner.run_forever) for runner in runners]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 30
        while deadline > time.monotonic() and deliveries(db)[0].status == DeliveryStatus.PENDING:
            time.sleep(0.1)
    finally:
        for runner in runners:
            runner.stop()
        for thread in threads:
            thread.join(timeout=30)
        trickle.close()
    assert trickle.requests == {str(event_id): 1} and trickle.most_open == {str(event_id): 1}
    (delivery,) = deliveries(db)
    assert delivery.status == DeliveryStatus.FAILED and delivery.attempts == 1
    assert delivery.last_error == "No answer within 1 s."


def test_a_running_worker_records_every_outcome_without_more_sends_to_come(
    api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, db: Session
) -> None:
    """Outcomes are recorded in batches while sends go on; the last batch is written even though no
    send follows it (the worker keeps running: nothing is left for shutdown to flush)."""
    register(api, receiver.url)
    for _ in range(5):
        emit(engine, api.company_id, *[EventType.EMPLOYEE_UPDATED] * 4)
    runner = make_worker(engine, private_ok, concurrency=8)
    thread = threading.Thread(target=runner.run_forever)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(
            row.status == DeliveryStatus.PENDING for row in deliveries(db)
        ):
            time.sleep(0.1)
        rows = deliveries(db)
        assert thread.is_alive()
    finally:
        runner.stop()
        thread.join(timeout=30)
    assert len(receiver.received) == 20
    assert [(row.status, row.attempts, row.claimed_by) for row in rows] == [
        (DeliveryStatus.SUCCEEDED, 1, None)
    ] * 20


def test_a_company_s_flapping_endpoints_do_not_hold_up_its_healthy_one(
    api: Api, private_ok: Settings, engine: Engine, db: Session
) -> None:
    """Three endpoints answer every other request at once and the others never (each of those
    sends ends at the 2 s deadline, and is retried at once); one more answers at once. A quick
    answer does not clear a slow mark made less than SLOW_MEMORY before, so the flapping endpoints
    stay in the company's slow half and the healthy one keeps its place. Without that memory every
    quick answer made its endpoint look healthy again, and its next slow send took a healthy place."""
    from tests.webhooks.receiver import running_receiver

    settings = private_ok.model_copy(update={"webhook_timeout_seconds": 2})
    with running_receiver() as flapping, running_receiver() as fast:
        flapping.hold = threading.Event()
        flapping.hold_every_other = True
        for path in ("/1", "/2", "/3"):
            register(api, flapping.url + path, event_types=["employee.created"])
        register(api, fast.url, event_types=["employee.created"])
        emit(engine, api.company_id, *[EventType.EMPLOYEE_CREATED] * 12)  # 12 for the healthy one
        runner = make_worker(engine, settings, concurrency=4)  # A: 2 sends at once, 1 per endpoint
        with serving(runner, flapping.hold):
            assert received(fast, 12, seconds=90) == 12
            held_sends = flapping.held_count()
            assert held_sends <= 7, held_sends  # 4-5 here; 12-16 without the memory


def test_what_waits_for_an_endpoint_deleted_or_disabled_meanwhile_is_not_sent(
    api: Api, private_ok: Settings, engine: Engine, db: Session
) -> None:
    """Two endpoints hold the company's two places with sends that do not end; two more have a
    delivery each waiting in the worker. One of them is disabled and the other deleted through the
    API: when the places free, neither is sent (the worker checks what waits against its endpoint
    every WITHDRAWN_CHECK), and the disabled one's delivery is pending again, unclaimed."""
    from tests.webhooks.receiver import running_receiver

    with running_receiver() as slow, running_receiver() as fast:
        slow.hold = threading.Event()
        for path in ("/1", "/2"):
            register(api, slow.url + path, event_types=["employee.created"])
        disabled = register(api, fast.url + "/disabled", event_types=["employee.updated"])
        deleted = register(api, fast.url + "/deleted", event_types=["department.created"])
        emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)  # the oldest: the slow ones first
        emit(engine, api.company_id, EventType.EMPLOYEE_UPDATED, EventType.DEPARTMENT_CREATED)
        runner = make_worker(engine, private_ok, concurrency=4)
        with serving(runner, slow.hold):
            assert received(slow, 2, seconds=20) == 2
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and count_claimed(db) < 4:
                time.sleep(0.05)
            assert count_claimed(db) == 4  # both waiting ones are in the worker's hands
            patched = api.patch(f"/client/webhook-endpoints/{disabled['id']}", {"enabled": False})
            assert patched.status_code == 200, patched.text
            assert api.delete(f"/client/webhook-endpoints/{deleted['id']}").status_code == 200
            time.sleep(1.5)  # three checks
            slow.hold.set()  # the places free
            assert received(slow, 2, seconds=5) == 2
            time.sleep(1.0)
            assert fast.received == []
        rows = [row for row in deliveries(db) if str(row.endpoint_id) == disabled["id"]]
        assert [(row.status, row.attempts, row.claimed_by) for row in rows] == [
            (DeliveryStatus.PENDING, 0, None)
        ]


def test_a_claim_that_brings_an_endpoint_answering_410_meanwhile_sends_none_of_it(
    engine: Engine, private_ok: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 410 answered while a claim runs (in its thread): what the claim brings for that endpoint
    is released, not started."""
    import asyncio

    from outfitter.webhooks.sender import Outgoing
    from outfitter.worker import deliveries as worker_deliveries

    endpoint = uuid.uuid4()
    outgoing = Outgoing(
        delivery_id=uuid.uuid4(),
        company_id=uuid.uuid4(),
        endpoint_id=endpoint,
        url="http://127.0.0.1:9/never",
        event_id=uuid.uuid4(),
        payload={},
        secrets=("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",),
    )
    runner = make_worker(engine, private_ok, concurrency=4)

    async def scenario() -> None:
        run = worker_deliveries.DeliveryRun(runner, asyncio.get_running_loop())

        def claim_while_a_410_comes(*_args: object) -> list[Outgoing]:
            run.policy.gone.add(endpoint)
            return [outgoing]

        monkeypatch.setattr(worker_deliveries, "claim_deliveries", claim_while_a_410_comes)
        try:
            await run.claim()
            assert not run.policy.waiting and not run.policy.sending and not run.tasks
            assert run.policy.releases() == [outgoing.delivery_id]
        finally:
            await run.client.close()

    try:
        asyncio.run(scenario())
    finally:
        runner.close()


def count_claimed(db: Session) -> int:
    value = db.scalar(select(func.count()).where(WebhookDelivery.claimed_by.is_not(None))) or 0
    db.commit()
    return value


def test_a_claim_takes_each_endpoints_oldest_in_turn_whatever_another_company_has_queued(
    postgres_only: None, api: Api, other_api: Api, private_ok: Settings, engine: Engine
) -> None:
    """Company A has a backlog older than B's one delivery. A claim of 10 takes B's with A's first
    ones, rather than A's ten oldest; and with A's endpoint left out (its share already in hand),
    B's alone, found by a seek of the endpoint rather than a walk through A's backlog."""
    from outfitter.webhooks.dispatch import claim_deliveries

    backlogged = register(api, "https://8.8.8.8/a")
    emit(engine, api.company_id, *[EventType.EMPLOYEE_CREATED] * 300)
    register(other_api, "https://8.8.4.4/b")
    (b_event,) = emit(engine, other_api.company_id, EventType.EMPLOYEE_CREATED)
    sessions = make_sessionmaker(engine, TenantSession)
    settings = private_ok

    claimed = claim_deliveries(sessions, "w1", 10, settings)
    assert len(claimed) == 10
    assert [outgoing.event_id for outgoing in claimed if outgoing.company_id == other_api.company_id] == [
        b_event
    ]

    (b_again,) = emit(engine, other_api.company_id, EventType.EMPLOYEE_UPDATED)
    without_a = claim_deliveries(
        sessions, "w2", 10, settings, exclude_endpoints=[uuid.UUID(backlogged["id"])]
    )
    assert [(outgoing.company_id, outgoing.event_id) for outgoing in without_a] == [
        (other_api.company_id, b_again)
    ]
    without_a = claim_deliveries(sessions, "w2", 10, settings, exclude_companies=[api.company_id])
    assert without_a == []  # B's are claimed; A's are not the worker's to take
