"""The hot reads: the equipment lists and the single retrieve, served through the router like every
endpoint, run one read plan (on asyncpg on PostgreSQL) and answer bytes rendered by orjson rather
than validated against their response model again: those bytes are exactly the response model's,
and the same whichever way the plan ran."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import httpx
import orjson
import pytest
from asyncpg.pgproto.pgproto import UUID as AsyncpgUUID
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.core.schemas import Envelope, render_json
from outfitter.core.timestamps import format_timestamp
from outfitter.equipment.schemas import EquipmentListEnvelope, EquipmentOut
from outfitter.http.unit_of_work import JsonAnswer
from tests.core.test_reads import estate  # noqa: F401  (a fixture)
from tests.factories import Api, CompanyFactory, assert_error

BASE = "/api/v2/client/equipment"
HOT = [
    BASE,
    f"{BASE}?per_page=2&page=2",
    f"{BASE}?page=40",
    f"{BASE}?sort=name",
    f"{BASE}?sort=-status&per_page=1",
    f"{BASE}?q=MACBOOK",
    f"{BASE}?q=",
    f"{BASE}?type=Laptop/Workstation&status=Assigned&memory=16gb&storage=512 GB",
    f"{BASE}?country=kenya",
    f"{BASE}?country=Atlantis",  # 422, from the plan
    f"{BASE}?serial_number=SN-1,SN-404",
    f"{BASE}?status=Archived",
    f"{BASE}/in-storage",
    f"{BASE}/in-storage?per_page=1",
    BASE + "/{assigned}",
    BASE + "/{stored}",
    BASE + "/{archived}",
    BASE + "/{upper}",
    f"{BASE}/00000000-0000-4000-8000-000000000000",  # 404
    f"{BASE}?limit=2",  # cursor mode
    f"{BASE}?page=0",
    f"{BASE}?per_page=101",
    f"{BASE}?page=1&page=2",
    f"{BASE}?page=1_0",
    f"{BASE}?per_page=2.0",
    f"{BASE}?status=assigned",
    f"{BASE}?type=Laptop",
    f"{BASE}?sort=price",
    f"{BASE}?memory={'9' * 51}",
    f"{BASE}?unknown=1",
    f"{BASE}/in-storage?sort=name",
    f"{BASE}/not-an-id",
    f"{BASE}/export",
    f"{BASE}/bulk",
]


def _urls(paths: list[str], devices: dict[str, str]) -> list[str]:
    return [path.format(**devices, upper=devices["assigned"].upper()) for path in paths]


def _same(fast: httpx.Response, slow: httpx.Response) -> None:
    assert fast.status_code == slow.status_code, fast.url
    assert fast.content == slow.content, fast.url
    different = {
        name for name in {*fast.headers, *slow.headers} if fast.headers.get(name) != slow.headers.get(name)
    }
    assert different <= {"x-request-id", "content-disposition"}, (fast.url, different)


def _model_of(url: str) -> Any:
    return (
        Envelope[EquipmentOut] if "/equipment/" in url and "in-storage" not in url else EquipmentListEnvelope
    )


def _as_the_model_renders(url: str, answer: httpx.Response) -> None:
    """A 200's bytes are those its response model renders: validated against it and rendered again,
    they do not change."""
    if answer.status_code != 200 or answer.headers["content-type"] != "application/json":
        return  # an error, the CSV export
    model = JsonAnswer(_model_of(url), 200, True)
    assert model(json.loads(answer.content)).body == answer.content, url


def test_the_hot_reads_answer_what_their_response_model_renders(
    postgres_only: None,
    app: FastAPI,
    api: Api,
    estate: dict[str, str],  # noqa: F811
) -> None:
    # Outside `with`, the app runs without its lifespan: no asyncpg pool, the plans run in a session.
    in_a_session = TestClient(app, base_url="http://testserver", headers=api.headers)
    with TestClient(app, base_url="http://testserver", headers=api.headers) as on_asyncpg:
        for url in _urls(HOT, estate):
            answer = on_asyncpg.get(url)
            _same(answer, in_a_session.get(url))
            _as_the_model_renders(url, answer)


def test_on_either_database_a_hot_read_renders_its_models_bytes(api: Api) -> None:
    employee = api.post(
        "/client/employees",
        {
            "first_name": "Ada",
            "last_name": "Obi",
            "email": "ada@acme.io",
            "country_id": "Kenya",
            "phone": "+254 700 000000",
            "address": "1 Moi Avenue",
        },
    ).json()["data"]
    device = api.post(
        "/client/equipment",
        {
            "title": "MacBook",
            "serial_number": "SN-R1",
            "purchase_price": "1299.5",
            "currency": "usd",
            "status": "Assigned",
            "assignee_id": employee["id"],
        },
    ).json()["data"]
    for url in ("/client/equipment", "/client/equipment/in-storage", f"/client/equipment/{device['id']}"):
        answer = api.get(url)
        assert answer.status_code == 200
        _as_the_model_renders(url, answer)
    assert api.get(f"/client/equipment/{device['id']}").json()["data"]["assignee"]["id"] == employee["id"]
    assert_error(api.get(f"/client/equipment/{uuid.uuid4()}"), 404)


@pytest.fixture
def hot_client(postgres_only: None, database_url: str) -> Iterator[TestClient]:
    app = create_app(Settings(database_url=database_url, rate_limit="3/minute"))
    with TestClient(app, base_url="http://testserver") as client:
        yield client
    app.state.engine.dispose()


def test_a_hot_read_keeps_the_token_checks_the_request_id_and_the_rate_limit(
    hot_client: TestClient, engine: Engine
) -> None:
    companies = CompanyFactory(engine, hot_client)
    reader = companies.create("Hot Ltd")
    writer_only = companies.token(reader, scopes=["write"])

    assert_error(hot_client.get(BASE), 401, "Authentication required")
    assert_error(hot_client.get(BASE, headers={"Authorization": "Bearer otf_unknown"}), 401, "Invalid token")
    assert_error(writer_only.get("/client/equipment"), 403, "'read' scope")
    echoed = reader.request("GET", "/client/equipment", headers={"X-Request-ID": "trace-42"})
    assert echoed.status_code == 200 and echoed.headers["x-request-id"] == "trace-42"
    assert echoed.headers["ratelimit-limit"] == "3" and echoed.headers["ratelimit-remaining"] == "2"
    reader.get(f"/client/equipment/{uuid.uuid4()}")
    reader.get("/client/equipment")
    limited = reader.get("/client/equipment")
    assert_error(limited, 429, "Rate limit")
    assert limited.headers["retry-after"] and limited.headers["ratelimit-remaining"] == "0"


# --- the renderer --------------------------------------------------------------------------------

AT = datetime(2026, 1, 31, 9, 30, tzinfo=UTC)


def _device(**overrides: Any) -> dict[str, Any]:
    """A single answer's `data` with every kind of value a row gives, as asyncpg gives it."""
    entry = {
        "id": AsyncpgUUID(str(uuid.uuid4())),
        "event_type": "assigned",
        "event_date": AT + timedelta(microseconds=1),
        "assignee": {"id": uuid.uuid4(), "name": "Ada Obi"},
        "equipment": "MacBook",
        "actor": None,
        "payload": {
            "note": 'quote " back\\slash \n\t\x01 \u2028 é 😀',
            "ratio": 0.1,
            "big": 1e16,
            "n": [1, None],
        },
    }
    device = {
        "id": AsyncpgUUID(str(uuid.uuid4())),
        "title": "MacBook",
        "year": "2024",
        "make": None,
        "model": "M3",
        "state": "Brand_New",
        "source": "External",
        "purchase_date": AT.astimezone(timezone(timedelta(hours=5, minutes=30))),
        "purchase_price": Decimal("1200.500000").quantize(Decimal("0.01")),
        "type": "Laptop",
        "hash_code": None,
        "asset_order_id": None,
        "catalog": {"sku": "X", "nested": {"list": [1.5, "two", True]}},
        "currency": {
            "id": uuid.uuid4(),
            "name": "US Dollar",
            "code": "USD",
            "symbol": "$",
            "status": "Active",
            "created_at": AT,
            "updated_at": AT,
        },
        "image_url": None,
        "serial_number": "SN-1",
        "other_details": json.dumps(["a", "b"]),
        "specs": {"memory": "16 GB", "storage": None, "color": None},
        "description": "",
        "status": "Assigned",
        "country": "Nigeria",
        "country_code": "NG",
        "custom_fields": {"imei": "356938035643809", "ram": 16, "tags": ["loaner"], "rugged": True},
        "location_id": None,
        "home_location_id": None,
        "created_at": AT,
        "updated_at": datetime(2026, 2, 1, tzinfo=UTC),
        "assignee": None,
        "history": [entry],
        "device_setup": None,
        "score": 83,
        "missing_information": ["make", "image_url"],
        "has_missing_information": True,
        "insurance_expiring_in": None,
        "usage_duration": "Unknown",
        "storage_duration": None,
        "documents": [{"name": "invoice.pdf"}],
    }
    return device | overrides


@pytest.mark.parametrize(
    "data",
    [
        _device(),
        _device(purchase_price=Decimal("0.123456"), purchase_date=None, currency=None, history=[]),
        _device(purchase_price=Decimal("1E+3"), device_setup={"mdm": {"enrolled": False}}),
    ],
)
def test_render_json_writes_the_bytes_of_the_response_model(data: dict[str, Any]) -> None:
    answer = {"success": True, "message": "Equipment fetched successfully.", "data": data}
    model = JsonAnswer(Envelope[EquipmentOut], 200, True)
    assert render_json(answer) == model(answer).body


DETAIL_ONLY = ("device_setup", "score", "missing_information", "has_missing_information", "documents")
DETAIL_ONLY += ("insurance_expiring_in", "usage_duration", "storage_duration")


def test_render_json_writes_a_list_page_as_its_model_does() -> None:
    record = {key: value for key, value in _device().items() if key not in DETAIL_ONLY}
    entry = record["history"][0]
    record["history"] = [{key: entry[key] for key in ("id", "event_type", "event_date", "assignee")}]
    counters = {"total": 31, "per_page": 15, "current_page": 1, "last_page": 3}
    answer = {"success": True, "message": "Fetched.", "data": {"data": [record], **counters}, **counters}
    assert render_json(answer) == JsonAnswer(EquipmentListEnvelope, 200, True)(answer).body


def test_what_orjson_cannot_write_is_left_to_the_response_model() -> None:
    with pytest.raises(orjson.JSONEncodeError):
        render_json({"data": {"payload": {"huge": 2**70}}})


@given(
    moment=st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    offset_minutes=st.sampled_from([None, 0, 330, -600]),
    whole_second=st.booleans(),
)
def test_format_timestamp_writes_every_time_in_utc_with_its_microseconds(
    moment: datetime, offset_minutes: int | None, whole_second: bool
) -> None:
    """orjson writes the service's own times (UTC) and leaves out a whole second's microseconds,
    which the answers always give; any other time is converted."""
    if whole_second:
        moment = moment.replace(microsecond=0)
    if offset_minutes is not None:
        zone = UTC if offset_minutes == 0 else timezone(timedelta(minutes=offset_minutes))
        moment = moment.replace(tzinfo=zone)
    utc = moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)
    assert format_timestamp(moment) == utc.isoformat(timespec="microseconds") + "Z"
