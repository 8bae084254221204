"""The two commonest writes, POST /client/employees and POST /client/equipment, cost a fixed set of
statements once the token (and the company's custom field definitions) is read: on PostgreSQL
one, the record with its history, its events and their webhook deliveries (data-modifying CTEs);
on SQLite, which has none, one INSERT per table. Their answers are rendered from the values
written, not read back: they must be what a GET answers, and the event's data and the delivery's
payload must be the answer. A taken email or serial number is a 409 that leaves nothing written,
also when creates race for it on PostgreSQL."""

from __future__ import annotations

import re
import threading
import uuid
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from outfitter.core.schemas import Envelope
from outfitter.equipment.schemas import EquipmentOut
from outfitter.models import Employee, Equipment, EquipmentHistory, Event, WebhookDelivery, WebhookEndpoint
from tests.factories import Api, assert_error, assert_rendered_as, counting_statements
from tests.payments.conftest import LiveServer, live_server
from tests.people.helpers import create_employee, employee_body

__all__ = ["live_server"]

INSERT_INTO = re.compile(r"\bINSERT INTO (\w+)", re.IGNORECASE)
WRITTEN = (Employee, Equipment, EquipmentHistory, Event, WebhookDelivery)


def _endpoints(db: Session, company_id: uuid.UUID) -> WebhookEndpoint:
    """One endpoint wanting every event (answered), one wanting only another type (none queued)."""
    every = WebhookEndpoint(
        company_id=company_id, url="https://hooks.example.com/all", event_types=[], secret="whsec_a"
    )
    other = WebhookEndpoint(
        company_id=company_id,
        url="https://hooks.example.com/orders",
        event_types=["order.created"],
        secret="whsec_b",
    )
    db.add_all([every, other])
    db.commit()
    return every


# What a create reads before it writes: its token and, on PostgreSQL, the transaction id every
# writing transaction takes as it begins, so that the `updated_since` horizon waits for it
# (db.tenancy.claim_transaction_id).
# The company's custom field definitions (docs/custom-fields.md): what a body's `custom_fields` may
# hold, and the defaults and required fields of a new record; one indexed read of a small table.
CUSTOM_FIELDS_READ = 1


def _reads_before(is_postgres: bool) -> int:
    return (2 if is_postgres else 1) + CUSTOM_FIELDS_READ


def _written(statements: list[str]) -> tuple[list[list[str]], int]:
    """The tables each writing statement INSERTs into (a CTE's first), and how many statements only
    read."""
    tables = [INSERT_INTO.findall(s) for s in statements]
    reads = [
        s
        for s, into in zip(statements, tables, strict=True)
        if not into and s.lstrip().upper().startswith("SELECT")
    ]
    return [into for into in tables if into], len(reads)


def _rows(db: Session, company_id: uuid.UUID) -> dict[str, int]:
    """The company's rows in each table a create writes."""
    counts = {
        model.__tablename__: db.scalar(
            select(func.count()).select_from(model).where(model.company_id == company_id)
        )
        for model in WRITTEN
    }
    db.rollback()
    return counts


def _outbox_of(db: Session, subject_id: str, answer: dict[str, Any], every: WebhookEndpoint) -> None:
    """The subject's one event carries the answer; the endpoint wanting every event has one delivery,
    its payload that event; the one wanting another type has none."""
    db.expire_all()
    event = db.scalars(select(Event).where(Event.subject_id == uuid.UUID(subject_id))).one()
    assert event.data == answer
    delivery = db.scalars(select(WebhookDelivery).where(WebhookDelivery.event_id == event.id)).one()
    assert delivery.endpoint_id == every.id
    assert delivery.payload["id"] == str(event.id)
    assert delivery.payload["type"] == str(event.type)
    assert delivery.payload["data"] == answer
    assert delivery.status == "pending" and delivery.attempts == 0
    db.rollback()  # no read transaction left open (SQLite: the next write would wait on it)


def test_an_employee_create_is_one_statement_after_the_token(
    api: Api, app: FastAPI, db: Session, is_postgres: bool
) -> None:
    every = _endpoints(db, api.company_id)
    create_employee(api, email="first@acme.io")  # the process's copy of the countries is made
    with counting_statements(app) as statements:
        response = api.post("/client/employees", employee_body(email="Grace@Acme.io", country_id="ng"))
    assert response.status_code == 201, response.text
    # read: the token; written: on PostgreSQL one statement (its CTEs, then the event itself; a
    # unique index refuses an email that is a SCIM userName: tests/scim/test_rest_identities.py)
    expected = (
        [["employees", "webhook_deliveries", "events"]]
        if is_postgres
        else [["employees"], ["events"], ["webhook_deliveries"]]
    )
    assert _written(statements) == (expected, _reads_before(is_postgres))
    answer = response.json()["data"]
    assert answer["email"] == "grace@acme.io" and answer["country_code"] == "NG"
    assert api.get(f"/client/employees/{answer['id']}").json()["data"] == answer
    _outbox_of(db, answer["id"], answer, every)

    before = _rows(db, api.company_id)
    again = assert_error(api.post("/client/employees", employee_body(email="GRACE@acme.io")), 409)
    assert again["message"] == "An employee with the email grace@acme.io already exists in this company."
    assert _rows(db, api.company_id) == before


def test_an_equipment_create_is_one_statement_after_the_token(
    api: Api, app: FastAPI, db: Session, is_postgres: bool
) -> None:
    every = _endpoints(db, api.company_id)
    body = {
        "title": "MacBook Pro 14",
        "make": "Apple",
        "type": "Laptop",
        "serial_number": "SN-HOT-1",
        "specs": {"memory": "16GB", "storage": "512GB"},
        "purchase_price": "1200.5",
        "status": "Unassigned",
    }
    assert (
        api.post("/client/equipment", {**body, "serial_number": "SN-HOT-0", "country": "KE"}).status_code
        == 201
    )
    with counting_statements(app) as statements:
        response = api.post("/client/equipment", body)
    assert response.status_code == 201, response.text
    assert_rendered_as(response, Envelope[EquipmentOut])
    assert _written(statements) == (_device_statements(is_postgres, entries=1), _reads_before(is_postgres))
    answer = response.json()["data"]
    assert api.get(f"/client/equipment/{answer['id']}").json()["data"] == answer
    assert [entry["event_type"] for entry in answer["history"]] == ["equipment_added"]
    _outbox_of(db, answer["id"], answer, every)

    before = _rows(db, api.company_id)
    again = assert_error(api.post("/client/equipment", {**body, "title": "Another"}), 409)
    assert again["message"] == (
        f"Equipment with serial number 'SN-HOT-1' already exists in this company: device {answer['id']} "
        "(Unassigned)."
    )
    assert _rows(db, api.company_id) == before


def test_a_device_created_in_storage_writes_both_events_in_the_one_statement(
    api: Api, app: FastAPI, db: Session, is_postgres: bool
) -> None:
    every = _endpoints(db, api.company_id)
    body = {"title": "Spare iPhone", "type": "Phones", "serial_number": "SN-HOT-S", "status": "In_Storage"}
    with counting_statements(app) as statements:
        response = api.post("/client/equipment", body)
    assert response.status_code == 201, response.text
    # read: as any create (and on SQLite the endpoints, as for any batch of events), and the
    # company's default storage location, where a device put in storage lands (docs/locations.md)
    assert _written(statements) == (_device_statements(is_postgres, entries=2), 3 + CUSTOM_FIELDS_READ)
    answer = response.json()["data"]
    assert api.get(f"/client/equipment/{answer['id']}").json()["data"] == answer
    db.expire_all()
    events = db.scalars(
        select(Event).where(Event.subject_id == uuid.UUID(answer["id"])).order_by(Event.created_at)
    ).all()
    assert [str(event.type) for event in events] == ["equipment.added", "equipment.moved_to_storage"]
    assert all(event.data == answer for event in events)
    deliveries = db.scalars(select(WebhookDelivery).where(WebhookDelivery.endpoint_id == every.id)).all()
    assert sorted((d.event_id, d.payload["type"]) for d in deliveries) == sorted(
        (event.id, str(event.type)) for event in events
    )
    assert all(d.payload["data"] == answer for d in deliveries)
    db.rollback()

    before = _rows(db, api.company_id)  # a taken serial number: none of the four tables is written
    assert_error(api.post("/client/equipment", {**body, "title": "Another"}), 409)
    assert _rows(db, api.company_id) == before


def _device_statements(is_postgres: bool, entries: int) -> list[list[str]]:
    """A device's writing statements: on PostgreSQL one, its CTEs the device, all but the last
    history entry, each event with its deliveries, then the last entry; on SQLite one per table."""
    if is_postgres:
        events = ["events", "webhook_deliveries"] * entries  # an event per history entry here
        return [["equipment", *["equipment_history"] * (entries - 1), *events, "equipment_history"]]
    return [["equipment"], ["equipment_history"], ["events"], ["webhook_deliveries"]]


def test_a_device_created_assigned_answers_what_a_get_answers(api: Api, db: Session) -> None:
    employee = create_employee(api)
    response = api.post(
        "/client/equipment",
        {
            "title": "ThinkPad",
            "serial_number": "SN-HOT-2",
            "status": "Assigned",
            "assignee_id": employee["id"],
            "country": "Nigeria",
            "currency": "ngn",
        },
    )
    assert response.status_code == 201, response.text
    assert_rendered_as(response, Envelope[EquipmentOut])
    answer = response.json()["data"]
    assert answer["assignee"]["id"] == employee["id"] and answer["currency"]["code"] == "NGN"
    assert [entry["event_type"] for entry in answer["history"]] == ["equipment_added", "assigned"]
    assert api.get(f"/client/equipment/{answer['id']}").json()["data"] == answer
    db.expire_all()
    events = db.scalars(select(Event).where(Event.subject_id == uuid.UUID(answer["id"]))).all()
    assert sorted(str(event.type) for event in events) == ["equipment.added", "equipment.assigned"]
    assert all(event.data == answer for event in events)
    db.rollback()


RACERS = 6
RACES = {
    "equipment": (
        "/client/equipment",
        lambda n: {"title": f"Racer {n}", "serial_number": "SN-RACE", "status": "In_Storage"},
        # the losers name the winner, which they waited for (ON CONFLICT), then read
        "Equipment with serial number 'SN-RACE' already exists in this company: device {winner} "
        "(In_Storage).",
    ),
    "employees": (
        "/client/employees",
        lambda n: employee_body(email="race@example.com", first_name=f"Racer{n}"),
        "An employee with the email race@example.com already exists in this company.",
    ),
}


@pytest.mark.parametrize("case", list(RACES))
def test_creates_racing_for_one_key_make_exactly_one_record(
    postgres_only: None, live_server: LiveServer, api: Api, db: Session, case: str
) -> None:
    """Single creates sent at once with one serial number (or email), through a real server, on
    PostgreSQL: their statements run on the driver's cursor, and the unique index decides. One is
    201; every other waits for its commit, writes nothing (ON CONFLICT DO NOTHING in the CTE) and is
    a 409; the tables hold the winner's rows alone, its events and their deliveries once."""
    path, body, message = RACES[case]
    every = _endpoints(db, api.company_id)
    assert api.get("/client/employees").status_code == 200  # the token's stamp made: no lock held
    barrier = threading.Barrier(RACERS)
    answers: list[httpx.Response] = []

    def create(n: int) -> None:
        with live_server.api(api.token) as client:
            barrier.wait()
            answers.append(client.post(path, json=body(n)))

    threads = [threading.Thread(target=create, args=(n,)) for n in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(answer.status_code for answer in answers) == [201] + [409] * (RACERS - 1)
    [won] = [answer.json()["data"] for answer in answers if answer.status_code == 201]
    for refused in (answer for answer in answers if answer.status_code == 409):
        assert assert_error(refused, 409)["message"] == message.format(winner=won["id"])
    events = 2 if case == "equipment" else 1  # a device created In_Storage: added, then stored
    assert _rows(db, api.company_id) == {
        "employees": int(case == "employees"),
        "equipment": int(case == "equipment"),
        "equipment_history": 2 if case == "equipment" else 0,
        "events": events,
        "webhook_deliveries": events,  # the endpoint wanting every event; none for the other
    }
    db.expire_all()
    subject = db.scalars(select(Event.subject_id).distinct()).one()
    assert str(subject) == won["id"]
    assert db.scalars(select(WebhookDelivery.endpoint_id).distinct()).one() == every.id
    db.rollback()
