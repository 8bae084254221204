"""The equipment lists: each filter alone and combined, counters at both levels, order, statement count."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy.orm import Session

from tests.equipment.helpers import make_employee, register
from tests.factories import Api, assert_error, counting_statements


@pytest.fixture
def fleet(api: Api, db: Session) -> dict[str, str]:
    """Six devices; returns title -> id."""
    employee = make_employee(db, api.company_id)
    devices = [
        {
            "title": "laptop-ng",
            "type": "Laptop",
            "specs": {"memory": "16 GB", "storage": "512GB"},
            "country": "NG",
        },
        {
            "title": "ws-ke",
            "type": "Workstation",
            "specs": {"memory": "16gb", "storage": "1 TB"},
            "country": "KE",
        },
        {"title": "lw-ng", "type": "Laptop/Workstation", "specs": {"memory": "32GB"}, "country": "Nigeria"},
        {
            "title": "phone-ng",
            "type": "Phones",
            "specs": {"storage": "512 gb"},
            "country": "NG",
            "serial_number": "P1",
        },
        {
            "title": "tablet-ke",
            "type": "Tablet",
            "country": "KE",
            "serial_number": "T1",
            "status": "In_Storage",
        },
        {
            "title": "phone-gh",
            "type": "Phones",
            "country": "GH",
            "serial_number": "P2",
            "status": "Assigned",
            "assignee_id": str(employee.id),
        },
    ]
    return {device["title"]: register(api, **device)["id"] for device in devices}  # type: ignore[arg-type]


def titles(api: Api, **params: Any) -> list[str]:
    response = api.get("/client/equipment", per_page=100, **params)
    assert response.status_code == 200, response.text
    return sorted(record["title"] for record in response.json()["data"]["data"])


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, ["laptop-ng", "lw-ng", "phone-gh", "phone-ng", "tablet-ke", "ws-ke"]),
        ({"status": "In_Storage"}, ["tablet-ke"]),
        ({"status": "Assigned"}, ["phone-gh"]),
        ({"status": "Unassigned"}, ["laptop-ng", "lw-ng", "phone-ng", "ws-ke"]),
        ({"status": "Sold"}, []),
        ({"type": "Laptop/Workstation"}, ["laptop-ng", "lw-ng", "ws-ke"]),
        ({"type": "Phones"}, ["phone-gh", "phone-ng"]),
        ({"type": "Tablet"}, ["tablet-ke"]),
        ({"type": "Accessories"}, []),
        ({"memory": "16GB"}, ["laptop-ng", "ws-ke"]),
        ({"memory": " 16 gB "}, ["laptop-ng", "ws-ke"]),
        ({"storage": "512 GB"}, ["laptop-ng", "phone-ng"]),
        ({"storage": "1tb"}, ["ws-ke"]),
        ({"country": "Nigeria"}, ["laptop-ng", "lw-ng", "phone-ng"]),
        ({"country": "nigeria"}, ["laptop-ng", "lw-ng", "phone-ng"]),
        ({"country": "ke"}, ["tablet-ke", "ws-ke"]),
        ({"serial_number": "P1"}, ["phone-ng"]),
        ({"serial_number": "P1, T1,,NOPE"}, ["phone-ng", "tablet-ke"]),
        ({"serial_number": "p1"}, []),
        ({"type": "Phones", "country": "NG"}, ["phone-ng"]),
        ({"type": "Laptop/Workstation", "memory": "16gb", "country": "KE"}, ["ws-ke"]),
        ({"status": "Assigned", "type": "Phones", "serial_number": "P1,P2"}, ["phone-gh"]),
        ({"storage": "512gb", "type": "Phones", "status": "Unassigned"}, ["phone-ng"]),
        ({"memory": "16gb", "storage": "1tb", "country": "NG"}, []),
    ],
)
def test_filters_alone_and_combined(
    api: Api, fleet: dict[str, str], params: dict[str, str], expected: list[str]
) -> None:
    assert titles(api, **params) == expected


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "Lost"}, "query.status"),
        ({"status": "assigned"}, "query.status"),
        ({"type": "Laptop"}, "query.type"),
        ({"type": "Car"}, "query.type"),
        ({"country": "Atlantis"}, "query.country"),
        ({"page": 0}, "query.page"),
        ({"per_page": 101}, "query.per_page"),
        ({"per_page": "x"}, "query.per_page"),
    ],
)
def test_bad_filters_are_422_naming_the_parameter(api: Api, params: dict[str, Any], field: str) -> None:
    result = assert_error(api.get("/client/equipment", **params), 422)
    assert field in result["errors"], result["errors"]


@pytest.mark.parametrize("written", ["1_0", "+2", " 2", "2 ", "2.0", "15.0", "\t1", "\u0662"])
@pytest.mark.parametrize("name", ["page", "per_page"])
def test_a_page_number_is_digits_and_nothing_else(api: Api, name: str, written: str) -> None:
    """Pydantic reads "1_0" as 10 and "2.0" as 2; a client that sends them has made a mistake."""
    result = assert_error(api.get("/client/equipment", **{name: written}), 422)
    assert result["errors"] == {f"query.{name}": ["Give a whole number in digits, such as 2."]}
    assert api.get("/client/equipment", **{name: "02"}).json()["data"]["current_page"] == (
        2 if name == "page" else 1
    )


def test_closed_values_are_documented_and_refused_by_name(api: Api) -> None:
    """The statuses and types are enums: OpenAPI lists exactly the allowed values, and a value
    outside them is a 422 that names them."""
    document = api.client.get("/api/v2/openapi.json").json()

    def allowed(schema: dict[str, Any]) -> list[str]:
        schema = next(option for option in schema.get("anyOf", [schema]) if option.get("type") != "null")
        if "$ref" in schema:
            schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
        values: list[str] = schema["enum"]
        return values

    parameters = {
        parameter["name"]: parameter["schema"]
        for parameter in document["paths"]["/api/v2/client/equipment"]["get"]["parameters"]
    }
    statuses = ["Assigned", "Unassigned", "Sold", "In_Storage", "Archived"]
    assert allowed(parameters["status"]) == statuses
    assert allowed(parameters["type"]) == ["Laptop/Workstation", "Phones", "Accessories", "Tablet"]
    create = document["components"]["schemas"]["EquipmentCreate"]["properties"]
    assert allowed(create["status"]) == ["Unassigned", "In_Storage", "Assigned"]
    assert allowed(create["state"]) == ["Brand_New", "Used"]

    errors = assert_error(api.get("/client/equipment", status="Lost", type="Laptop"), 422)["errors"]
    assert errors == {
        "query.status": ["Input should be 'Assigned', 'Unassigned', 'Sold', 'In_Storage' or 'Archived'"],
        "query.type": ["Input should be 'Laptop/Workstation', 'Phones', 'Accessories' or 'Tablet'"],
    }
    errors = assert_error(api.post("/client/equipment", {"title": "x", "status": "Sold"}), 422)["errors"]
    assert errors == {"status": ["Input should be 'Unassigned', 'In_Storage' or 'Assigned'"]}


def test_archived_is_left_out_unless_asked_and_filters_apply_to_it(api: Api, fleet: dict[str, str]) -> None:
    api.delete(f"/client/equipment/{fleet['phone-ng']}")
    assert "phone-ng" not in titles(api)
    assert titles(api, status="Archived") == ["phone-ng"]
    assert titles(api, status="Archived", type="Phones", country="NG") == ["phone-ng"]
    assert titles(api, type="Phones") == ["phone-gh"]


def test_counters_at_both_levels_and_pages_newest_first(api: Api) -> None:
    ids = [register(api, title=f"device-{number}")["id"] for number in range(7)]
    newest_first = ids[::-1]
    seen: list[str] = []
    for page in (1, 2, 3):
        body = api.get("/client/equipment", page=page, per_page=3).json()
        assert body["success"] is True and body["message"] == "Equipment fetched successfully."
        counters = {"total": 7, "per_page": 3, "current_page": page, "last_page": 3}
        assert {key: body[key] for key in counters} == counters
        assert {key: body["data"][key] for key in counters} == counters
        seen += [record["id"] for record in body["data"]["data"]]
    assert seen == newest_first
    beyond = api.get("/client/equipment", page=9, per_page=3).json()
    assert beyond["data"]["data"] == [] and beyond["total"] == 7 and beyond["last_page"] == 3
    # the back half is read from the other end: the same records in the same order
    assert [r["id"] for r in api.get("/client/equipment", page=2, per_page=4).json()["data"]["data"]] == (
        newest_first[4:]
    )


def test_in_storage_list_has_both_counter_levels(api: Api, fleet: dict[str, str]) -> None:
    register(api, title="spare", status="In_Storage")
    body = api.get("/client/equipment/in-storage", per_page=1).json()
    assert body["message"] == "Equipment fetched successfully."
    assert (body["total"], body["last_page"], body["data"]["total"], body["data"]["last_page"]) == (
        2,
        2,
        2,
        2,
    )
    assert body["data"]["data"][0]["title"] == "spare"
    assert body["data"]["data"][0]["status"] == "In_Storage"
    assert_error(api.get("/client/equipment/in-storage", per_page=0), 422)


def test_a_page_costs_the_same_statements_whatever_its_size(api: Api, db: Session, app: FastAPI) -> None:
    employees = [make_employee(db, api.company_id, f"E{number}", "Staff") for number in range(3)]
    for number in range(60):
        fields: dict[str, Any] = {"title": f"d{number}", "currency": "USD", "country": "NG"}
        if number % 2:
            fields |= {"status": "Assigned", "assignee_id": str(employees[number % 3].id)}
        register(api, **fields)

    api.get("/client/equipment", per_page=5)  # warm up: the token's last-used stamp is written once
    with counting_statements(app) as statements:
        small = api.get("/client/equipment", per_page=5)
        size_small = len(statements)
        statements.clear()
        large = api.get("/client/equipment", per_page=50)
        size_large = len(statements)
        statements.clear()
        last = api.get("/client/equipment", per_page=50, page=2)
        size_last = len(statements)
    assert len(small.json()["data"]["data"]) == 5 and len(large.json()["data"]["data"]) == 50
    assert len(last.json()["data"]["data"]) == 10
    # The token, the count, the page's rows, their histories (and BEGIN/COMMIT on the session).
    assert 4 <= size_small == size_large == size_last <= 6
