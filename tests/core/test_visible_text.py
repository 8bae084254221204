"""A name or title must show something: a value made only of spaces and invisible characters
(zero-width space, joiners, bidi controls, fillers) is refused with the same message everywhere
it is written, and so is one on several lines (a line break, a tab, a control character); the
OpenAPI document states the rule as the field's pattern."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from outfitter.core.schemas import NOT_ONE_LINE, NOTHING_VISIBLE, ONE_LINE_VISIBLE_PATTERN, VISIBLE_PATTERN
from outfitter.models import Department, Employee, Equipment
from tests.factories import Api, assert_error
from tests.people.helpers import create_employee, employee_body

INVISIBLE_ONLY = [
    "\u200b",  # zero-width space
    "\u200b\u200c\u200d",  # with the joiners
    " \u2060\ufeff ",  # word joiner, byte order mark, spaces around
    "\u3164",  # Hangul filler
    "\u202e\u00a0",  # a bidi override and a no-break space
    "\u00ad\u034f",  # soft hyphen, combining grapheme joiner
]
SHOWING = ["Zo\u00eb", "\u200bAda", "\u0645\u0631\u06cc\u200c\u0645", "\U0001f600", "\u00a0x"]


def count(db: Session, model: type[Any]) -> int:
    return db.scalar(select(func.count()).select_from(model)) or 0


@pytest.mark.one_database
@pytest.mark.parametrize("value", INVISIBLE_ONLY)
def test_an_invisible_name_is_refused_on_every_write(api: Api, db: Session, value: str) -> None:
    employee = create_employee(api)
    refusals = [
        (api.post("/client/employees", employee_body(first_name=value)), "first_name"),
        (api.patch(f"/client/employees/{employee['id']}", {"last_name": value}), "last_name"),
        (
            api.post("/client/employees/bulk", {"employees": [employee_body(job_title=value)]}),
            "employees.0.job_title",
        ),
        (api.post("/client/departments", {"name": value}), "name"),
        (api.post("/client/equipment", {"title": value, "type": "Laptop"}), "title"),
        (
            api.request(
                "POST",
                "/client/equipment/import",
                content=f"title,type\n{value},Laptop\n".encode(),
                headers={"Content-Type": "text/csv"},
            ),
            "rows.2.title",
        ),
    ]
    for response, field in refusals:
        body = assert_error(response, 422)
        assert body["errors"][field] == [NOTHING_VISIBLE], (field, body)
    assert api.get(f"/client/employees/{employee['id']}").json()["data"]["last_name"] == employee["last_name"]
    assert (count(db, Employee), count(db, Department), count(db, Equipment)) == (1, 0, 0)


@pytest.mark.parametrize("value", SHOWING)
def test_a_name_with_one_visible_character_is_kept_as_given(api: Api, value: str) -> None:
    """Joiners inside a word are part of it (Persian writes with U+200C): only text with nothing
    else is blank."""
    created = create_employee(api, first_name=value)
    assert created["first_name"] == value.strip()
    department = api.post("/client/departments", {"name": value})
    assert department.status_code == 201, department.text
    assert department.json()["data"]["name"] == value.strip()


@pytest.mark.one_database
def test_the_document_states_the_rule_the_server_applies(client: TestClient) -> None:
    document = client.get("/api/v2/openapi.json").json()
    schemas = document["components"]["schemas"]
    assert schemas["EmployeeCreate"]["properties"]["first_name"]["pattern"] == ONE_LINE_VISIBLE_PATTERN
    assert schemas["DepartmentCreate"]["properties"]["name"]["pattern"] == ONE_LINE_VISIBLE_PATTERN
    assert schemas["EquipmentCreate"]["properties"]["title"]["pattern"] == VISIBLE_PATTERN
    assert schemas["EmployeeCreate"]["properties"]["address"]["pattern"] == VISIBLE_PATTERN
    # The pattern reads the same in a client's regex engine as in ours: the JSON Schema form
    # (ECMA-262 escapes) is what Python compiles here.
    for pattern in (VISIBLE_PATTERN, ONE_LINE_VISIBLE_PATTERN):
        documented = re.compile(pattern)
        assert all(documented.search(value) is None for value in INVISIBLE_ONLY)
        assert all(documented.search(value) for value in SHOWING)
    # What the server strips from the ends first may be there; inside, no control character.
    one_line = re.compile(ONE_LINE_VISIBLE_PATTERN)
    assert all(one_line.search(value) for value in (" Ada\n", "\tAda Lovelace\r\n", "\u3000Zo\u00eb"))
    assert all(one_line.search(value) is None for value in SEVERAL_LINES)


SEVERAL_LINES = [
    "Ada\nLovelace",
    "Ada\r\nLovelace",
    "Ada\tLovelace",
    "Ada\u0007",
    "\u001cAda",
    "Ada\u0085Love",
]


@pytest.mark.one_database
@pytest.mark.parametrize("value", SEVERAL_LINES)
def test_a_name_on_several_lines_is_refused_on_every_write(api: Api, db: Session, value: str) -> None:
    """A line break or another control character inside a person's or a department's name breaks
    every list that shows it; one that prints nothing makes two names look alike. Line breaks
    around it are only spaces, stripped as before. (A device's title is free text.)"""
    employee = create_employee(api)
    refusals = [
        (api.post("/client/employees", employee_body(first_name=value)), "first_name"),
        (api.patch(f"/client/employees/{employee['id']}", {"last_name": value}), "last_name"),
        (
            api.post("/client/employees/bulk", {"employees": [employee_body(last_name=value)]}),
            "employees.0.last_name",
        ),
        (api.post("/client/departments", {"name": value}), "name"),
    ]
    for response, field in refusals:
        body = assert_error(response, 422)
        assert body["errors"][field] == [NOT_ONE_LINE], (field, body)
    kept = create_employee(api, first_name="\nGrace\r\n")
    assert kept["first_name"] == "Grace"
    assert (count(db, Employee), count(db, Department), count(db, Equipment)) == (2, 0, 0)
