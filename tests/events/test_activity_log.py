"""GET /client/events and /client/events/{eventId}: shape, order, pagination, filters, tenancy,
and a page that costs a fixed number of statements."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import Engine, insert, text
from sqlalchemy.orm import Session

from outfitter.models.events import Event, EventType
from tests.factories import Api, assert_error, counting_statements

START = datetime(2026, 1, 1, tzinfo=UTC)


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _add(db: Session, company_id: uuid.UUID, *rows: tuple[EventType, uuid.UUID, datetime]) -> list[uuid.UUID]:
    """Events written as `record_events` writes them, at chosen times."""
    values = [
        {
            "id": uuid.uuid4(),
            "company_id": company_id,
            "type": type,
            "subject_type": type.subject_type,
            "subject_id": subject,
            "actor": "Acme Ltd API",
            "created_at": at,
            "data": {"id": str(subject), "n": number},
        }
        for number, (type, subject, at) in enumerate(rows)
    ]
    db.execute(insert(Event), values)
    db.commit()
    return [value["id"] for value in values]


@pytest.fixture
def history(api: Api, db: Session) -> dict[str, Any]:
    """Ten events an hour apart, alternating a laptop's and an employee's; two share the last second."""
    laptop, employee = uuid.uuid4(), uuid.uuid4()
    rows = []
    for hour in range(10):
        if hour % 2:
            rows.append((EventType.EMPLOYEE_UPDATED, employee, START + timedelta(hours=hour)))
        else:
            rows.append((EventType.EQUIPMENT_UPDATED, laptop, START + timedelta(hours=hour)))
    rows.append((EventType.EQUIPMENT_ARCHIVED, laptop, START + timedelta(hours=9)))
    ids = _add(db, api.company_id, *rows)
    return {"laptop": laptop, "employee": employee, "ids": ids}


def _page(api: Api, **params: Any) -> dict[str, Any]:
    response = api.get("/client/events", **params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["success"] is True
    data: dict[str, Any] = body["data"]
    return data


def test_newest_first_with_the_id_breaking_ties_and_exact_counters(api: Api, history: dict[str, Any]) -> None:
    page = _page(api, per_page=4)
    assert (page["total"], page["per_page"], page["current_page"], page["last_page"]) == (11, 4, 1, 3)
    first = page["data"]
    assert set(first[0]) == {"id", "type", "subject_type", "subject_id", "actor", "created_at", "data"}
    tied = sorted([str(history["ids"][9]), str(history["ids"][10])], reverse=True)
    assert [record["id"] for record in first[:2]] == tied
    assert first[0]["created_at"] == "2026-01-01T09:00:00.000000Z"
    everything = [
        record["id"] for number in (1, 2, 3) for record in _page(api, per_page=4, page=number)["data"]
    ]
    assert len(everything) == len(set(everything)) == 11
    assert everything[-1] == str(history["ids"][0])  # the last page, read from the other end, still in order
    past = _page(api, per_page=4, page=9)
    assert past["data"] == [] and past["total"] == 11 and past["last_page"] == 3


def test_one_event_by_id_and_another_company_sees_none(
    api: Api, other_api: Api, history: dict[str, Any]
) -> None:
    listed = _page(api)["data"][0]
    one = api.get(f"/client/events/{listed['id']}")
    assert one.status_code == 200 and one.json()["data"] == listed
    unknown = assert_error(api.get(f"/client/events/{uuid.uuid4()}"), 404)
    foreign = assert_error(other_api.get(f"/client/events/{listed['id']}"), 404)
    assert foreign == unknown
    assert_error(api.get("/client/events/not-an-id"), 404)
    assert _page(other_api)["total"] == 0
    assert _page(other_api, subject_id=str(history["laptop"]))["data"] == []


@pytest.mark.parametrize(
    ("type", "expected"),
    [
        ("employee.updated", 5),
        ("equipment.*", 6),
        ("equipment.archived", 1),
        ("equipment.archived, employee.*", 6),
        ("employee.*,employee.updated", 5),
        ("wallet.*", 0),
    ],
)
def test_the_type_filter_takes_exact_types_and_prefixes(
    api: Api, history: dict[str, Any], type: str, expected: int
) -> None:
    page = _page(api, type=type, per_page=100)
    assert page["total"] == len(page["data"]) == expected
    wanted = [part.strip() for part in type.split(",")]
    for record in page["data"]:
        assert any(record["type"] == part or record["type"].startswith(part[:-1]) for part in wanted)


@pytest.mark.parametrize(
    "type", ["equipment.bought", "equipment", "equipment.", "*", "robot.*", "equipment.as*", ","]
)
def test_an_unknown_or_malformed_type_is_422_naming_it(api: Api, type: str) -> None:
    body = assert_error(api.get("/client/events", type=type), 422)
    assert list(body["errors"]) == ["query.type"]


def test_an_unknown_type_is_named_but_a_long_one_only_in_part(api: Api) -> None:
    named = assert_error(api.get("/client/events", type="equipment.bought"), 422)["errors"]["query.type"][0]
    assert named.startswith("Unknown event type 'equipment.bought': give types such as")
    long = "x" * 1000
    cut = assert_error(api.get("/client/events", type=long), 422)["errors"]["query.type"][0]
    assert cut.startswith(f"Unknown event type '{'x' * 64}...': give") and long not in cut


def test_subject_and_time_window(api: Api, history: dict[str, Any]) -> None:
    laptop = _page(api, subject_id=str(history["laptop"]), per_page=100)
    assert laptop["total"] == 6 and {record["subject_id"] for record in laptop["data"]} == {
        str(history["laptop"])
    }
    since = _page(api, since=_stamp(START + timedelta(hours=8)))
    assert since["total"] == 3  # at or after: 08:00 and both at 09:00
    until = _page(api, until=_stamp(START + timedelta(hours=2)))
    assert until["total"] == 2  # before: 00:00 and 01:00
    window = _page(
        api,
        since="2026-01-01T03:00:00+01:00",  # 02:00 UTC
        until="2026-01-01T05:00:00",  # no offset: UTC
        type="equipment.*",
        subject_id=str(history["laptop"]),
    )
    assert [record["created_at"] for record in window["data"]] == [
        "2026-01-01T04:00:00.000000Z",
        "2026-01-01T02:00:00.000000Z",
    ]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"subject_id": "nope"}, "query.subject_id"),
        ({"since": "yesterday"}, "query.since"),
        ({"until": "2026-13-01T00:00:00Z"}, "query.until"),
        ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "query.until"),
        ({"since": "0001-01-01T00:00:00+14:00"}, "query.since"),
        ({"until": "1700000000"}, "query.until"),  # not unix seconds
        ({"since": "2026-01-01"}, "query.since"),  # a date alone is not a time
        ({"per_page": 0}, "query.per_page"),
    ],
)
def test_malformed_filters_are_422_naming_them(api: Api, params: dict[str, Any], field: str) -> None:
    body = assert_error(api.get("/client/events", **params), 422)
    assert field in body["errors"]


@pytest.fixture
def statements(app: FastAPI) -> Iterator[list[str]]:
    with counting_statements(app) as sent:
        yield sent


def test_a_page_costs_a_fixed_number_of_statements(
    api: Api, db: Session, history: dict[str, Any], statements: list[str]
) -> None:
    _add(db, api.company_id, *[(EventType.ORDER_CREATED, uuid.uuid4(), START) for _ in range(150)])
    _page(api)  # the token's first use also stamps it
    costs = []
    for params in (
        {"per_page": 1},
        {"per_page": 100},
        {"per_page": 100, "page": 2},
        {"type": "order.*", "per_page": 50},
    ):
        statements.clear()
        assert _page(api, **params)["data"]
        costs.append(len(statements))
    assert len(set(costs)) == 1 and costs[0] > 0, costs  # counted where the app sends them


def test_following_with_since_waits_for_transactions_in_flight(
    postgres_only: None, api: Api, db: Session, engine: Engine
) -> None:
    """A follower polls `since=<the newest event it saw>`. An event stamped at t1 by a transaction
    that commits after one stamped at t2 > t1 was shown would never be seen (a black-box probe
    missed 6,000 of 56,368 events this way). With `since` the window ends at the start of the
    oldest writing transaction in flight, as an `updated_since` walk does."""
    since = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    slow = engine.connect()
    slow.begin()
    # A writing transaction in flight: it holds its id from its start, as a session that may write
    # does (db.tenancy.claim_transaction_id); one that only reads would not hold the log.
    slow.execute(text("SELECT pg_current_xact_id()"))
    try:
        assert api.post("/client/departments", {"name": "Quick"}).status_code == 201
        followed = api.get("/client/events", since=since).json()["data"]["data"]
        assert followed == []  # the quick event waits behind the slow transaction's start
        everything = api.get("/client/events").json()["data"]["data"]
        assert [event["type"] for event in everything] == ["department.created"]  # no since: as it was
    finally:
        slow.close()
    followed = api.get("/client/events", since=since).json()["data"]["data"]
    assert [event["type"] for event in followed] == ["department.created"]
