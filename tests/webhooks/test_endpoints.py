"""The webhook endpoint API: shapes of decisions.md section 13, the secret shown only on create and
rotation, URL safety at registration, PATCH, DELETE, ping and the delivery log."""

from __future__ import annotations

import base64
import uuid

from fastapi import FastAPI
from sqlalchemy import Engine, select
from sqlalchemy import event as sa_event
from sqlalchemy.orm import Session

from outfitter.config import Settings
from outfitter.db.tenancy import TenantSession, bind_company
from outfitter.models import Event, EventType, WebhookDelivery, WebhookEndpoint
from outfitter.outbox import NewEvent, record_events
from outfitter.worker import Worker
from tests.factories import Api, assert_error
from tests.payments.conftest import LiveServer
from tests.payments.test_concurrency import race
from tests.webhooks.conftest import count, deliveries, emit, register
from tests.webhooks.receiver import Receiver

ENDPOINT_FIELDS = {
    "id",
    "url",
    "event_types",
    "description",
    "enabled",
    "disabled_reason",
    "concurrency",
    "created_at",
    "updated_at",
}
DELIVERY_FIELDS = {
    "id", "event_id", "event_type", "status", "attempts", "last_status_code", "last_error",
    "next_attempt_at", "created_at", "delivered_at",
}  # fmt: skip


def test_create_answers_the_secret_once(api: Api, private_ok: Settings, receiver: Receiver) -> None:
    created = register(api, receiver.url, event_types=["employee.created"], description="HR sync")
    assert set(created) == ENDPOINT_FIELDS | {"secret"}
    assert created["secret"].startswith("whsec_")
    assert len(base64.b64decode(created["secret"].removeprefix("whsec_"))) >= 24
    assert created["enabled"] is True and created["disabled_reason"] is None
    assert created["event_types"] == ["employee.created"]
    assert created["updated_at"] == created["created_at"]  # one instant: a new endpoint was not changed

    fetched = api.get(f"/client/webhook-endpoints/{created['id']}").json()["data"]
    assert set(fetched) == ENDPOINT_FIELDS
    listed = api.get("/client/webhook-endpoints").json()["data"]
    assert listed["total"] == 1 and set(listed["data"][0]) == ENDPOINT_FIELDS


def test_event_types_must_be_known(api: Api, private_ok: Settings, receiver: Receiver) -> None:
    response = api.post("/client/webhook-endpoints", {"url": receiver.url, "event_types": ["employee.eaten"]})
    assert "event_types.0" in assert_error(response, 422)["errors"]


def test_a_private_url_is_refused_without_the_setting(api: Api, receiver: Receiver) -> None:
    for url in (
        receiver.url,
        "http://localhost:9/x",
        "http://LOCALHOST./x",
        "https://hooks.localhost/x",
        "http://2130706433/x",  # 127.0.0.1, in the shorthand a resolver reads
        "https://0x7f.1/x",
        "https://10.1.2.3/x",
        "https://[::1]/x",
        "https://169.254.169.254/",
    ):
        response = api.post("/client/webhook-endpoints", {"url": url})
        assert "url" in assert_error(response, 422)["errors"], url
    for url in ("ftp://example.com/x", "https://user:pw@example.com/x", "not a url"):
        assert "url" in assert_error(api.post("/client/webhook-endpoints", {"url": url}), 422)["errors"], url


def test_embedded_private_addresses_port_zero_and_odd_hosts_are_refused(api: Api, db: Session) -> None:
    cases = {
        "http://[2002:7f00:1::]/": "IPv6 address embedding one",  # 6to4 around 127.0.0.1
        "https://[64:ff9b::a00:1]/x": "IPv6 address embedding one",  # NAT64 around 10.0.0.1
        "https://[::ffff:7f00:1]/x": "loopback, private",  # IPv4-mapped 127.0.0.1
        "https://hooks.example.com:0/x": "port must be between 1 and 65535",
        "https://exa mple.com/x": "spaces or control characters",
        "https://exa\x01mple.com/x": "spaces or control characters",
    }
    for url, reason in cases.items():
        response = api.post("/client/webhook-endpoints", {"url": url})
        assert reason in assert_error(response, 422)["errors"]["url"][0], url
    assert count(db, WebhookEndpoint) == 0


def test_a_host_that_does_not_resolve_is_accepted(api: Api) -> None:
    response = api.post("/client/webhook-endpoints", {"url": "https://hooks.not-yet-there.invalid/outfitter"})
    assert response.status_code == 201, response.text


def test_http_is_refused_when_the_operator_does_not_allow_it(
    app: FastAPI, api: Api, settings: Settings
) -> None:
    original = app.state.settings
    app.state.settings = settings.model_copy(update={"webhook_allow_http": False})
    try:
        response = api.post("/client/webhook-endpoints", {"url": "http://hooks.example.invalid/x"})
        other_scheme = api.post("/client/webhook-endpoints", {"url": "ftp://hooks.example.invalid/x"})
    finally:
        app.state.settings = original
    assert "https://" in assert_error(response, 422)["errors"]["url"][0]
    assert assert_error(other_scheme, 422)["errors"]["url"] == ["The URL must start with https://."]


def test_another_scheme_is_told_the_schemes_this_server_takes(api: Api) -> None:
    """The embedded default takes http:// too, and says so."""
    response = api.post("/client/webhook-endpoints", {"url": "ftp://hooks.example.invalid/x"})
    assert assert_error(response, 422)["errors"]["url"] == ["The URL must start with https:// or http://."]


def test_patch(api: Api, private_ok: Settings, receiver: Receiver, db: Session) -> None:
    endpoint = register(api, receiver.url)
    path = f"/client/webhook-endpoints/{endpoint['id']}"
    assert_error(api.patch(path, {"colour": "red"}), 422)
    assert_error(api.patch(path, {"url": None}), 422)
    assert_error(
        api.patch(path, {"url": "https://10.0.0.1/"}), 422
    ) if not private_ok.webhook_allow_private else None
    changed = api.patch(path, {"event_types": ["equipment.added"], "description": "assets", "enabled": False})
    assert changed.status_code == 200, changed.text
    data = changed.json()["data"]
    assert data["enabled"] is False and data["disabled_reason"] and data["description"] == "assets"
    assert data["updated_at"] >= endpoint["updated_at"]
    again = api.patch(path, {"enabled": True}).json()["data"]
    assert again["enabled"] is True and again["disabled_reason"] is None


def test_the_concurrency_is_set_on_create_and_patch_within_its_bounds(
    api: Api, private_ok: Settings, receiver: Receiver
) -> None:
    """The most deliveries in flight to an endpoint: 16 unless set, 1 to 64, an integer; refused
    with a message naming the field, and the endpoint left as it was."""
    plain = register(api, receiver.url)
    assert plain["concurrency"] == 16
    endpoint = register(api, receiver.url + "/set", concurrency=3)
    assert endpoint["concurrency"] == 3
    path = f"/client/webhook-endpoints/{endpoint['id']}"
    assert api.get(path).json()["data"]["concurrency"] == 3
    for wrong in (0, 65, "4", 2.5, True, None):
        refused = api.patch(path, {"concurrency": wrong})
        assert_error(refused, 422)
        assert "concurrency" in refused.text, refused.text
    for wrong in (0, 65, "4"):
        created = api.post("/client/webhook-endpoints", {"url": receiver.url, "concurrency": wrong})
        assert_error(created, 422)
        assert "concurrency" in created.text, created.text
    # A JSON number without a fraction is an integer to JSON Schema, and so to a client that
    # validates by the document (Schemathesis sent 45.0): taken as one.
    whole = register(api, receiver.url + "/whole", concurrency=45.0)
    assert whole["concurrency"] == 45
    changed = api.patch(path, {"concurrency": 64.0})
    assert changed.status_code == 200, changed.text
    assert changed.json()["data"]["concurrency"] == 64
    listed = api.get("/client/webhook-endpoints").json()["data"]["data"]
    assert sorted(row["concurrency"] for row in listed) == [16, 45, 64]


def test_delete_removes_the_endpoint_and_its_log(
    api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, db: Session
) -> None:
    endpoint = register(api, receiver.url)
    emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
    assert len(deliveries(db)) == 1
    deleted = api.delete(f"/client/webhook-endpoints/{endpoint['id']}")
    assert deleted.status_code == 200 and deleted.json()["data"]["id"] == endpoint["id"]
    assert_error(api.get(f"/client/webhook-endpoints/{endpoint['id']}"), 404)
    assert deliveries(db) == []


def test_fan_out_writes_one_row_per_wanting_enabled_endpoint(
    api: Api, other_api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, db: Session
) -> None:
    every = register(api, receiver.url)
    people = register(api, receiver.url + "/people", event_types=["employee.created", "employee.updated"])
    off = register(api, receiver.url + "/off")
    api.patch(f"/client/webhook-endpoints/{off['id']}", {"enabled": False})
    register(other_api, receiver.url + "/other")
    emit(engine, api.company_id, EventType.EMPLOYEE_CREATED, EventType.EQUIPMENT_ADDED)
    rows = {(str(row.endpoint_id), row.event_type) for row in deliveries(db)}
    assert rows == {
        (every["id"], "employee.created"),
        (every["id"], "equipment.added"),
        (people["id"], "employee.created"),
    }


def test_ping_queues_a_delivery_that_the_worker_sends(
    api: Api, private_ok: Settings, receiver: Receiver, worker: Worker, db: Session
) -> None:
    endpoint = register(api, receiver.url)
    response = api.post(f"/client/webhook-endpoints/{endpoint['id']}/ping")
    assert response.status_code == 202, response.text
    queued = response.json()["data"]
    assert set(queued) == DELIVERY_FIELDS and queued["event_type"] == "ping" and queued["status"] == "pending"
    assert receiver.received == []  # nothing is sent from the request
    assert worker.run_once(jobs=False) == 1
    assert [request.headers["webhook-id"] for request in receiver.received] == [queued["event_id"]]
    assert count(db, Event) == 0  # a ping is no activity-log event
    log = api.get(f"/client/webhook-endpoints/{endpoint['id']}/deliveries").json()["data"]
    assert log["total"] == 1 and log["data"][0]["status"] == "succeeded" and log["data"][0]["attempts"] == 1
    assert log["data"][0]["last_status_code"] == 200 and log["data"][0]["delivered_at"]


def test_an_action_that_takes_no_body_does_not_read_one(
    api: Api, private_ok: Settings, receiver: Receiver
) -> None:
    """docs/api.md: whatever a body holds where none is taken, the action runs; only its size and
    media type are held to the API's rules."""
    endpoint = register(api, receiver.url)
    path = f"/client/webhook-endpoints/{endpoint['id']}/ping"
    json_type = {"Content-Type": "application/json"}
    for body in (b"not json at all", b'{"event_type": "employee.created"}'):
        queued = api.post(path, content=body, headers=json_type)
        assert queued.status_code == 202, queued.text
        assert queued.json()["data"]["event_type"] == "ping"
    as_text = api.post(path, content=b"ping", headers={"Content-Type": "text/plain"})
    assert as_text.status_code == 415
    assert (
        as_text.json()["message"] == "The request body must be JSON: send 'Content-Type: application/json'."
    )
    deliveries = api.get(f"/client/webhook-endpoints/{endpoint['id']}/deliveries").json()["data"]
    assert deliveries["total"] == 2


def test_delivery_log_filters_by_status_and_retry_requeues(
    api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, db: Session, worker: Worker
) -> None:
    endpoint = register(api, receiver.url)
    receiver.script = [500, 500, 500]  # the whole short test schedule fails
    emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
    worker.run_once(jobs=False)
    path = f"/client/webhook-endpoints/{endpoint['id']}/deliveries"
    failed = api.get(path, status="failed").json()["data"]
    assert failed["total"] == 1 and failed["data"][0]["attempts"] == 3
    assert failed["data"][0]["last_status_code"] == 500 and failed["data"][0]["next_attempt_at"] is None
    assert api.get(path, status="succeeded").json()["data"]["total"] == 0
    assert_error(api.get(path, status="lost"), 422)

    retried = api.post(f"{path}/{failed['data'][0]['id']}/retry")
    assert retried.status_code == 202, retried.text
    assert retried.json()["data"]["status"] == "pending"
    worker.run_once(jobs=False)
    done = api.get(path).json()["data"]["data"][0]
    assert done["status"] == "succeeded" and done["attempts"] == 4
    assert len(set(receiver.ids())) == 1  # the same webhook-id on every attempt


def test_retry_and_ping_on_a_disabled_endpoint_are_conflicts(
    api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, db: Session
) -> None:
    endpoint = register(api, receiver.url)
    emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
    (delivery,) = deliveries(db)
    api.patch(f"/client/webhook-endpoints/{endpoint['id']}", {"enabled": False})
    assert_error(api.post(f"/client/webhook-endpoints/{endpoint['id']}/ping"), 409, "enable it first")
    assert_error(api.post(f"/client/webhook-endpoints/{endpoint['id']}/deliveries/{delivery.id}/retry"), 409)


def test_a_delivery_of_another_endpoint_is_not_found_under_this_one(
    api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, db: Session
) -> None:
    first = register(api, receiver.url, event_types=["employee.created"])
    second = register(api, receiver.url + "/2", event_types=["equipment.added"])
    emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
    (delivery,) = deliveries(db)
    assert str(delivery.endpoint_id) == first["id"]
    assert_error(api.post(f"/client/webhook-endpoints/{second['id']}/deliveries/{delivery.id}/retry"), 404)


def test_a_company_with_no_endpoint_gets_no_delivery_rows(api: Api, engine: Engine, db: Session) -> None:
    emit(engine, api.company_id, EventType.EMPLOYEE_CREATED)
    assert deliveries(db) == []
    assert count(db, WebhookEndpoint) == 0
    assert count(db, WebhookDelivery) == 0


def test_fan_out_is_a_constant_number_of_statements(
    api: Api, private_ok: Settings, receiver: Receiver, engine: Engine, db: Session
) -> None:
    """Per batch of events: the events' INSERT, one SELECT of the company's enabled endpoints and,
    when one wants them, one INSERT of the deliveries, whatever the number of events; one event's
    deliveries are one INSERT ... SELECT from the endpoints, with or without any, and on PostgreSQL
    that INSERT writes the event too (`WITH event AS (INSERT ...)`: one statement)."""

    def statements_for(events: int) -> list[str]:
        seen: list[str] = []

        def note(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
            verb = statement.split()[0].upper()
            seen.append("INSERT" if verb == "COPY" else verb)  # a large batch is a COPY (db.bulk_rows)

        with TenantSession(engine) as session, session.begin():
            bind_company(session, api.company_id)
            session.execute(select(WebhookEndpoint.id)).all()  # BEGIN and the session's own set-up first
            sa_event.listen(engine, "before_cursor_execute", note)
            try:
                batch = [NewEvent(EventType.EMPLOYEE_UPDATED, uuid.uuid4(), {"n": n}) for n in range(events)]
                record_events(session, batch)
            finally:
                sa_event.remove(engine, "before_cursor_execute", note)
        return seen

    one_event = ["WITH"] if engine.dialect.name == "postgresql" else ["INSERT", "INSERT"]
    assert statements_for(50) == ["INSERT", "SELECT"]  # no endpoint: one indexed SELECT more
    assert statements_for(1) == one_event
    assert count(db, WebhookDelivery) == 0
    register(api, receiver.url)
    register(api, receiver.url + "/2")
    assert statements_for(50) == ["INSERT", "SELECT", "INSERT"]
    assert statements_for(1) == one_event
    assert count(db, WebhookDelivery) == 2 * 51


def test_the_endpoint_cap_holds_under_concurrent_creates(
    postgres_only: None, api: Api, engine: Engine, db: Session, live_server: LiveServer
) -> None:
    """Two places left, ten creates racing through a real server: two are created, eight refused."""
    from outfitter.webhooks.service import MAX_ENDPOINTS_PER_COMPANY

    with TenantSession(engine) as session, session.begin():
        bind_company(session, api.company_id)
        session.add_all(
            WebhookEndpoint(
                company_id=api.company_id, url=f"https://8.8.8.8/{n}", event_types=[], secret="whsec_x"
            )
            for n in range(MAX_ENDPOINTS_PER_COMPANY - 2)
        )
    with live_server.api(api.token) as client:
        responses = race(
            [
                lambda n=n: client.post("/client/webhook-endpoints", json={"url": f"https://8.8.4.4/{n}"})
                for n in range(10)
            ]
        )
    assert sorted(response.status_code for response in responses) == [201] * 2 + [409] * 8
    refused = next(response for response in responses if response.status_code == 409)
    assert f"at most {MAX_ENDPOINTS_PER_COMPANY} webhook endpoints" in refused.json()["message"]
    assert count(db, WebhookEndpoint) == MAX_ENDPOINTS_PER_COMPANY


def test_writes_racing_an_endpoints_delete_all_succeed(
    postgres_only: None, api: Api, engine: Engine, db: Session, live_server: LiveServer
) -> None:
    """Every write queues a delivery per endpoint; an endpoint deleted meanwhile must not fail it.
    The fan-out holds the endpoints it reads (FOR KEY SHARE): the DELETE waits for the write and
    takes its deliveries with it, or came first and the write queues none for it. A black-box probe
    had 120 of 400 creates answer 500 (a broken foreign key) while 5 endpoints were deleted."""
    from tests.people.helpers import employee_body

    for round_number in range(4):
        with TenantSession(engine) as session, session.begin():
            bind_company(session, api.company_id)
            endpoints = [
                WebhookEndpoint(
                    company_id=api.company_id, url=f"https://8.8.8.8/{n}", event_types=[], secret="whsec_x"
                )
                for n in range(3)
            ]
            session.add_all(endpoints)
            session.flush()
            ids = [endpoint.id for endpoint in endpoints]
        with live_server.api(api.token) as client:
            devices = [
                {"title": f"Bulk {round_number}.{n}", "serial_number": f"R{round_number}-{n}"}
                for n in range(20)
            ]
            writes = [lambda: client.post("/client/employees", json=employee_body()) for _ in range(12)]
            writes.append(
                lambda devices=devices: client.post("/client/equipment/bulk", json={"equipment": devices})
            )
            deletes = [lambda id=id: client.delete(f"/client/webhook-endpoints/{id}") for id in ids]
            responses = race(writes + deletes)
        assert [response.status_code for response in responses] == [201] * 13 + [200] * 3, [
            response.text for response in responses if response.status_code >= 500
        ]
    assert count(db, WebhookEndpoint) == 0 and count(db, WebhookDelivery) == 0
