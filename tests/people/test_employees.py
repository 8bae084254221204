"""Single employees through HTTP: create, list, retrieve, patch, delete, every field and error path."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from outfitter.models import Employee
from outfitter.people.schemas import PHONE_MESSAGE
from tests.factories import Api, assert_error, counting_statements
from tests.people.helpers import create_employee, employee_body, give_equipment, place_order, unassign

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
EMPLOYEE_FIELDS = {
    "id",
    "first_name",
    "last_name",
    "email",
    "personal_email",
    "phone",
    "country",
    "country_code",
    "currency_code",
    "landmark",
    "last_login",
    "job_title",
    "tax_number",
    "employment_type",
    "level",
    "status",
    "address",
    "departments",
    "catalogs",
    "equipment",
    "orders",
    "open_retrievals",
    "custom_fields",  # the company's own fields (docs/custom-fields.md)
    "created_at",
    "updated_at",
}


def test_create_answers_every_employee_field(api: Api) -> None:
    body = employee_body(email="  Grace.Hopper@ACME.io ", first_name=" Grace ", country_id="nigeria")
    response = api.post("/client/employees", body)
    assert response.status_code == 201, response.text
    payload = response.json()
    assert payload["success"] is True
    assert payload["message"] == "Employee created successfully."
    employee = payload["data"]
    assert set(employee) == EMPLOYEE_FIELDS
    uuid.UUID(employee["id"])
    assert employee["first_name"] == "Grace"
    assert employee["last_name"] == body["last_name"]
    assert employee["email"] == "grace.hopper@acme.io"
    assert employee["phone"] == body["phone"]
    assert employee["address"] == body["address"]
    assert (employee["country"], employee["country_code"], employee["currency_code"]) == (
        "Nigeria",
        "NG",
        "NGN",
    )
    for nullable in ("personal_email", "landmark", "last_login", "job_title", "tax_number"):
        assert employee[nullable] is None
    assert employee["employment_type"] is None and employee["level"] is None
    assert employee["status"] == "Active"  # never null
    assert api.get(f"/client/employees/{employee['id']}").json()["data"]["status"] == "Active"
    assert employee["catalogs"] is None
    assert employee["departments"] == employee["equipment"] == employee["orders"] == []
    assert TIMESTAMP.match(employee["created_at"])


@pytest.mark.parametrize("country", ["KE", "ke", "Kenya", "KENYA"])
def test_country_is_accepted_as_name_or_code(api: Api, country: str) -> None:
    employee = create_employee(api, country_id=country)
    assert (employee["country"], employee["country_code"], employee["currency_code"]) == (
        "Kenya",
        "KE",
        "KES",
    )


def test_country_is_accepted_as_its_id(api: Api) -> None:
    ghana = next(item for item in api.get("/client/countries").json()["data"] if item["code"] == "GH")
    employee = create_employee(api, country_id=ghana["id"])
    assert (employee["country_code"], employee["currency_code"]) == ("GH", "GHS")


def test_optional_fields_can_be_given_on_create(api: Api) -> None:
    employee = create_employee(
        api, personal_email="Ada@Home.org", job_title="Engineer", landmark="Near the bridge"
    )
    assert employee["personal_email"] == "ada@home.org"
    assert employee["job_title"] == "Engineer" and employee["landmark"] == "Near the bridge"


def test_missing_required_fields_are_named(api: Api) -> None:
    body = assert_error(api.post("/client/employees", {}), 422)
    assert set(body["errors"]) == {"first_name", "last_name", "email", "country_id", "phone", "address"}


@pytest.mark.one_database
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("email", "not-an-email"),
        ("email", "a@b"),
        ("email", ""),
        ("first_name", "   "),
        ("first_name", 42),
        ("last_name", "x" * 101),
        ("phone", "call me"),
        ("address", None),
        ("country_id", ""),
    ],
)
def test_invalid_fields_are_422_naming_them(api: Api, db: Session, field: str, value: Any) -> None:
    body = assert_error(api.post("/client/employees", employee_body(**{field: value})), 422)
    assert field in body["errors"], body
    assert db.scalar(select(func.count()).select_from(Employee)) == 0


@pytest.mark.parametrize(
    "phone", ["(080) 1234 5678", "+44 (0)20 7946 0958", "0801-234-5678", "+1.555.0100", "1234"]
)
def test_phone_numbers_as_people_write_them_are_kept(api: Api, phone: str) -> None:
    created = api.post("/client/employees", employee_body(phone=f" {phone} "))
    assert created.status_code == 201, created.text
    assert created.json()["data"]["phone"] == phone


@pytest.mark.one_database
@pytest.mark.parametrize(
    ("phone", "message"),
    [
        ("12", "String should have at least 4 characters"),
        ("123 ", "String should have at least 4 characters"),  # stripped first
        ("call me", PHONE_MESSAGE),
        ("-080 1234", PHONE_MESSAGE),
        ("080 1234 ext 5", PHONE_MESSAGE),
        ("()()", PHONE_MESSAGE),
    ],
)
def test_a_phone_number_refused_says_which_rule(api: Api, phone: str, message: str) -> None:
    body = assert_error(api.post("/client/employees", employee_body(phone=phone)), 422)
    assert body["errors"] == {"phone": [message]}


def test_unknown_country_is_422_naming_country_id(api: Api) -> None:
    body = assert_error(api.post("/client/employees", employee_body(country_id="Atlantis")), 422, "country")
    assert list(body["errors"]) == ["country_id"]


def test_unknown_fields_are_refused(api: Api) -> None:
    body = assert_error(api.post("/client/employees", employee_body(company_id=str(uuid.uuid4()))), 422)
    assert list(body["errors"]) == ["company_id"]


def test_duplicate_email_in_the_company_is_409_in_any_case(api: Api, db: Session) -> None:
    create_employee(api, email="dup@acme.io")
    assert_error(api.post("/client/employees", employee_body(email="DUP@acme.io")), 409, "dup@acme.io")
    assert db.scalar(select(func.count()).select_from(Employee)) == 1


def test_retrieve_shows_departments_equipment_and_orders(api: Api, db: Session) -> None:
    employee = create_employee(api)
    other = create_employee(api)
    department = api.post(
        "/client/departments", {"name": "Engineering", "member_ids": [employee["id"]]}
    ).json()
    equipment = give_equipment(db, api.company_id, employee["id"], title="ThinkPad X1")
    give_equipment(db, api.company_id, other["id"])
    order = place_order(db, api.company_id, employee["id"], total="2500000.00")

    response = api.get(f"/client/employees/{employee['id']}")
    assert response.status_code == 200, response.text
    assert response.json()["message"] == "Employee fetched successfully."
    data = response.json()["data"]
    assert set(data) == EMPLOYEE_FIELDS
    assert data["departments"] == [{"id": department["data"]["id"], "name": "Engineering"}]
    assert data["equipment"] == [
        {
            "id": str(equipment.id),
            "title": "ThinkPad X1",
            "type": "Laptop",
            "status": "Assigned",
            "serial_number": equipment.serial_number,
        }
    ]
    assert len(data["orders"]) == 1
    placed = data["orders"][0]
    assert placed["id"] == str(order.id) and placed["tx_ref"] == order.tx_ref
    assert (placed["status"], placed["total_amount"], placed["currency"]) == (
        "in_progress",
        "2500000.00",
        "NGN",
    )
    assert TIMESTAMP.match(placed["created_at"])

    unassign(db, equipment)
    assert api.get(f"/client/employees/{employee['id']}").json()["data"]["equipment"] == []


@pytest.mark.parametrize("bad_id", ["0b1c9e4e-6d2f-4a8b-9c3d-5e6f7a8b9c0d", "not-a-uuid", "1"])
def test_unknown_employee_is_404(api: Api, bad_id: str) -> None:
    assert_error(api.get(f"/client/employees/{bad_id}"), 404, "not found")
    assert_error(api.patch(f"/client/employees/{bad_id}", {"first_name": "X"}), 404)
    assert_error(api.delete(f"/client/employees/{bad_id}"), 404)


def test_list_is_paginated_newest_first(api: Api) -> None:
    created = [create_employee(api) for _ in range(4)]
    response = api.get("/client/employees", per_page=3)
    assert response.status_code == 200
    body = response.json()
    assert body["message"] == "Employees fetched successfully."
    page = body["data"]
    assert (page["total"], page["per_page"], page["current_page"], page["last_page"]) == (4, 3, 1, 2)
    assert [item["id"] for item in page["data"]] == [item["id"] for item in reversed(created)][:3]
    assert all(set(item) == EMPLOYEE_FIELDS for item in page["data"])
    second = api.get("/client/employees", per_page=3, page=2).json()["data"]
    assert [item["id"] for item in second["data"]] == [created[0]["id"]]
    beyond = api.get("/client/employees", page=9).json()["data"]
    assert beyond["data"] == [] and beyond["total"] == 4


def test_list_filters_by_country_department_and_search(api: Api) -> None:
    nigerian = create_employee(api, first_name="Chinedu", email="chinedu@acme.io")
    kenyan = create_employee(api, country_id="KE", first_name="Wanjiru", email="w.k@acme.io")
    create_employee(api, country_id="KE", first_name="Otieno", email="otieno@acme.io")
    department = api.post(
        "/client/departments", {"name": "Ops", "member_ids": [kenyan["id"], nigerian["id"]]}
    )
    department_id = department.json()["data"]["id"]

    def ids(**params: Any) -> list[str]:
        response = api.get("/client/employees", **params)
        assert response.status_code == 200, response.text
        return sorted(item["id"] for item in response.json()["data"]["data"])

    assert len(ids(country="Kenya")) == 2
    assert ids(country="ng") == [nigerian["id"]]
    assert ids(department_id=department_id) == sorted([kenyan["id"], nigerian["id"]])
    assert ids(search="WANJ") == [kenyan["id"]]
    assert ids(search="acme.io") == ids()
    assert ids(search="%") == []
    assert ids(search="otieno@", country="KE") != []
    assert ids(country="", search="") == ids()  # an empty text filter is no filter
    for path in ("/client/employees", "/client/employees/export"):  # an empty id is not "every employee"
        refused = assert_error(api.get(path, department_id=""), 422)
        assert refused["errors"] == {
            "query.department_id": ["Give a department's id, or leave department_id out for every employee."]
        }


@pytest.mark.parametrize("search", ["Jos\u00e9", "Jose\u0301"])  # é composed, and e + a combining accent
def test_a_name_is_found_however_its_accents_are_typed(api: Api, search: str) -> None:
    """Names and searches are kept composed (NFC), as department names are."""
    jose = create_employee(api, first_name="Jose\u0301", email="jose@acme.io")
    assert jose["first_name"] == "Jos\u00e9"
    found = api.get("/client/employees", search=search).json()["data"]
    assert [record["id"] for record in found["data"]] == [jose["id"]]


@pytest.mark.parametrize("search", ["Zoë", "ZOË", "ÑÚÑ", "ñúñez"])
def test_search_ignores_case_beyond_ascii_on_every_database(api: Api, search: str) -> None:
    """SQLite's own lower() folds A-Z only: the service gives it one that folds as PostgreSQL's."""
    zoe = create_employee(api, first_name="Zoë", last_name="Ñúñez", email="zoe@acme.io")
    create_employee(api, first_name="Zoe", last_name="Nunez", email="zoe.plain@acme.io")
    found = api.get("/client/employees", search=search).json()["data"]
    assert [record["id"] for record in found["data"]] == [zoe["id"]] and found["total"] == 1


def test_list_parameters_are_validated(api: Api) -> None:
    assert "query.country" in assert_error(api.get("/client/employees", country="Narnia"), 422)["errors"]
    body = assert_error(api.get("/client/employees", department_id=str(uuid.uuid4())), 422)
    assert "query.department_id" in body["errors"]
    assert (
        "query.department_id" in assert_error(api.get("/client/employees", department_id="x"), 422)["errors"]
    )
    assert "query.per_page" in assert_error(api.get("/client/employees", per_page=101), 422)["errors"]
    assert "query.page" in assert_error(api.get("/client/employees", page=0), 422)["errors"]


def test_list_costs_a_fixed_number_of_statements(api: Api, db: Session, app: FastAPI) -> None:
    def statements_for_list() -> int:
        with counting_statements(app) as statements:
            assert api.get("/client/employees", per_page=100).status_code == 200
        return len(statements)

    def add_rich_employee() -> None:
        employee = create_employee(api)
        api.post("/client/departments", {"name": f"D {employee['id']}", "member_ids": [employee["id"]]})
        give_equipment(db, api.company_id, employee["id"])
        place_order(db, api.company_id, employee["id"])

    add_rich_employee()
    one = statements_for_list()
    assert one > 0  # counted where the app sends them
    for _ in range(5):
        add_rich_employee()
    assert statements_for_list() == one


def test_patch_changes_the_listed_fields(api: Api) -> None:
    employee = create_employee(api)
    patch = {
        "first_name": "Augusta",
        "last_name": "King",
        "personal_email": "Augusta@Home.org",
        "phone": "0801 000 0000",
        "country": "South Africa",
        "landmark": "Opposite the park",
        "job_title": "Analyst",
        "tax_number": "TX-1",
        "address": "1 Long Street, Cape Town",
        "employment_type": "Full_Time",
    }
    response = api.patch(f"/client/employees/{employee['id']}", patch)
    assert response.status_code == 200, response.text
    assert response.json()["message"] == "Employee updated successfully."
    data = response.json()["data"]
    assert set(data) == EMPLOYEE_FIELDS
    assert (data["country"], data["country_code"], data["currency_code"]) == ("South Africa", "ZA", "ZAR")
    assert data["personal_email"] == "augusta@home.org"
    for field in ("first_name", "last_name", "phone", "landmark", "job_title", "tax_number", "address"):
        assert data[field] == patch[field]
    assert data["employment_type"] == "Full_Time"
    assert data["email"] == employee["email"] and data["created_at"] == employee["created_at"]
    assert api.get(f"/client/employees/{employee['id']}").json()["data"] == data


def test_patch_clears_nullable_fields_with_null(api: Api) -> None:
    employee = create_employee(api, job_title="Engineer", landmark="Bridge")
    data = api.patch(f"/client/employees/{employee['id']}", {"job_title": None, "landmark": ""}).json()[
        "data"
    ]
    assert data["job_title"] is None and data["landmark"] is None
    assert data["first_name"] == employee["first_name"]


@pytest.mark.one_database
@pytest.mark.parametrize("field", ["first_name", "last_name", "phone", "country", "address"])
def test_patch_refuses_null_or_empty_required_fields(api: Api, field: str) -> None:
    employee = create_employee(api)
    for value in (None, "  "):
        body = assert_error(api.patch(f"/client/employees/{employee['id']}", {field: value}), 422)
        assert field in body["errors"]
    assert api.get(f"/client/employees/{employee['id']}").json()["data"] == employee


@pytest.mark.one_database
@pytest.mark.parametrize(
    "field", ["email", "id", "company_id", "level", "status", "created_at", "country_id", "last_login"]
)
def test_patch_refuses_any_other_field(api: Api, field: str) -> None:
    employee = create_employee(api)
    body = assert_error(
        api.patch(f"/client/employees/{employee['id']}", {field: "x", "first_name": "Z"}), 422
    )
    assert list(body["errors"]) == [field]
    assert api.get(f"/client/employees/{employee['id']}").json()["data"] == employee


def test_patch_validates_values(api: Api) -> None:
    employee = create_employee(api)
    path = f"/client/employees/{employee['id']}"
    assert "country" in assert_error(api.patch(path, {"country": "Mordor"}), 422)["errors"]
    assert "personal_email" in assert_error(api.patch(path, {"personal_email": "nope"}), 422)["errors"]
    assert "phone" in assert_error(api.patch(path, {"phone": "abc"}), 422)["errors"]
    assert_error(api.patch(path, [1, 2]), 422)


def test_delete_answers_the_employee_and_removes_it(api: Api, db: Session) -> None:
    employee = create_employee(api)
    keeper = create_employee(api)
    department = api.post(
        "/client/departments",
        {"name": "Sales", "head_id": employee["id"], "member_ids": [employee["id"], keeper["id"]]},
    ).json()["data"]
    order = place_order(db, api.company_id, employee["id"])
    returned = give_equipment(db, api.company_id, employee["id"])
    unassign(db, returned)

    response = api.delete(f"/client/employees/{employee['id']}")
    assert response.status_code == 200, response.text
    assert response.json()["message"] == "Employee deleted successfully."
    data = response.json()["data"]
    assert data["id"] == employee["id"] and set(data) == EMPLOYEE_FIELDS
    assert data["departments"] == [{"id": department["id"], "name": "Sales"}]
    assert [item["id"] for item in data["orders"]] == [str(order.id)]

    assert_error(api.get(f"/client/employees/{employee['id']}"), 404)
    assert_error(api.delete(f"/client/employees/{employee['id']}"), 404)
    after = api.get(f"/client/departments/{department['id']}").json()["data"]
    assert after["head"] == {"name": " ", "id": None}
    assert [member["id"] for member in after["members"]] == [keeper["id"]]
    assert after["member_count"] == 1


def test_delete_is_409_while_the_employee_holds_assigned_equipment(api: Api, db: Session) -> None:
    employee = create_employee(api)
    equipment = give_equipment(db, api.company_id, employee["id"])
    assert_error(api.delete(f"/client/employees/{employee['id']}"), 409, "assigned equipment")
    assert api.get(f"/client/employees/{employee['id']}").status_code == 200
    unassign(db, equipment)
    assert api.delete(f"/client/employees/{employee['id']}").status_code == 200


def test_read_only_token_cannot_write(api: Api, companies: Any) -> None:
    reader = companies.token(api, ["read"])
    assert reader.get("/client/employees").status_code == 200
    assert_error(reader.post("/client/employees", employee_body()), 403)
