"""Departments through HTTP: create, list, retrieve, patch members and head, counts, soft delete."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.models import Department, UserDepartment
from tests.factories import Api, assert_error, counting_statements
from tests.people.helpers import create_employee, give_equipment, unassign

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
DEPARTMENT_FIELDS = {
    "id",
    "company",
    "name",
    "member_count",
    "asset_count",
    "created_at",
    "updated_at",
    "head",
    "members",
}
MEMBERSHIP_FIELDS = {
    "id",
    "company_id",
    "user_id",
    "department_id",
    "status",
    "created_at",
    "updated_at",
    "deleted_at",
}


def create_department(api: Api, **body: Any) -> dict[str, Any]:
    response = api.post("/client/departments", body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def test_create_answers_every_department_field(api: Api) -> None:
    head = create_employee(api, first_name="Grace", last_name="Hopper")
    member = create_employee(api, first_name="Alan", last_name="Turing")
    response = api.post(
        "/client/departments", {"name": "Engineering", "head_id": head["id"], "member_ids": [member["id"]]}
    )
    assert response.status_code == 201, response.text
    assert response.json()["message"] == "Department created successfully."
    department = response.json()["data"]
    assert set(department) == DEPARTMENT_FIELDS
    uuid.UUID(department["id"])
    assert department["company"] == {"id": str(api.company_id), "name": "Acme Ltd"}
    assert department["name"] == "Engineering"
    assert department["head"] == {"name": "Grace Hopper", "id": head["id"]}
    assert (department["member_count"], department["asset_count"]) == (1, 0)
    assert TIMESTAMP.match(department["created_at"]) and TIMESTAMP.match(department["updated_at"])
    [listed] = department["members"]
    assert {key: listed[key] for key in ("id", "first_name", "last_name", "email")} == {
        "id": member["id"],
        "first_name": "Alan",
        "last_name": "Turing",
        "email": member["email"],
    }
    [membership] = listed["user_departments"]
    assert set(membership) == MEMBERSHIP_FIELDS
    assert membership["company_id"] == str(api.company_id)
    assert (membership["user_id"], membership["department_id"]) == (member["id"], department["id"])
    assert membership["status"] == "Active" and membership["deleted_at"] is None
    assert TIMESTAMP.match(membership["created_at"]) and TIMESTAMP.match(membership["updated_at"])
    assert api.get(f"/client/departments/{department['id']}").json()["data"] == department


def test_a_department_without_head_shows_a_single_space(api: Api) -> None:
    department = create_department(api, name="Finance")
    assert department["head"] == {"name": " ", "id": None}
    assert department["members"] == [] and department["member_count"] == 0


def test_name_is_unique_in_the_company_ignoring_case(api: Api, other_api: Api) -> None:
    create_department(api, name="Finance")
    assert_error(api.post("/client/departments", {"name": "FINANCE "}), 409, "already exists")
    create_department(other_api, name="Finance")


@pytest.mark.one_database
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": "  "}, "name"),
        ({"name": "x" * 201}, "name"),
        ({"name": "A", "head_id": str(uuid.uuid4())}, "head_id"),
        ({"name": "A", "head_id": "nope"}, "head_id"),
        ({"name": "A", "member_ids": "abc"}, "member_ids"),
        ({"name": "A", "colour": "red"}, "colour"),
    ],
)
def test_create_validation_names_the_field(api: Api, db: Session, body: dict[str, Any], field: str) -> None:
    assert field in assert_error(api.post("/client/departments", body), 422)["errors"]
    assert db.scalars(select(Department)).first() is None


def test_unknown_members_are_named_by_position(api: Api, db: Session) -> None:
    member = create_employee(api)
    body = {"name": "Ops", "member_ids": [member["id"], member["id"], str(uuid.uuid4()), "junk"]}
    errors = assert_error(api.post("/client/departments", body), 422)["errors"]
    assert set(errors) == {"member_ids.2", "member_ids.3"}
    assert errors["member_ids.2"] == ["Unknown employee: give the id of one of your employees."]
    assert db.scalars(select(Department)).first() is None


def test_list_is_paginated_with_counts(api: Api, db: Session) -> None:
    alice, bob = create_employee(api), create_employee(api)
    first = create_department(api, name="One", member_ids=[alice["id"], bob["id"]])
    second = create_department(api, name="Two", member_ids=[bob["id"]])
    create_department(api, name="Three")
    give_equipment(db, api.company_id, bob["id"])
    give_equipment(db, api.company_id, bob["id"])
    give_equipment(db, api.company_id, alice["id"])

    response = api.get("/client/departments", per_page=2)
    assert response.status_code == 200
    assert response.json()["message"] == "Departments fetched successfully."
    page = response.json()["data"]
    assert (page["total"], page["per_page"], page["current_page"], page["last_page"]) == (3, 2, 1, 2)
    assert [item["name"] for item in page["data"]] == ["Three", "Two"]
    by_id = {item["id"]: item for item in api.get("/client/departments").json()["data"]["data"]}
    assert (by_id[first["id"]]["member_count"], by_id[first["id"]]["asset_count"]) == (2, 3)
    assert (by_id[second["id"]]["member_count"], by_id[second["id"]]["asset_count"]) == (1, 2)
    assert all(set(item) == DEPARTMENT_FIELDS for item in by_id.values())
    assert "query.per_page" in assert_error(api.get("/client/departments", per_page=0), 422)["errors"]


def test_asset_count_follows_members_and_equipment(api: Api, db: Session) -> None:
    alice, bob = create_employee(api), create_employee(api)
    department = create_department(api, name="Field", member_ids=[alice["id"]])
    laptop = give_equipment(db, api.company_id, alice["id"])
    give_equipment(db, api.company_id, bob["id"])

    def counts() -> tuple[int, int]:
        data = api.get(f"/client/departments/{department['id']}").json()["data"]
        return data["member_count"], data["asset_count"]

    assert counts() == (1, 1)
    api.patch(f"/client/departments/{department['id']}", {"member_ids": [alice["id"], bob["id"]]})
    assert counts() == (2, 2)
    unassign(db, laptop)
    assert counts() == (2, 1)
    api.patch(f"/client/departments/{department['id']}", {"member_ids": [alice["id"]]})
    assert counts() == (1, 0)


def test_list_costs_a_fixed_number_of_statements(api: Api, db: Session, app: FastAPI) -> None:
    def statements() -> int:
        with counting_statements(app) as sent:
            assert api.get("/client/departments", per_page=100).status_code == 200
        return len(sent)

    def add_department(index: int) -> None:
        head, member = create_employee(api), create_employee(api)
        create_department(api, name=f"D{index}", head_id=head["id"], member_ids=[member["id"], head["id"]])
        give_equipment(db, api.company_id, member["id"])

    add_department(0)
    one = statements()
    assert one > 0  # counted where the app sends them
    for index in range(1, 6):
        add_department(index)
    assert statements() == one


def test_patch_renames_sets_head_and_replaces_members(api: Api, db: Session) -> None:
    alice, bob, carol = create_employee(api), create_employee(api), create_employee(api)
    department = create_department(api, name="Ops", member_ids=[alice["id"], bob["id"]])
    path = f"/client/departments/{department['id']}"

    response = api.patch(
        path, {"name": "Operations", "head_id": carol["id"], "member_ids": [bob["id"], carol["id"]]}
    )
    assert response.status_code == 200, response.text
    assert response.json()["message"] == "Department updated successfully."
    data = response.json()["data"]
    assert data["name"] == "Operations"
    assert data["head"] == {"name": f"{carol['first_name']} {carol['last_name']}", "id": carol["id"]}
    assert sorted(member["id"] for member in data["members"]) == sorted([bob["id"], carol["id"]])
    assert data["member_count"] == 2
    kept = next(member for member in data["members"] if member["id"] == bob["id"])
    original = next(member for member in department["members"] if member["id"] == bob["id"])
    assert kept["user_departments"][0]["id"] == original["user_departments"][0]["id"]  # membership kept

    ended = db.scalars(select(UserDepartment).where(UserDepartment.user_id == uuid.UUID(alice["id"]))).one()
    assert ended.deleted_at is not None
    db.rollback()  # end the read: SQLite writers wait for it
    alice_now = api.get(f"/client/employees/{alice['id']}").json()["data"]
    assert alice_now["departments"] == []
    carol_now = api.get(f"/client/employees/{carol['id']}").json()["data"]
    assert carol_now["departments"] == [{"id": department["id"], "name": "Operations"}]

    cleared = api.patch(path, {"head_id": None, "member_ids": []}).json()["data"]
    assert cleared["head"] == {"name": " ", "id": None} and cleared["members"] == []
    assert cleared["name"] == "Operations"
    rejoined = api.patch(path, {"member_ids": [alice["id"]]}).json()["data"]
    assert [member["id"] for member in rejoined["members"]] == [alice["id"]]


def test_patch_validation(api: Api) -> None:
    create_department(api, name="Taken")
    department = create_department(api, name="Mine")
    path = f"/client/departments/{department['id']}"
    assert_error(api.patch(path, {"name": "taken"}), 409, "already exists")
    assert "name" in assert_error(api.patch(path, {"name": None}), 422)["errors"]
    assert "member_ids" in assert_error(api.patch(path, {"member_ids": None}), 422)["errors"]
    assert "head_id" in assert_error(api.patch(path, {"head_id": str(uuid.uuid4())}), 422)["errors"]
    assert "member_ids.0" in assert_error(api.patch(path, {"member_ids": ["x"]}), 422)["errors"]
    assert "company_id" in assert_error(api.patch(path, {"company_id": str(uuid.uuid4())}), 422)["errors"]
    assert api.patch(path, {"name": "MINE"}).json()["data"]["name"] == "MINE"  # its own name, recased
    assert api.get(path).json()["data"]["name"] == "MINE"


def test_delete_answers_the_department_and_ends_memberships(api: Api, db: Session) -> None:
    member = create_employee(api)
    department = create_department(api, name="Legal", head_id=member["id"], member_ids=[member["id"]])
    path = f"/client/departments/{department['id']}"

    response = api.delete(path)
    assert response.status_code == 200, response.text
    assert response.json()["message"] == "Department deleted successfully."
    assert response.json()["data"] == department

    assert_error(api.get(path), 404, "department not found")
    assert_error(api.patch(path, {"name": "Back"}), 404)
    assert_error(api.delete(path), 404)
    assert api.get("/client/departments").json()["data"]["total"] == 0
    assert api.get(f"/client/employees/{member['id']}").json()["data"]["departments"] == []
    membership = db.scalars(select(UserDepartment)).one()
    assert membership.deleted_at is not None
    db.rollback()
    assert (
        "query.department_id"
        in assert_error(api.get("/client/employees", department_id=department["id"]), 422)["errors"]
    )
    create_department(api, name="Legal")  # the name is free again


@pytest.mark.parametrize("bad_id", ["0b1c9e4e-6d2f-4a8b-9c3d-5e6f7a8b9c0d", "not-a-uuid"])
def test_unknown_department_is_404(api: Api, bad_id: str) -> None:
    assert_error(api.get(f"/client/departments/{bad_id}"), 404)
    assert_error(api.patch(f"/client/departments/{bad_id}", {"name": "X"}), 404)
    assert_error(api.delete(f"/client/departments/{bad_id}"), 404)


def test_a_patch_that_changes_nothing_writes_nothing(api: Api) -> None:
    """As for employees and equipment (docs/events.md): no event, and `updated_at` stays."""
    alice, bob = create_employee(api), create_employee(api)
    department = create_department(api, name="Ops", head_id=alice["id"], member_ids=[alice["id"], bob["id"]])
    path = f"/client/departments/{department['id']}"
    for same in (
        {},
        {"name": "Ops"},
        {"head_id": alice["id"]},
        {"member_ids": [bob["id"], alice["id"]]},  # the same set, in another order
        {"name": "Ops", "head_id": alice["id"], "member_ids": [alice["id"], bob["id"], bob["id"]]},
    ):
        answer = api.patch(path, same)
        assert answer.status_code == 200, answer.text
        assert answer.json()["data"] == department, same
    types = [
        event["type"]
        for event in api.get("/client/events", subject_id=department["id"]).json()["data"]["data"]
    ]
    assert types == ["department.created"]
    assert api.patch(path, {"name": "OPS"}).json()["data"]["updated_at"] > department["updated_at"]  # recased
    types = [
        event["type"]
        for event in api.get("/client/events", subject_id=department["id"]).json()["data"]["data"]
    ]
    assert types == ["department.updated", "department.created"]


def test_a_name_is_one_name_however_its_accents_are_encoded(api: Api) -> None:
    """A name is kept composed (NFC): "É" sent as "E" and a combining accent is the same name."""
    composed = create_department(api, name="\u00c9quipe")
    decomposed = api.post("/client/departments", {"name": "E\u0301quipe"})
    assert_error(decomposed, 409, "already exists")
    other = create_department(api, name="Atelier")
    renamed = api.patch(f"/client/departments/{other['id']}", {"name": "Ate\u0301lier"}).json()["data"]
    assert renamed["name"] == "At\u00e9lier"
    assert api.get(f"/client/departments/{composed['id']}").json()["data"]["name"] == "\u00c9quipe"
