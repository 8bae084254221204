"""Deliveries through a real receiver: Standard Webhooks signatures that the library verifies,
retries on the schedule, 410 and the 5-day rule, rotation, and nothing sent for a rolled-back
request or from inside a request."""

from __future__ import annotations

import json
import logging
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, update
from sqlalchemy.orm import Session
from standardwebhooks import Webhook

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.core.errors import Conflict
from outfitter.core.schemas import Envelope
from outfitter.db.base import utcnow
from outfitter.http.unit_of_work import UnitOfWorkRoute, WriteAccess
from outfitter.models import (
    PING_EVENT_TYPE,
    DeliveryStatus,
    Event,
    EventType,
    WebhookDelivery,
    WebhookEndpoint,
)
from outfitter.outbox import record_event, webhook_payload
from outfitter.webhooks.sender import ANSWER_BYTES, MAX_RETRY_AFTER, retry_after
from outfitter.worker import Worker
from tests.factories import Api, CompanyFactory
from tests.webhooks.conftest import attempts, count, deliveries, emit, make_worker, register
from tests.webhooks.receiver import Receiver


def verified(secret: str, request_body: bytes, headers: dict[str, str]) -> dict[str, object]:
    payload = Webhook(secret).verify(request_body, headers)
    assert isinstance(payload, dict)
    return payload


def test_each_event_type_arrives_once_signed(
    api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, worker: Worker, db: Session
) -> None:
    endpoint = register(api, receiver.url)
    ids = emit(engine, api.company_id, *EventType)
    assert worker.run_once(jobs=False) == len(EventType)
    assert worker.run_once(jobs=False) == 0  # nothing left: each is sent once
    assert sorted(receiver.ids()) == sorted(str(event_id) for event_id in ids)
    types = []
    for request in receiver.received:
        payload = verified(endpoint["secret"], request.body, request.headers)
        assert set(payload) == {"id", "type", "timestamp", "data"}
        assert payload["id"] == request.headers["webhook-id"]
        assert request.headers["content-type"] == "application/json"
        assert request.headers["webhook-signature"].startswith("v1,")
        types.append(payload["type"])
    assert sorted(types) == sorted(type.value for type in EventType)
    assert {row.status for row in deliveries(db)} == {DeliveryStatus.SUCCEEDED}


def test_the_payload_carries_the_event(
    api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, worker: Worker, db: Session
) -> None:
    register(api, receiver.url)
    (event_id,) = emit(engine, api.company_id, EventType.EQUIPMENT_SOLD)
    worker.run_once(jobs=False)
    body = json.loads(receiver.received[0].body)
    event = db.get(Event, event_id)
    db.commit()
    assert event is not None
    assert body["data"] == event.data and body["type"] == "equipment.sold"
    assert body["timestamp"].endswith("Z") and body["timestamp"][:19] == event.created_at.isoformat()[:19]


def test_500_twice_then_200_is_three_attempts(
    api: Api,
    private_ok: Settings,
    receiver: Receiver,
    engine: Engine,
    worker: Worker,
    db: Session,
    caplog: pytest.LogCaptureFixture,
) -> None:
    endpoint = register(api, receiver.url)
    receiver.script = [500, 500]
    emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
    with caplog.at_level(logging.WARNING, logger="outfitter.worker"):
        worker.run_once(jobs=False)  # the test schedule is 0,0,0: every retry is due at once
    assert len(receiver.received) == 3 and len(set(receiver.ids())) == 1
    (delivery,) = deliveries(db)
    # Each failed attempt is a line of the worker's log, for an operator watching it.
    failed = f"delivery {delivery.id} to endpoint {endpoint['id']} failed: The receiver answered 500."
    assert [record.getMessage() for record in caplog.records] == [failed, failed]
    assert delivery.status == DeliveryStatus.SUCCEEDED and delivery.attempts == 3
    tried = attempts(db, delivery.id)
    assert [attempt.status_code for attempt in tried] == [500, 500, 200]
    assert tried[0].error and tried[2].error is None and all(attempt.duration_ms >= 0 for attempt in tried)


def test_retries_wait_for_the_schedule(
    api: Api,
    private_ok: Settings,
    receiver: Receiver,
    engine: Engine,
    webhook_settings: Settings,
    db: Session,
) -> None:
    register(api, receiver.url)
    receiver.script = [503]
    slow = make_worker(engine, webhook_settings.model_copy(update={"webhook_retry_schedule": [0, 300, 1800]}))
    try:
        emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
        assert slow.run_once(jobs=False) == 1
        assert slow.run_once(jobs=False) == 0  # not due for another 5 minutes
        (delivery,) = deliveries(db)
        assert delivery.status == DeliveryStatus.PENDING and delivery.next_attempt_at is not None
        wait = (delivery.next_attempt_at - delivery.round_started_at).total_seconds()
        assert 300 <= wait <= 300 + 0.1 * 300  # jitter: up to a tenth of the gap
    finally:
        slow.close()


def test_410_disables_the_endpoint(
    api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, worker: Worker, db: Session
) -> None:
    endpoint = register(api, receiver.url)
    receiver.script = [410]
    emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
    worker.run_once(jobs=False)
    assert len(receiver.received) == 1  # no retry after a 410
    (delivery,) = deliveries(db)
    assert delivery.status == DeliveryStatus.FAILED and delivery.last_status_code == 410
    shown = api.get(f"/client/webhook-endpoints/{endpoint['id']}").json()["data"]
    assert shown["enabled"] is False and "410" in shown["disabled_reason"]
    emit(engine, api.company_id, EventType.EMPLOYEE_UPDATED)
    assert len(deliveries(db)) == 1  # a disabled endpoint gets no new deliveries


def test_five_days_of_failures_disable_the_endpoint(
    api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, worker: Worker, db: Session
) -> None:
    endpoint = register(api, receiver.url)
    receiver.script = [500]
    emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
    worker.run_once(jobs=False)  # 500, then 200: the failing run ends with the success
    db.execute(update(WebhookEndpoint).values(failing_since=None))
    db.commit()
    assert api.get(f"/client/webhook-endpoints/{endpoint['id']}").json()["data"]["enabled"] is True

    receiver.script = [500]
    emit(engine, api.company_id, EventType.EMPLOYEE_UPDATED)
    db.execute(update(WebhookEndpoint).values(failing_since=utcnow() - timedelta(days=5, minutes=1)))
    db.commit()
    worker.run_once(jobs=False)
    shown = api.get(f"/client/webhook-endpoints/{endpoint['id']}").json()["data"]
    assert shown["enabled"] is False and "5 days" in shown["disabled_reason"]


def test_rotation_sends_both_signatures_for_a_day(
    api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, worker: Worker, db: Session
) -> None:
    endpoint = register(api, receiver.url)
    rotated = api.post(f"/client/webhook-endpoints/{endpoint['id']}/rotate-secret")
    assert rotated.status_code == 200, rotated.text
    new_secret = rotated.json()["data"]["secret"]
    assert new_secret.startswith("whsec_") and new_secret != endpoint["secret"]
    emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
    worker.run_once(jobs=False)
    (request,) = receiver.received
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    for secret in (endpoint["secret"], new_secret):
        only = {**request.headers}
        signatures = request.headers["webhook-signature"].split(" ")
        # Each signature alone verifies with its own secret, so a receiver holding either one works.
        matching = [
            sig for sig in signatures if _verifies(secret, request.body, {**only, "webhook-signature": sig})
        ]
        assert len(matching) == 1

    db.execute(update(WebhookEndpoint).values(previous_secret_expires_at=utcnow() - timedelta(seconds=1)))
    db.commit()
    emit(engine, api.company_id, EventType.EMPLOYEE_UPDATED)
    worker.run_once(jobs=False)
    later = receiver.received[1]
    assert len(later.headers["webhook-signature"].split(" ")) == 1
    assert verified(new_secret, later.body, later.headers)
    assert not _verifies(endpoint["secret"], later.body, later.headers)


def _verifies(secret: str, body: bytes, headers: dict[str, str]) -> bool:
    try:
        Webhook(secret).verify(body, headers)
    except Exception:
        return False
    return True


def test_a_private_address_is_refused_again_at_send_time(
    api: Api,
    private_ok: Settings,
    receiver: Receiver,
    engine: Engine,
    webhook_settings: Settings,
    db: Session,
) -> None:
    """Registered while private receivers were allowed; the worker's settings no longer allow them
    (as when DNS starts answering a private address): nothing reaches the receiver, and the delivery
    log does not tell the client which internal address the host resolved to."""
    endpoint = register(api, receiver.url)
    emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
    strict = make_worker(engine, webhook_settings.model_copy(update={"webhook_allow_private": False}))
    try:
        strict.run_once(jobs=False)
    finally:
        strict.close()
    assert receiver.received == []
    (delivery,) = deliveries(db)
    assert delivery.status == DeliveryStatus.FAILED and delivery.attempts == 3
    assert delivery.last_status_code is None and "Refused" in (delivery.last_error or "")
    (shown,) = api.get(f"/client/webhook-endpoints/{endpoint['id']}/deliveries").json()["data"]["data"]
    assert shown["last_error"] == "Refused: the host resolves to a non-public address."
    assert "127.0.0.1" not in str(attempts(db, delivery.id)[-1].error)


def test_a_receiver_that_refuses_the_connection_is_said_so_in_our_words(
    api: Api, private_ok: Settings, engine: Engine, worker: Worker, db: Session
) -> None:
    """Not the HTTP library's text, which named the address and port it tried and its internals
    (`ClientConnectorError: Cannot connect to host 127.0.0.1:8713 ssl:default [...]`)."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = register(api, f"http://127.0.0.1:{port}/hook")
    emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
    worker.run_once(jobs=False)
    (shown,) = api.get(f"/client/webhook-endpoints/{endpoint['id']}/deliveries").json()["data"]["data"]
    assert shown["last_error"] == "Could not connect to the receiver: connection refused."
    assert shown["last_status_code"] is None and shown["attempts"] == 3
    (delivery,) = deliveries(db)
    assert {attempt.error for attempt in attempts(db, delivery.id)} == {shown["last_error"]}


@contextmanager
def raw_receiver(answer: bytes | None) -> Iterator[str]:
    """A receiver that reads each request's head, then writes `answer` as raw bytes (None: nothing)
    and closes the connection: what no HTTP server library would send. Yields its URL."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(5)
                head = connection.recv(65536)
                # the rest of an HTTP head; a TLS ClientHello (no head) is answered at once
                while head[:1].isalpha() and b"\r\n\r\n" not in head and (chunk := connection.recv(65536)):
                    head += chunk
                if answer is not None:
                    connection.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/hook"
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


@pytest.mark.one_database
@pytest.mark.parametrize(
    ("scheme", "answer", "last_error"),
    [
        ("http", None, "The receiver closed the connection without answering."),
        ("http", b"HELLO THERE\r\n\r\n", "The receiver's answer is not valid HTTP."),
        (
            "https",  # a receiver that speaks no TLS on its https:// URL
            b"HELLO THERE\r\n\r\n",
            "The TLS handshake with the receiver failed: its certificate is not trusted or not its host's.",
        ),
    ],
    ids=["closed", "not-http", "no-tls"],
)
def test_a_receiver_that_answers_no_http_is_said_so_in_our_words(
    api: Api,
    private_ok: Settings,
    engine: Engine,
    worker: Worker,
    scheme: str,
    answer: bytes | None,
    last_error: str,
) -> None:
    with raw_receiver(answer) as url:
        endpoint = register(api, url.replace("http://", f"{scheme}://"))
        emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
        worker.run_once(jobs=False)
    (shown,) = api.get(f"/client/webhook-endpoints/{endpoint['id']}/deliveries").json()["data"]["data"]
    assert (shown["status"], shown["last_error"], shown["last_status_code"]) == ("failed", last_error, None)


@pytest.mark.one_database
def test_a_long_answer_is_skimmed_and_the_delivery_counts(
    api: Api, private_ok: Settings, engine: Engine, worker: Worker
) -> None:
    """Only the status decides: a 200 whose body is far over what is read of it is delivered."""
    body = b"x" * (4 * ANSWER_BYTES)
    answer = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    with raw_receiver(answer) as url:
        endpoint = register(api, url)
        emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
        worker.run_once(jobs=False)
    (shown,) = api.get(f"/client/webhook-endpoints/{endpoint['id']}/deliveries").json()["data"]["data"]
    assert (shown["status"], shown["attempts"], shown["last_status_code"]) == ("succeeded", 1, 200)


NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, None),
        ("  30 ", 30.0),
        ("86400", MAX_RETRY_AFTER),  # a longer pause is cut
        ("Tue, 01 Dec 2026 12:00:45 GMT", 45.0),  # an HTTP date
        ("Tue, 01 Dec 2026 11:00:00 GMT", 0.0),  # already past: at once
        ("Wed, 02 Dec 2026 12:00:00 GMT", MAX_RETRY_AFTER),
        ("Tue, 01 Dec 2026 12:00:45", None),  # no zone: unreadable as a time
        ("soon", None),
    ],
)
def test_retry_after_reads_seconds_and_http_dates(header: str | None, seconds: float | None) -> None:
    assert retry_after(header, NOW) == seconds


# --- a request that fails sends nothing --------------------------------------------------------

failing = APIRouter(route_class=UnitOfWorkRoute)


@failing.post("/api/v2/client/test-only/fails-after-an-event", response_model=Envelope[str])
def fails_after_an_event(client: WriteAccess) -> dict[str, object]:
    record_event(client.session, EventType.EMPLOYEE_CREATED, uuid.uuid4(), {"note": "rolled back"})
    raise Conflict("This request fails after recording an event.")


@pytest.fixture
def failing_app(webhook_settings: Settings, engine: Engine) -> Iterator[FastAPI]:
    application = create_app(webhook_settings)
    application.include_router(failing)
    yield application
    application.state.engine.dispose()


def test_a_rolled_back_request_sends_nothing(
    failing_app: FastAPI, engine: Engine, receiver: Receiver, worker: Worker, db: Session
) -> None:
    with TestClient(failing_app) as test_client:
        api = CompanyFactory(engine, test_client).create("Rollback Ltd")
        register(api, receiver.url)
        response = api.post("/client/test-only/fails-after-an-event")
        assert response.status_code == 409, response.text
    assert worker.run_once(jobs=False) == 0
    assert receiver.received == []
    assert count(db, Event) == 0 and count(db, WebhookDelivery) == 0


# --- after the events branch is merged ---------------------------------------------------------


def test_an_employee_created_through_http_is_delivered_signed(
    api: Api, private_ok: Settings, receiver: Receiver, worker: Worker
) -> None:
    from tests.people.helpers import create_employee

    endpoint = register(api, receiver.url, event_types=["employee.created"])
    employee = create_employee(api)
    assert worker.run_once(jobs=False) == 1
    (request,) = receiver.received
    payload = verified(endpoint["secret"], request.body, request.headers)
    assert payload["type"] == "employee.created"
    assert isinstance(payload["data"], dict) and payload["data"]["id"] == employee["id"]


def test_after_a_410_the_worker_sends_nothing_more_it_had_claimed_for_that_endpoint(
    api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, db: Session
) -> None:
    """The worker claims all three at once; the first answer is 410: the other two are not sent
    (they stay pending, unclaimed, for when the client enables the endpoint again)."""
    endpoint = register(api, receiver.url)
    receiver.script = [410]
    emit(engine, api.company_id, *[EventType.EMPLOYEE_UPDATED] * 3)
    runner = make_worker(engine, private_ok, concurrency=2)
    try:
        assert runner.run_once(jobs=False) == 1
    finally:
        runner.close()
    assert len(receiver.received) == 1
    rows = deliveries(db)
    assert sorted(row.status for row in rows) == [
        DeliveryStatus.FAILED,
        DeliveryStatus.PENDING,
        DeliveryStatus.PENDING,
    ]
    waiting = [row for row in rows if row.status == DeliveryStatus.PENDING]
    assert all(row.attempts == 0 and row.claimed_by is None for row in waiting)
    shown = api.get(f"/client/webhook-endpoints/{endpoint['id']}").json()["data"]
    assert shown["enabled"] is False and "410" in shown["disabled_reason"]


def test_a_send_connects_to_the_checked_address_and_keeps_the_host_name(
    monkeypatch: pytest.MonkeyPatch, receiver: Receiver, webhook_settings: Settings
) -> None:
    """The request goes to the address the guard checked (here the receiver's), with the Host
    header (and, for https, the certificate name) of the registered URL."""
    import asyncio

    from outfitter.webhooks import sender
    from outfitter.webhooks.urls import Target

    port = receiver.url.rsplit(":", 1)[1].split("/")[0]
    checked = Target(f"http://127.0.0.1:{port}/hooks", "hooks.example.com:8080", None)
    monkeypatch.setattr(sender, "pinned_target", lambda _url, _settings: checked)
    strict = webhook_settings.model_copy(update={"webhook_allow_private": False})
    registered = "http://hooks.example.com:8080/hooks"
    ids = [uuid.uuid4() for _ in range(4)]
    ping = webhook_payload(ids[3], PING_EVENT_TYPE, utcnow(), {"endpoint_id": str(ids[2]), "url": registered})
    outgoing = sender.Outgoing(ids[0], ids[1], ids[2], registered, ids[3], ping, ("whsec_" + "A" * 44,))

    async def send_once() -> sender.Outcome:
        client = sender.make_client(strict, 1)
        try:
            return await sender.send(client, outgoing, strict)
        finally:
            await client.close()

    outcome = asyncio.run(send_once())
    assert outcome.status_code == 200 and outcome.error is None
    (request,) = receiver.received
    assert request.headers["host"] == "hooks.example.com:8080" and json.loads(request.body) == ping
    assert request.headers["webhook-id"] == str(outgoing.event_id)


def test_delivery_ids_the_database_makes_are_time_ordered(
    api: Api, private_ok: Settings, receiver: Receiver
) -> None:
    """One event's deliveries are an INSERT ... SELECT whose ids the database makes
    (db.base.time_ordered_uuid): version 7 UUIDs carrying their time, as Python's are."""
    from tests.people.helpers import create_employee

    endpoint = register(api, receiver.url)
    create_employee(api)
    create_employee(api)
    page = api.get(f"/client/webhook-endpoints/{endpoint['id']}/deliveries").json()["data"]["data"]
    assert [delivery["event_type"] for delivery in page] == ["employee.created"] * 2
    for delivery in page:
        made = uuid.UUID(delivery["id"])
        assert made.version == 7 and made.variant == uuid.RFC_4122
        created = datetime.fromisoformat(delivery["created_at"].replace("Z", "+00:00"))
        assert abs((made.int >> 80) - created.timestamp() * 1000) <= 5_000
    newest, oldest = (uuid.UUID(delivery["id"]) for delivery in page)
    assert oldest < newest
