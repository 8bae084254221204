"""Employees and departments: each change writes exactly one event, in its own transaction."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from outfitter.http import unit_of_work
from tests.events.helpers import assert_event, log, only, stored_events
from tests.factories import Api, assert_error
from tests.people.helpers import create_employee, employee_body


def test_creating_an_employee_records_employee_created_with_the_answer(api: Api) -> None:
    response = api.post("/client/employees", employee_body(email="grace@acme.io"))
    assert response.status_code == 201, response.text
    employee = response.json()["data"]
    assert_event(only(api, "employee.created"), "employee.created", employee["id"], employee)
    assert len(log(api)) == 1


def test_bulk_creation_records_one_event_per_employee(api: Api) -> None:
    body = {"employees": [[employee_body(), employee_body()], [employee_body()]]}
    response = api.post("/client/employees/bulk", body)
    assert response.status_code == 201, response.text
    created = [employee for group in response.json()["data"] for employee in group]
    events = {event["subject_id"]: event for event in log(api, type="employee.created")}
    assert set(events) == {employee["id"] for employee in created}
    for employee in created:
        assert_event(events[employee["id"]], "employee.created", employee["id"], employee)


def test_a_patch_records_employee_updated_and_a_no_op_patch_records_nothing(api: Api) -> None:
    employee = create_employee(api, job_title="Engineer")
    patched = api.patch(f"/client/employees/{employee['id']}", {"job_title": "CTO", "country": "KE"})
    assert patched.status_code == 200, patched.text
    answer = patched.json()["data"]
    assert answer["country_code"] == "KE"
    assert_event(only(api, "employee.updated"), "employee.updated", employee["id"], answer)

    same = api.patch(f"/client/employees/{employee['id']}", {"job_title": "CTO"})
    assert same.status_code == 200
    assert len(log(api, type="employee.updated")) == 1


def test_offboarding_records_the_employee_as_the_delete_answered(api: Api) -> None:
    employee = create_employee(api)
    deleted = api.delete(f"/client/employees/{employee['id']}")
    assert deleted.status_code == 200, deleted.text
    assert_event(
        only(api, "employee.offboarded"), "employee.offboarded", employee["id"], deleted.json()["data"]
    )


def test_departments_record_created_updated_and_deleted(api: Api) -> None:
    head = create_employee(api)
    member = create_employee(api)
    created = api.post("/client/departments", {"name": "Engineering", "head_id": head["id"]})
    assert created.status_code == 201, created.text
    department = created.json()["data"]
    assert_event(only(api, "department.created"), "department.created", department["id"], department)

    updated = api.patch(f"/client/departments/{department['id']}", {"member_ids": [member["id"]]})
    assert updated.status_code == 200, updated.text
    answer = updated.json()["data"]
    assert answer["member_count"] == 1
    assert_event(only(api, "department.updated"), "department.updated", department["id"], answer)

    deleted = api.delete(f"/client/departments/{department['id']}")
    assert deleted.status_code == 200, deleted.text
    before = deleted.json()["data"]
    assert before["member_count"] == 1  # as it was just before the delete
    assert_event(only(api, "department.deleted"), "department.deleted", department["id"], before)


def test_refused_requests_leave_no_event(api: Api, db: Session) -> None:
    employee = create_employee(api, email="taken@acme.io")
    assert stored_events(db) == 1
    assert_error(api.post("/client/employees", employee_body(email="taken@acme.io")), 409)
    assert_error(api.post("/client/employees", employee_body(email="not-an-email")), 422)
    bulk = {"employees": [employee_body(), employee_body(email="taken@acme.io")]}
    assert_error(api.post("/client/employees/bulk", bulk), 422)
    assert_error(api.patch(f"/client/employees/{employee['id']}", {"email": "x@acme.io"}), 422)
    assert_error(api.post("/client/departments", {"name": "Ops", "head_id": "nobody"}), 422)
    assert stored_events(db) == 1


def test_a_failure_after_the_write_takes_the_event_back_too(
    app: FastAPI, api: Api, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    def render_fails(answer: unit_of_work.JsonAnswer, result: Any) -> Any:
        raise RuntimeError("injected: the answer could not be serialised")

    monkeypatch.setattr(unit_of_work, "render", render_fails)
    with TestClient(app, raise_server_exceptions=False) as client:
        failed = client.post("/api/v2/client/employees", json=employee_body(), headers=api.headers)
    assert_error(failed, 500)
    assert stored_events(db) == 0
