"""Cursor mode as every list has it (db.keyset), shown on the employee and department lists:
the walk gives what the pages give, the cursor is signed and bound to its query, and the two modes
do not mix."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.factories import Api, assert_error, walk_cursor
from tests.people.helpers import create_employee


@pytest.fixture
def staff(api: Api) -> list[dict[str, Any]]:
    return [create_employee(api, first_name=name) for name in ("Ada", "Bola", "Chidi", "Dayo", "Efe")]


def _first_cursor(api: Api, path: str, **params: Any) -> str:
    page = api.get(path, limit=2, **params).json()["data"]
    assert page["next_cursor"], page
    cursor: str = page["next_cursor"]
    return cursor


def test_a_cursor_walk_gives_what_the_pages_give(api: Api, staff: list[dict[str, Any]]) -> None:
    paged = api.get("/client/employees", per_page=100).json()["data"]["data"]
    walked = walk_cursor(api, "/client/employees", limit=2)
    # Same records, same order (newest first), each marked not deleted.
    assert walked == [record | {"deleted": False} for record in paged]
    assert [record["id"] for record in walked] == [record["id"] for record in reversed(staff)]


def test_the_first_cursor_page_and_the_last(api: Api, staff: list[dict[str, Any]]) -> None:
    first = api.get("/client/employees", limit=3).json()
    assert first["success"] is True and first["message"] == "Employees fetched successfully."
    assert [record["first_name"] for record in first["data"]["data"]] == ["Efe", "Dayo", "Chidi"]
    assert first["data"]["limit"] == 3 and isinstance(first["data"]["next_cursor"], str)
    assert "total" not in first["data"] and "current_page" not in first["data"]
    last = api.get("/client/employees", limit=3, cursor=first["data"]["next_cursor"]).json()["data"]
    assert [record["first_name"] for record in last["data"]] == ["Bola", "Ada"]
    assert last["next_cursor"] is None
    exact = api.get("/client/employees", limit=5).json()["data"]
    assert len(exact["data"]) == 5 and exact["next_cursor"] is None  # no empty page at the end
    # The first page of cursor mode can also be asked for with an empty cursor.
    assert api.get("/client/employees", cursor="", limit=3).json()["data"] == first["data"]


def test_the_page_mode_answers_as_before(api: Api, staff: list[dict[str, Any]]) -> None:
    page = api.get("/client/employees", page=2, per_page=2).json()["data"]
    assert set(page) == {"data", "total", "per_page", "current_page", "last_page"}
    assert (page["total"], page["per_page"], page["current_page"], page["last_page"]) == (5, 2, 2, 3)
    assert [record["first_name"] for record in page["data"]] == ["Chidi", "Bola"]
    assert "deleted" not in page["data"][0]
    plain = api.get("/client/employees").json()["data"]
    assert plain["per_page"] == 15 and plain["current_page"] == 1


def test_the_limit_may_change_between_pages(api: Api, staff: list[dict[str, Any]]) -> None:
    cursor = _first_cursor(api, "/client/employees")
    rest = api.get("/client/employees", cursor=cursor, limit=10).json()["data"]
    assert [record["first_name"] for record in rest["data"]] == ["Chidi", "Bola", "Ada"]


def _tampered(cursor: str) -> str:
    payload, signature = cursor.split(".")
    decoded = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    decoded[-1] = "00000000-0000-0000-0000-000000000000"  # skip ahead to another id
    forged = base64.urlsafe_b64encode(json.dumps(decoded).encode()).rstrip(b"=").decode()
    return f"{forged}.{signature}"


@pytest.mark.one_database
@pytest.mark.parametrize("kind", ["altered", "garbage", "truncated", "unsigned"])
def test_a_tampered_cursor_is_422(api: Api, staff: list[dict[str, Any]], kind: str) -> None:
    cursor = _first_cursor(api, "/client/employees")
    bad = {
        "altered": _tampered(cursor),
        "garbage": "not-a-cursor",
        "truncated": cursor[:-3],
        "unsigned": cursor.split(".")[0],
    }[kind]
    body = assert_error(api.get("/client/employees", cursor=bad, limit=2), 422, "was altered")
    assert list(body["errors"]) == ["query.cursor"]


def test_a_cursor_is_bound_to_its_list_and_filters(api: Api, staff: list[dict[str, Any]]) -> None:
    cursor = _first_cursor(api, "/client/employees", search="a")
    assert api.get("/client/employees", cursor=cursor, limit=2, search="a").status_code == 200
    other_filter = api.get("/client/employees", cursor=cursor, limit=2, search="b")
    assert assert_error(other_filter, 422, "other filters")["errors"] == {
        "query.cursor": [
            "This cursor was made for another list, other filters or another sort: send it with the "
            "query it came from, or start again without a cursor."
        ]
    }
    assert_error(api.get("/client/employees", cursor=cursor, limit=2), 422, "other filters")
    assert_error(api.get("/client/departments", cursor=cursor, limit=2), 422, "another list")


def test_a_walk_may_write_its_updated_since_in_another_form(api: Api, staff: list[dict[str, Any]]) -> None:
    """A cursor is bound to the instant of `updated_since`, not its spelling: a client that parses
    the time and writes it back (`+00:00` for `Z`, another offset) goes on with its walk."""
    first = api.get("/client/employees", limit=2, updated_since="2000-01-01T00:00:00Z").json()["data"]
    rest = [
        api.get("/client/employees", cursor=first["next_cursor"], limit=2, updated_since=since)
        for since in ("2000-01-01T00:00:00+00:00", "2000-01-01T01:00:00+01:00")
    ]
    assert [response.status_code for response in rest] == [200, 200]
    assert rest[0].json()["data"]["data"] == rest[1].json()["data"]["data"] != []
    other_instant = api.get(
        "/client/employees", cursor=first["next_cursor"], limit=2, updated_since="2000-01-01T00:00:01Z"
    )
    assert_error(other_instant, 422, "other filters")


def test_another_companys_cursor_reveals_nothing(
    api: Api, other_api: Api, staff: list[dict[str, Any]]
) -> None:
    """A cursor only positions a walk: in another company's hands it walks that company's list."""
    cursor = _first_cursor(api, "/client/employees")
    response = other_api.get("/client/employees", cursor=cursor, limit=2)
    assert response.status_code == 200 and response.json()["data"]["data"] == []


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"page": 1, "cursor": "x"}, "query.cursor"),
        ({"per_page": 5, "limit": 5}, "query.limit"),
        ({"page": 2, "limit": 5}, "query.limit"),
        ({"page": 1, "updated_since": "2026-01-01T00:00:00Z"}, "query.updated_since"),
    ],
)
def test_pages_and_cursors_do_not_mix(api: Api, query: dict[str, Any], named: str) -> None:
    body = assert_error(api.get("/client/employees", **query), 422, "not both")
    assert body["errors"] == {
        named: ["Use either page and per_page, or cursor and limit (and updated_since), not both."]
    }


@pytest.mark.one_database
@pytest.mark.parametrize("limit", ["0", "101", "ten", "1.5", "1_0", "5.0", "+5"])
def test_a_limit_out_of_range_is_422(api: Api, limit: str) -> None:
    assert "query.limit" in assert_error(api.get("/client/employees", limit=limit), 422)["errors"]


def test_departments_walk_by_cursor(api: Api) -> None:
    created = [api.post("/client/departments", {"name": f"Team {n}"}).json()["data"] for n in range(5)]
    walked = walk_cursor(api, "/client/departments", limit=2)
    assert walked == [record | {"deleted": False} for record in reversed(created)]
