"""A second company can neither read, change, delete nor detect the first one's people."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import Api, assert_error
from tests.people.helpers import create_employee, employee_body


@pytest.fixture
def first(api: Api) -> dict[str, Any]:
    """The first company's employee and department, as it answers them."""
    employee = create_employee(api, email="secret@acme.io")
    department = api.post(
        "/client/departments", {"name": "Research", "head_id": employee["id"], "member_ids": [employee["id"]]}
    )
    assert department.status_code == 201, department.text
    return {
        "employee": api.get(f"/client/employees/{employee['id']}").json()["data"],
        "department": department.json()["data"],
    }


def assert_unchanged(api: Api, first: dict[str, Any]) -> None:
    employee, department = first["employee"], first["department"]
    assert api.get(f"/client/employees/{employee['id']}").json()["data"] == employee
    assert api.get(f"/client/departments/{department['id']}").json()["data"] == department


def test_other_company_gets_404_on_employees(api: Api, other_api: Api, first: dict[str, Any]) -> None:
    path = f"/client/employees/{first['employee']['id']}"
    unknown = assert_error(other_api.get("/client/employees/00000000-0000-4000-8000-000000000000"), 404)
    assert assert_error(other_api.get(path), 404)["message"] == unknown["message"]
    assert_error(other_api.patch(path, {"first_name": "Mallory", "country": "KE"}), 404)
    assert_error(other_api.delete(path), 404)
    assert_unchanged(api, first)


def test_other_company_gets_404_on_departments(api: Api, other_api: Api, first: dict[str, Any]) -> None:
    path = f"/client/departments/{first['department']['id']}"
    assert_error(other_api.get(path), 404)
    assert_error(other_api.patch(path, {"name": "Pwned", "member_ids": []}), 404)
    assert_error(other_api.delete(path), 404)
    assert_unchanged(api, first)


def test_other_company_lists_none_of_them(api: Api, other_api: Api, first: dict[str, Any]) -> None:
    assert other_api.get("/client/employees").json()["data"]["total"] == 0
    assert other_api.get("/client/employees", search="secret").json()["data"]["data"] == []
    assert other_api.get("/client/departments").json()["data"]["total"] == 0
    body = assert_error(other_api.get("/client/employees", department_id=first["department"]["id"]), 422)
    assert "query.department_id" in body["errors"]


def test_other_company_cannot_use_them_as_head_or_members(
    api: Api, other_api: Api, first: dict[str, Any]
) -> None:
    foreign = first["employee"]["id"]
    own = create_employee(other_api)
    assert (
        "head_id"
        in assert_error(other_api.post("/client/departments", {"name": "X", "head_id": foreign}), 422)[
            "errors"
        ]
    )
    body = assert_error(
        other_api.post("/client/departments", {"name": "X", "member_ids": [own["id"], foreign]}), 422
    )
    assert list(body["errors"]) == ["member_ids.1"]
    department = other_api.post("/client/departments", {"name": "Mine"}).json()["data"]
    path = f"/client/departments/{department['id']}"
    assert "head_id" in assert_error(other_api.patch(path, {"head_id": foreign}), 422)["errors"]
    assert "member_ids.0" in assert_error(other_api.patch(path, {"member_ids": [foreign]}), 422)["errors"]
    assert_unchanged(api, first)


def test_other_company_cannot_detect_emails(api: Api, other_api: Api, first: dict[str, Any]) -> None:
    created = create_employee(other_api, email="SECRET@acme.io")
    assert created["email"] == "secret@acme.io"
    bulk = other_api.post("/client/employees/bulk", {"employees": [[employee_body(email="secret@acme.io")]]})
    assert bulk.status_code == 422  # a duplicate of its own employee now, not of the first company's
    assert list(bulk.json()["errors"]) == ["employees.0.0.email"]
    fresh = other_api.post("/client/employees/bulk", {"employees": [[employee_body()]]})
    assert fresh.status_code == 201
    assert_unchanged(api, first)


def test_same_department_name_is_free_in_another_company(other_api: Api, first: dict[str, Any]) -> None:
    response = other_api.post("/client/departments", {"name": "Research"})
    assert response.status_code == 201
    assert response.json()["data"]["company"]["name"] == "Globex Corp"
