"""The commonest writes, POST /client/employees and POST /client/equipment, answer every kind of
request a client sends (content types, bodies the model refuses, taken values, tokens, keys) as
every endpoint does: they reach their endpoint through the router, like every request.

Each request is sent twice, each time with its own unique values (an email, a serial number),
since a create cannot be repeated: the answers must be the same once those values, new ids and
times are set aside, and be the status the case expects."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.core.errors import DATABASE_UNAVAILABLE
from outfitter.models import Employee
from tests.core.test_unavailable import ANY_TOKEN, assert_unavailable, unreachable_client  # noqa: F401
from tests.equipment.helpers import make_employee
from tests.factories import Api, CompanyFactory, assert_error

EMPLOYEES = "/api/v2/client/employees"
EQUIPMENT = "/api/v2/client/equipment"
JSON = {"Content-Type": "application/json"}
_unique = itertools.count()

# A request: (path, headers, body), the body made for a unique suffix `u` (bytes: sent as they are).
Request = tuple[str, dict[str, str], Callable[[str], Any]]


def _employee(u: str, **overrides: Any) -> dict[str, Any]:
    body = {
        "first_name": "Ada",
        "last_name": "Obi",
        "email": f"ada.{u}@acme.io",
        "country_id": "Kenya",
        "phone": "+254 700 000000",
        "address": "1 Moi Avenue",
    }
    return body | overrides


def _device(u: str, **overrides: Any) -> dict[str, Any]:
    body = {
        "title": "MacBook Pro 14",
        "serial_number": f"SN-{u}",
        "type": "Laptop",
        "country": "NG",
        "currency": "usd",
        "purchase_price": "1299.5",
        "specs": {"memory": "16GB", "storage": "512 GB"},
    }
    return body | overrides


def _bytes(body: Callable[[str], Any]) -> Callable[[str], bytes]:
    return lambda u: json.dumps(body(u)).encode()


CREATED: list[tuple[str, Request]] = [
    ("employee", (EMPLOYEES, JSON, _employee)),
    ("employee, charset", (EMPLOYEES, {"Content-Type": "application/json; charset=utf-8"}, _employee)),
    ("employee, +json", (EMPLOYEES, {"Content-Type": "application/merge-patch+json"}, _employee)),
    ("email taken (409)", (EMPLOYEES, JSON, lambda u: _employee(u, email="taken@acme.io"))),
    (
        "unknown country (422 of the service)",
        (EMPLOYEES, JSON, lambda u: _employee(u, country_id="Atlantis")),
    ),
    ("device", (EQUIPMENT, JSON, _device)),
    ("device in storage", (EQUIPMENT, JSON, lambda u: _device(u, status="In_Storage"))),
    ("device assigned", (EQUIPMENT, JSON, lambda u: _device(u, status="Assigned", assignee_id="{employee}"))),
    (
        "device, unknown assignee (422 of the service)",
        (
            EQUIPMENT,
            JSON,
            lambda u: _device(u, status="Assigned", assignee_id="00000000-0000-4000-8000-000000000000"),
        ),
    ),
    ("serial taken (409)", (EQUIPMENT, JSON, lambda u: _device(u, serial_number="SN-TAKEN"))),
]
REFUSED_BY_THE_MODEL: list[tuple[str, Request]] = [
    ("invalid email", (EMPLOYEES, JSON, lambda u: _employee(u, email="not-an-email"))),
    ("unknown field", (EMPLOYEES, JSON, lambda u: _employee(u, nickname="Ada"))),
    ("a list, not an object", (EMPLOYEES, JSON, lambda u: [_employee(u)])),
    ("malformed JSON", (EMPLOYEES, JSON, lambda u: b'{"first_name": "Ada",')),
    ("not UTF-8", (EMPLOYEES, JSON, lambda u: b'{"first_name": "\xff"}')),
    ("empty body", (EMPLOYEES, JSON, lambda u: b"")),
    ("no content type", (EMPLOYEES, {}, _bytes(_employee))),
    ("text/plain", (EMPLOYEES, {"Content-Type": "text/plain"}, _bytes(_employee))),
    ("device, price as a number", (EQUIPMENT, JSON, lambda u: _device(u, purchase_price=12.5))),
    ("device, status Sold", (EQUIPMENT, JSON, lambda u: _device(u, status="Sold"))),
]
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")


def _send(
    api: Api, request: Request, u: str, employee: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    path, request_headers, body = request
    made = body(u)
    content = made if isinstance(made, bytes) else json.dumps(made).replace("{employee}", employee).encode()
    return api.client.post(
        path, content=content, headers={**api.headers, **request_headers, **(headers or {})}
    )


def _comparable(response: httpx.Response, u: str) -> tuple[int, dict[str, str], str]:
    """Status, headers and body, with this request's unique values, new ids and times set aside."""
    text = TIME.sub("<time>", UUID.sub("<id>", response.text.replace(u, "<u>")))
    headers = {
        name: value
        for name, value in response.headers.items()
        if name not in {"x-request-id", "content-length"}
    }
    return response.status_code, headers, text


def _setting_up(api: Api, db: Session) -> str:
    employee = str(make_employee(db, api.company_id).id)
    assert api.post("/client/employees", _employee("taken", email="taken@acme.io")).status_code == 201
    assert api.post("/client/equipment", _device("taken", serial_number="SN-TAKEN")).status_code == 201
    return employee


CASES = CREATED + REFUSED_BY_THE_MODEL


@pytest.mark.parametrize(("case", "request_"), CASES, ids=[case for case, _ in CASES])
def test_every_answer_is_the_same_for_the_same_request(
    api: Api, db: Session, case: str, request_: Request
) -> None:
    employee = _setting_up(api, db)
    first_u, second_u = f"h{next(_unique)}", f"s{next(_unique)}"
    first = _send(api, request_, first_u, employee)
    second = _send(api, request_, second_u, employee)
    assert _comparable(first, first_u) == _comparable(second, second_u), case
    if "(409)" in case:
        assert_error(first, 409)
    elif "(422" in case:
        assert_error(first, 422)
    elif (case, request_) in REFUSED_BY_THE_MODEL:  # a body that is not JSON is a 400, a 415
        assert first.status_code in (400, 415, 422)
        assert_error(first, first.status_code)
    else:
        assert first.status_code == 201, first.text
        assert first_u in first.text


def test_a_key_is_claimed_and_replayed(api: Api, db: Session) -> None:
    key = {"Idempotency-Key": "hot-write-1"}
    first = api.post("/client/employees", _employee("key"), headers=key)
    again = api.post("/client/employees", _employee("key"), headers=key)
    assert first.status_code == again.status_code == 201
    assert again.content == first.content  # replayed, not created twice
    other = api.post("/client/employees", _employee("other"), headers=key)
    assert other.status_code == 409 and "Idempotency-Key" in other.json()["message"]
    emails = db.scalars(select(Employee.email).where(Employee.email.like("ada.%@acme.io"))).all()
    assert emails == ["ada.key@acme.io"]  # the replay and the refused one never reached the endpoint


def test_token_and_scope_checks_are_the_same(companies: CompanyFactory, api: Api) -> None:
    reader = companies.token(api, scopes=["read"])
    refused = reader.post("/client/equipment", _device("read-only"))
    assert refused.status_code == 403 and "'write' scope" in refused.json()["message"]
    unknown = api.client.post(EQUIPMENT, json=_device("unknown"), headers=ANY_TOKEN)
    assert unknown.status_code == 401 and unknown.json()["message"] == "Invalid token."
    missing = api.client.post(EQUIPMENT, json=_device("missing"))
    assert_error(missing, 401, "Authentication required")


def test_an_unreachable_database_is_503(unreachable_client: Any) -> None:  # noqa: F811
    response = unreachable_client.post(EMPLOYEES, json=_employee("down"), headers=ANY_TOKEN)
    assert_unavailable(response, DATABASE_UNAVAILABLE)
