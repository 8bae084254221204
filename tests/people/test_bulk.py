"""Bulk employee creation: shapes, limits, all or nothing, errors keyed by position, constant statements."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from sqlalchemy import Engine, event, func, select
from sqlalchemy.orm import Session

from outfitter.models import Employee
from tests.factories import Api, assert_error
from tests.people.helpers import create_employee, employee_body
from tests.people.test_employees import EMPLOYEE_FIELDS


def employee_count(db: Session) -> int:
    count = db.scalar(select(func.count()).select_from(Employee)) or 0
    db.rollback()  # end the read: SQLite writers wait for it
    return count


def test_bulk_creates_the_interface_shape_and_mirrors_it(api: Api, db: Session) -> None:
    group = [employee_body(), employee_body(country_id="Kenya"), employee_body(email="Mixed.Case@Acme.IO")]
    response = api.post("/client/employees/bulk", {"employees": [group]})
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["success"] is True
    assert body["message"] == "3 employees created successfully."
    [created] = body["data"]
    assert len(created) == 3
    for sent, record in zip(group, created, strict=True):
        assert set(record) == EMPLOYEE_FIELDS
        assert record["email"] == sent["email"].lower()
        assert record["departments"] == record["equipment"] == record["orders"] == []
        assert record["catalogs"] is None
        assert record["status"] == "Active"  # as a single create's, never null
    assert created[1]["country_code"] == "KE" and created[1]["currency_code"] == "KES"
    listed = {item["id"]: item for item in api.get("/client/employees", per_page=100).json()["data"]["data"]}
    assert all(listed[record["id"]] == record for record in created)
    assert employee_count(db) == 3


def test_bulk_accepts_several_groups_and_a_flat_list(api: Api) -> None:
    nested = api.post(
        "/client/employees/bulk", {"employees": [[employee_body()], [employee_body(), employee_body()]]}
    )
    assert nested.status_code == 201, nested.text
    assert [len(group) for group in nested.json()["data"]] == [1, 2]
    flat = api.post("/client/employees/bulk", {"employees": [employee_body()]})
    assert flat.status_code == 201, flat.text
    assert flat.json()["message"] == "1 employee created successfully."
    assert len(flat.json()["data"]) == 1 and flat.json()["data"][0]["id"]


def test_one_bad_item_fails_the_batch_with_its_position(api: Api, db: Session) -> None:
    group = [employee_body() for _ in range(14)]
    group[12]["email"] = "broken"
    group[3]["country_id"] = "Atlantis"
    del group[5]["phone"]
    group[7]["salary"] = 10
    body = assert_error(api.post("/client/employees/bulk", {"employees": [group]}), 422)
    assert set(body["errors"]) == {
        "employees.0.12.email",
        "employees.0.3.country_id",
        "employees.0.5.phone",
        "employees.0.7.salary",
    }
    assert employee_count(db) == 0


def test_flat_list_errors_are_keyed_without_the_group(api: Api) -> None:
    body = assert_error(
        api.post("/client/employees/bulk", {"employees": [employee_body(), {"email": "x"}]}), 422
    )
    assert "employees.1.email" in body["errors"] and "employees.1.first_name" in body["errors"]


def test_a_duplicate_inside_the_batch_is_422_at_the_duplicate(api: Api, db: Session) -> None:
    group = [employee_body(email="same@acme.io"), employee_body(), employee_body(email="SAME@acme.io")]
    body = assert_error(api.post("/client/employees/bulk", {"employees": [group]}), 422)
    assert list(body["errors"]) == ["employees.0.2.email"]
    assert "employees.0.0" in body["errors"]["employees.0.2.email"][0]
    assert employee_count(db) == 0


def test_a_duplicate_of_an_existing_employee_is_422_at_its_position(api: Api, db: Session) -> None:
    create_employee(api, email="taken@acme.io")
    group = [employee_body(), employee_body(email="Taken@Acme.io")]
    body = assert_error(api.post("/client/employees/bulk", {"employees": [[employee_body()], group]}), 422)
    assert list(body["errors"]) == ["employees.1.1.email"]
    assert employee_count(db) == 1


def test_the_batch_size_is_limited(api: Api, db: Session) -> None:
    too_many = [{"first_name": "x"}] * 1001
    body = assert_error(api.post("/client/employees/bulk", {"employees": [too_many]}), 422, "1,000")
    assert list(body["errors"]) == ["employees"]
    for empty in ([], [[]]):
        assert list(
            assert_error(api.post("/client/employees/bulk", {"employees": empty}), 422)["errors"]
        ) == ["employees"]
    assert employee_count(db) == 0


def test_malformed_bulk_bodies_are_422(api: Api) -> None:
    assert "employees" in assert_error(api.post("/client/employees/bulk", {}), 422)["errors"]
    assert "employees" in assert_error(api.post("/client/employees/bulk", {"employees": "x"}), 422)["errors"]
    mixed = {"employees": [[employee_body()], employee_body()]}
    assert "employees" in assert_error(api.post("/client/employees/bulk", mixed), 422)["errors"]
    body = assert_error(api.post("/client/employees/bulk", {"employees": [[1, "two"]]}), 422)
    assert set(body["errors"]) == {"employees.0.0", "employees.0.1"}


def test_a_thousand_employees_in_a_constant_number_of_statements(api: Api, app: FastAPI, db: Session) -> None:
    engine: Engine = app.state.engine  # the app's own engine, which serves the requests
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    def post(size: int) -> int:
        statements.clear()
        group = [employee_body(country_id=("NG", "Kenya", "za")[index % 3]) for index in range(size)]
        event.listen(engine, "before_cursor_execute", count)
        try:
            response = api.post("/client/employees/bulk", {"employees": [group]})
        finally:
            event.remove(engine, "before_cursor_execute", count)
        assert response.status_code == 201, response.text[:500]
        assert response.json()["message"] == f"{size:,}".replace(",", "") + " employees created successfully."
        return len(statements)

    small = post(3)
    large = post(1000)
    assert small > 0  # counted on the engine that serves the requests
    assert large <= small + 2  # the driver may split a very large executemany into a few batches
    assert employee_count(db) == 1003
