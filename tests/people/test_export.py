"""The employee CSV export: header, the list's filters and order, departments, injection, tenancy."""

from __future__ import annotations

import csv
import io

import httpx
import pytest

from outfitter.csvio.writer import cell
from outfitter.people import export
from tests.factories import Api, assert_error
from tests.people.helpers import create_employee


def read_csv(response: httpx.Response) -> list[dict[str, str]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    assert response.headers["content-disposition"].startswith('attachment; filename="employees-')
    rows = list(csv.reader(io.StringIO(response.text, newline="")))
    assert rows[0] == list(export.COLUMNS)
    return [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]


def test_export_writes_the_list_with_departments(api: Api, other_api: Api) -> None:
    ada = create_employee(api, first_name="Ada", country_id="Kenya", job_title="Engineer")
    bob = create_employee(api, first_name="=cmd|' /C calc'!A0", last_name="@Bob")
    create_employee(other_api, first_name="Stranger")
    made = api.post("/client/departments", {"name": "Ops", "member_ids": [ada["id"]]})
    assert made.status_code == 201, made.text
    assert api.post("/client/departments", {"name": "R&D", "member_ids": [ada["id"]]}).status_code == 201
    rows = read_csv(api.get("/client/employees/export"))
    assert [row["id"] for row in rows] == [bob["id"], ada["id"]]
    assert rows[1]["departments"] == "Ops; R&D" and rows[0]["departments"] == ""
    assert rows[1]["country_code"] == "KE" and rows[1]["currency_code"] == "KES"
    assert rows[1]["job_title"] == "Engineer" and rows[1]["created_at"] == ada["created_at"]
    assert rows[1]["phone"] == "'+234 801 234 5678"  # a leading + is escaped like any formula start
    assert rows[0]["first_name"] == "'=cmd|' /C calc'!A0" and rows[0]["last_name"] == "'@Bob"


def test_export_takes_the_list_filters(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export, "CHUNK_ROWS", 2)
    for index in range(5):
        create_employee(api, first_name=f"Kim{index}", country_id="KE")
    create_employee(api, first_name="Zed")
    every = read_csv(api.get("/client/employees/export"))
    listed = api.get("/client/employees", per_page=100).json()["data"]["data"]
    assert [row["id"] for row in every] == [record["id"] for record in listed] and len(every) == 6
    assert len(read_csv(api.get("/client/employees/export", country="KE"))) == 5
    assert [row["first_name"] for row in read_csv(api.get("/client/employees/export", search="zE"))] == [
        "Zed"
    ]
    assert list(assert_error(api.get("/client/employees/export", country="Atlantis"), 422)["errors"]) == [
        "query.country"
    ]
    body = assert_error(api.get("/client/employees/export", department_id="nope"), 422)
    assert list(body["errors"]) == ["query.department_id"]


def test_every_formula_start_is_escaped() -> None:
    for text in ("=1", "+1", "-1", "@a", "\tx", "\rx"):
        assert cell(text) == "'" + text
    assert cell("a=1") == "a=1" and cell(None) == "" and cell(True) == "true" and cell(-5) == "'-5"
