"""Inputs that once made a 500 or a wrong answer, handled by one place each (decisions §12):
NUL characters anywhere, malformed framing, and the methods a 405 names."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.factories import Api, assert_error
from tests.people.helpers import create_employee, employee_body

NUL_MESSAGE = "Must not contain NUL characters (\\u0000)."


@pytest.mark.one_database
@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/client/departments", {"name": "Re\u0000search"}, "name"),
        ("/client/employees", employee_body(first_name="A\u0000da"), "first_name"),
        (
            "/client/employees/bulk",
            {"employees": [[employee_body(email="x\u0000@acme.io")]]},
            "employees.0.0.email",
        ),
        ("/client/equipment", {"title": "Mac\u0000Book", "status": "Unassigned"}, "title"),
        ("/client/equipment", {"title": "MacBook", "specs": {"memory": "16\u0000GB"}}, "specs.memory"),
        (
            "/client/transactions/initiate",
            {"payment_method": "Card", "employee_country_id": "N\u0000G", "orders": {}},
            "employee_country_id",
        ),
        ("/client/departments", {"na\u0000me": "Research"}, "name"),
    ],
)
def test_a_nul_in_a_body_is_422_naming_the_field(
    api: Api, path: str, body: dict[str, Any], field: str
) -> None:
    response = api.post(path, body)
    error = assert_error(response, 422)
    assert error["errors"] == {field: [NUL_MESSAGE]}
    assert error["message"] == f"{field}: {NUL_MESSAGE}"
    assert api.get("/client/departments").json()["data"]["total"] == 0
    assert api.get("/client/employees").json()["data"]["total"] == 0


@pytest.mark.one_database
def test_a_nul_in_a_patch_is_422_and_changes_nothing(api: Api) -> None:
    employee = create_employee(api)
    response = api.patch(f"/client/employees/{employee['id']}", {"job_title": "Boss\u0000"})
    assert assert_error(response, 422)["errors"] == {"job_title": [NUL_MESSAGE]}
    assert api.get(f"/client/employees/{employee['id']}").json()["data"] == employee


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/client/employees", "search=a%00b"),
        ("/client/equipment", "country=N%00G"),
        ("/client/equipment", "serial_number=SN%001"),
        ("/client/equipment", "memory=16%00"),
        ("/client/equipment", "storage=1%00TB"),
        ("/client/assets", "country_id=N%00G&currency_code=NGN"),
        ("/client/assets", "country_id=NG&currency_code=NG%00N"),
    ],
)
def test_a_nul_in_a_query_is_422_naming_the_parameter(api: Api, path: str, query: str) -> None:
    response = api.client.get(f"/api/v2{path}?{query}", headers=api.headers)
    name = next(part.split("=")[0] for part in query.split("&") if "%00" in part)
    assert assert_error(response, 422)["errors"] == {f"query.{name}": [NUL_MESSAGE]}


@pytest.mark.parametrize(
    "path",
    [
        "/api/v2/client/employees/abc%00def",
        "/api/v2/client/transactions/OTF%00X/verify",
        "/sandbox/checkout/OTF%00X",
    ],
)
def test_a_nul_in_a_path_is_404(api: Api, path: str) -> None:
    assert_error(api.client.get(path, headers=api.headers), 404)


@pytest.mark.one_database
def test_a_malformed_content_length_is_400(client: TestClient, api: Api) -> None:
    response = client.post(
        "/api/v2/client/departments",
        content=b'{"name": "Research"}',
        headers={**api.headers, "Content-Type": "application/json", "Content-Length": "-1"},
    )
    assert_error(response, 400, "Content-Length")


@pytest.mark.one_database
@pytest.mark.parametrize(
    ("path", "method", "allowed"),
    [
        ("/client/employees", "PUT", "GET, HEAD, POST"),
        ("/client/employees/00000000-0000-4000-8000-000000000000", "PUT", "DELETE, GET, HEAD, PATCH"),
        # a fixed path names its own methods, not those of /client/equipment/{equipmentId}
        ("/client/equipment/in-storage", "POST", "GET, HEAD"),
        ("/client/countries", "DELETE", "GET, HEAD"),
    ],
)
def test_a_405_names_every_method_of_the_path(api: Api, path: str, method: str, allowed: str) -> None:
    response = api.request(method, path, json={})
    assert_error(response, 405, allowed)
    assert response.headers["allow"] == allowed


@pytest.mark.parametrize("price", ["9999999999999", "1000000000000", 1e300])
def test_a_price_beyond_what_any_database_stores_is_422(api: Api, price: object) -> None:
    """On SQLite amounts are integer millionths: 9,999,999,999,999 once overflowed into a 500."""
    created = api.post("/client/equipment", {"title": "MacBook", "purchase_price": price})
    assert "purchase_price" in assert_error(created, 422)["errors"]
    device = api.post("/client/equipment", {"title": "MacBook", "purchase_price": "999999999999.99"})
    assert device.status_code == 201, device.text
    patched = api.patch(f"/client/equipment/{device.json()['data']['id']}", {"purchase_price": price})
    assert "purchase_price" in assert_error(patched, 422)["errors"]
    assert api.get(f"/client/equipment/{device.json()['data']['id']}").json()["data"]["purchase_price"] == (
        "999999999999.99"
    )


def test_a_time_in_other_digits_than_0_to_9_is_422(api: Api) -> None:
    """ISO 8601 is written in ASCII digits; Python's \\d (and its date parser) took others too."""
    arabic = "\u0662\u0660\u0662\u0666-\u0660\u0661-\u0660\u0661T\u0660\u0660:\u0660\u0660:\u0660\u0660Z"
    response = api.get("/client/equipment", updated_since=arabic)
    assert assert_error(response, 422)["errors"] == {
        "query.updated_since": ["Give an ISO 8601 date and time, such as 2026-01-31T09:30:00Z."]
    }


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (  # a "+" not sent as %2B arrives as a space
            "2026-11-28T17:32:00 05:30",
            "The offset's '+' arrived as a space: in a query string send it as %2B "
            "(2026-01-31T09:30:00%2B05:30), or give the time in UTC (2026-01-31T04:00:00Z).",
        ),
        (
            "2026-11-28T25:00:00Z",
            "Give an ISO 8601 date and time, such as 2026-01-31T09:30:00Z: this one does not exist (hour "
            "must be in 0..23).",
        ),
        (
            "2026-02-30T10:00:00Z",
            "Give an ISO 8601 date and time, such as 2026-01-31T09:30:00Z: this one does not exist (day is "
            "out of range for month).",
        ),
        ("2026-11-28T17:32:00Z and more", "Give an ISO 8601 date and time, such as 2026-01-31T09:30:00Z."),
        (  # Python's words were "offset must be a timedelta strictly between -timedelta(hours=24)..."
            "2026-12-05T06:00:00+24:00",
            "Give an ISO 8601 date and time, such as 2026-01-31T09:30:00Z: this one's offset does not exist "
            "(an offset is between -23:59 and +23:59).",
        ),
    ],
)
def test_a_time_that_cannot_be_read_is_said_in_words_a_person_can_act_on(
    api: Api, given: str, message: str
) -> None:
    """Not the parser's "unexpected extra characters at the end of the input"."""
    for path, name in (("/client/equipment", "updated_since"), ("/client/events", "since")):
        assert assert_error(api.get(path, **{name: given}), 422)["errors"] == {f"query.{name}": [message]}
    listed = api.get("/client/equipment", updated_since="2026-11-28T17:32:00+05:30")
    assert listed.status_code == 200, listed.text  # sent as %2B (httpx encodes it), the offset is read


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_a_time_outside_the_storable_years_is_422(api: Api, when: str) -> None:
    response = api.post("/client/equipment", {"title": "MacBook", "purchase_date": when})
    assert assert_error(response, 422)["errors"]["purchase_date"] == [
        "The time falls outside the years 1 to 9999 once converted to UTC."
    ]


FIXED_PATHS = [  # a fixed path beside `{id}` routes, and the methods it takes
    ("/client/equipment/bulk", "POST"),
    ("/client/equipment/bulk-move", "POST"),
    ("/client/equipment/import", "POST"),
    ("/client/employees/bulk", "POST"),
    ("/client/employees/import", "POST"),
    ("/client/equipment/export", "GET, HEAD"),
    ("/client/employees/export", "GET, HEAD"),
    ("/client/equipment/in-storage", "GET, HEAD"),
]
METHODS = ["GET", "PATCH", "PUT", "DELETE", "POST"]


@pytest.mark.one_database
@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        (method, path, allowed)
        for method in METHODS
        for path, allowed in FIXED_PATHS
        if method not in allowed.split(", ")
    ],
)
def test_a_fixed_path_beside_an_id_answers_405_for_the_id_routes_methods(
    api: Api, path: str, allowed: str, method: str
) -> None:
    """`/client/equipment/bulk` is also a value of `/client/equipment/{equipmentId}`: the fixed path
    wins, so PATCH or DELETE on it is a 405 naming its own methods, not a 404 or 422 for an id."""
    response = api.request(method, path, json={})
    assert_error(response, 405, f"{method} is not allowed here; this path takes {allowed}.")
    assert response.headers["allow"] == allowed


@pytest.mark.one_database
@pytest.mark.parametrize(
    ("path", "method", "status", "fragment"),
    [
        ("/client/equipment/bulk", "POST", 422, "equipment: Field required"),
        ("/client/equipment/bulk-move", "POST", 422, "equipment_ids: Field required"),
        ("/client/equipment/import", "POST", 415, "text/csv"),
        ("/client/employees/bulk", "POST", 422, "employees: Field required"),
        ("/client/employees/import", "POST", 415, "text/csv"),
        ("/client/equipment/export", "GET", 200, None),
        ("/client/employees/export", "GET", 200, None),
        ("/client/equipment/in-storage", "GET", 200, None),
    ],
)
def test_a_fixed_path_beside_an_id_takes_its_own_methods(
    api: Api, path: str, method: str, status: int, fragment: str | None
) -> None:
    """Its own methods reach the fixed path's endpoint, never the `{id}` route's."""
    response = api.request(method, path, json={} if method == "POST" else None)
    if fragment is None:
        assert response.status_code == status, response.text
    else:
        assert_error(response, status, fragment)
