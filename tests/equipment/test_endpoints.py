"""Registering, retrieving, editing and listing equipment, as a client calls it."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from outfitter.models import Equipment
from tests.equipment.helpers import add_to_department, events, make_employee, register
from tests.factories import Api, CompanyFactory, assert_error

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
BASE_FIELDS = {
    "id",
    "title",
    "year",
    "assignee",
    "make",
    "model",
    "state",
    "source",
    "purchase_date",
    "purchase_price",
    "type",
    "hash_code",
    "asset_order_id",
    "catalog",
    "currency",
    "image_url",
    "serial_number",
    "other_details",
    "specs",
    "description",
    "status",
    "country",
    "country_code",
    "custom_fields",  # the company's own fields (docs/custom-fields.md)
    "location_id",
    "home_location_id",
    "created_at",
    "updated_at",
    "history",
}
EXTENDED_FIELDS = {
    "device_setup",
    "score",
    "missing_information",
    "has_missing_information",
    "insurance_expiring_in",
    "usage_duration",
    "storage_duration",
    "documents",
}
FULL = {
    "title": "ThinkPad X1",
    "make": "Lenovo",
    "model": "X1 Carbon",
    "year": "2023",
    "type": "Laptop",
    "state": "Brand_New",
    "serial_number": "SN-1",
    "purchase_date": "2023-01-15T08:00:00Z",
    "purchase_price": "1499.99",
    "currency": "usd",
    "country": "Nigeria",
    "specs": {"memory": "16 GB", "storage": "512GB", "color": "Black"},
    "description": "Engineering laptop",
    "image_url": "https://img.example.com/x1.png",
    "other_details": ["charger", "sleeve"],
}


def test_register_answers_every_field_with_the_extended_ones(api: Api, db: Session) -> None:
    employee = make_employee(db, api.company_id, "Ada", "Obi")
    add_to_department(db, employee, "Engineering")
    response = api.post("/client/equipment", {**FULL, "status": "Assigned", "assignee_id": str(employee.id)})
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["success"] is True and body["message"] == "Equipment created successfully."
    record = body["data"]
    assert set(record) == BASE_FIELDS | EXTENDED_FIELDS
    assert record["source"] == "External" and record["status"] == "Assigned"
    assert record["purchase_date"] == "2023-01-15T08:00:00.000000Z"
    assert record["purchase_price"] == "1499.99"
    assert set(record["currency"]) == {"id", "name", "code", "symbol", "status", "created_at", "updated_at"}
    assert record["currency"]["code"] == "USD" and record["currency"]["status"] == "Active"
    assert (record["country"], record["country_code"]) == ("Nigeria", "NG")
    assert record["specs"] == {"memory": "16 GB", "storage": "512GB", "color": "Black"}
    assert json.loads(record["other_details"]) == ["charger", "sleeve"]
    assert record["assignee"] == {
        "id": str(employee.id),
        "name": "Ada Obi",
        "email": employee.email,
        "job_title": "Engineer",
        "department": "Engineering",
        "level": "Senior",
        "country": "Nigeria",
        "country_code": "NG",
        "address": "1 Marina, Lagos",
        "employment_type": "Full_Time",
        "phone": "+2348000000000",
    }
    assert record["score"] == 100 and record["missing_information"] == []
    assert record["has_missing_information"] is False
    assert re.fullmatch(r"\d+ years?(, \d+ months?)?", record["usage_duration"])
    assert record["storage_duration"] is None and record["insurance_expiring_in"] is None
    assert record["documents"] == [] and record["device_setup"] is None
    assert events(record) == ["equipment_added", "assigned"]
    for entry in record["history"]:
        assert set(entry) == {"id", "event_type", "event_date", "assignee", "equipment", "actor", "payload"}
        assert (
            entry["equipment"] == "ThinkPad X1" and entry["actor"] == f"token:Acme Ltd API ({api.token_id})"
        )
        assert TIMESTAMP.match(entry["event_date"])
    assert record["history"][1]["assignee"] == {"id": str(employee.id), "name": "Ada Obi"}


def test_retrieve_answers_the_record_and_the_list_the_short_form(api: Api, db: Session) -> None:
    employee = make_employee(db, api.company_id)
    created = register(api, **FULL, status="Assigned", assignee_id=str(employee.id))
    single = api.get(f"/client/equipment/{created['id']}")
    assert single.status_code == 200
    assert single.json()["message"] == "Equipment fetched successfully."
    assert single.json()["data"] == created | {"usage_duration": single.json()["data"]["usage_duration"]}
    listed = api.get("/client/equipment").json()["data"]["data"][0]
    assert set(listed) == BASE_FIELDS
    assert listed["assignee"] == {"id": str(employee.id), "name": "Ada Obi"}
    assert [set(entry) for entry in listed["history"]] == [{"id", "event_type", "event_date", "assignee"}] * 2


def test_score_and_missing_information_name_the_empty_fields(api: Api) -> None:
    record = register(api, title="Mystery box", make="Acme", specs={"color": "Red"})
    assert record["missing_information"] == [
        "serial_number",
        "purchase_date",
        "purchase_price",
        "model",
        "year",
        "type",
        "state",
        "image_url",
        "specs.memory",
        "specs.storage",
        "country",
    ]
    assert record["score"] == 8  # 1 of 12
    assert record["has_missing_information"] is True
    assert record["usage_duration"] == "Unknown"
    assert record["currency"] is None and record["purchase_price"] is None
    assert record["other_details"] == "[]"


def test_storage_duration_counts_from_the_move_to_storage(api: Api, db: Session) -> None:
    record = register(api, status="In_Storage")
    assert events(record) == ["equipment_added", "moved_to_storage"]
    assert record["storage_duration"] == "Less than a day"
    db.execute(
        update(Equipment)
        .where(Equipment.id == uuid.UUID(record["id"]))
        .values(status_changed_at=datetime.now(UTC) - timedelta(days=75))
    )
    db.commit()
    again = api.get(f"/client/equipment/{record['id']}").json()["data"]
    assert again["storage_duration"] == "2 months"


@pytest.mark.parametrize(
    ("given", "written"),
    [
        ("2024-03-05 14:30:00", "2024-03-05T14:30:00.000000Z"),
        ("2024-03-05T14:30:00+01:00", "2024-03-05T13:30:00.000000Z"),
        ("2024-03-05T14:30:00.250Z", "2024-03-05T14:30:00.250000Z"),
        ("2024-03-05", "2024-03-05T00:00:00.000000Z"),
    ],
)
def test_purchase_date_is_read_in_either_form_and_written_iso(api: Api, given: str, written: str) -> None:
    assert register(api, purchase_date=given)["purchase_date"] == written


@pytest.mark.one_database
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"make": "x"}, "title"),
        ({"title": "x", "purchase_date": "05/03/2024"}, "purchase_date"),
        ({"title": "x", "purchase_date": "2999-01-01"}, "purchase_date"),
        ({"title": "x", "purchase_price": "abc"}, "purchase_price"),
        ({"title": "x", "purchase_price": "-1"}, "purchase_price"),
        ({"title": "x", "purchase_price": "1e400"}, "purchase_price"),
        ({"title": "x", "type": "Car"}, "type"),
        ({"title": "x", "state": "Broken"}, "state"),
        ({"title": "x", "year": "20x4"}, "year"),
        (
            {"title": "x", "year": "\u0662\u0660\u0662\u0664"},
            "year",
        ),  # Arabic-Indic digits: the document's \d is 0-9
        ({"title": "x", "country": "Atlantis"}, "country"),
        ({"title": "x", "currency": "XYZ"}, "currency"),
        ({"title": "x", "status": "Sold"}, "status"),
        ({"title": "x", "status": "Assigned"}, "assignee_id"),
        ({"title": "x", "status": "Assigned", "assignee_id": "not-a-uuid"}, "assignee_id"),
        ({"title": "x", "status": "Assigned", "assignee_id": str(uuid.uuid4())}, "assignee_id"),
        ({"title": "x", "assignee_id": str(uuid.uuid4())}, "assignee_id"),
        ({"title": "x", "specs": {"ram": "8GB"}}, "specs.ram"),
        ({"title": "x", "source": "Platform"}, "source"),
        ({"title": "x", "image_url": "javascript:alert(1)"}, "image_url"),  # shown as an image or a link
        ({"title": "x", "image_url": "img.example.com/x.png"}, "image_url"),
    ],
)
def test_register_refuses_bad_fields_naming_them(api: Api, body: dict[str, object], field: str) -> None:
    result = assert_error(api.post("/client/equipment", body), 422)
    assert field in result["errors"], result["errors"]
    assert api.get("/client/equipment").json()["total"] == 0


@pytest.mark.parametrize(
    ("price", "reason"),
    [
        ("-0", "written without a sign"),
        ("-1", "written without a sign"),
        ("1000000000000", "below 1,000,000,000,000"),
        ("1.1234567", "more than six decimal places"),
        ("\u0661\u0662\u0663", "digits 0-9"),  # Arabic-Indic 123
        ("\uff11\uff12\uff13", "digits 0-9"),  # full-width 123
        ("1e3", "no sign, exponent"),
        ("1_000", "separators"),
        ("1,299.99", "separators"),
        ("+5", "no sign"),
        ("NaN", "digits 0-9"),
        (".5", "digits 0-9"),
    ],
)
def test_a_price_is_the_documented_decimal_string_or_refused(api: Api, price: str, reason: str) -> None:
    """Exactly the strings of the OpenAPI document's pattern are prices: what Python's Decimal
    would also read (a sign, an exponent, "_", other scripts' digits) is refused, saying why."""
    document = api.client.get("/api/v2/openapi.json").json()
    created = document["components"]["schemas"]["EquipmentCreate"]["properties"]["purchase_price"]
    assert re.search(created["anyOf"][0]["pattern"], price) is None
    refused = assert_error(api.post("/client/equipment", {"title": "x", "purchase_price": price}), 422)
    assert reason in refused["errors"]["purchase_price"][0], refused
    assert api.get("/client/equipment").json()["total"] == 0
    accepted = register(api, purchase_price=" 0.000001 ")
    assert accepted["purchase_price"] == "0.000001"


def test_serial_number_is_unique_in_the_company_only(api: Api, other_api: Api) -> None:
    register(api, serial_number="SN-9")
    assert_error(api.post("/client/equipment", {"title": "Twin", "serial_number": "SN-9"}), 409, "SN-9")
    register(other_api, serial_number="SN-9")
    other = register(api, serial_number="SN-10")
    assert_error(api.patch(f"/client/equipment/{other['id']}", {"serial_number": "SN-9"}), 409, "SN-9")
    assert api.get("/client/equipment").json()["total"] == 2


def test_patch_edits_fields_and_keeps_the_spec_keys_in_step(api: Api, db: Session) -> None:
    record = register(api, **FULL)
    response = api.patch(
        f"/client/equipment/{record['id']}",
        {"title": "ThinkPad X1 Gen 11", "specs": {"memory": "32 GB"}, "purchase_price": "1200", "year": None},
    )
    assert response.status_code == 200, response.text
    assert response.json()["message"] == "Equipment updated successfully."
    data = response.json()["data"]
    assert data["title"] == "ThinkPad X1 Gen 11"
    assert data["specs"] == {"memory": "32 GB", "storage": "512GB", "color": "Black"}
    assert data["purchase_price"] == "1200.00" and data["year"] is None
    assert "year" in data["missing_information"]
    assert data["serial_number"] == "SN-1" and data["status"] == "Unassigned"
    stored = db.scalars(select(Equipment).where(Equipment.id == uuid.UUID(record["id"]))).one()
    assert (stored.memory_key, stored.storage_key) == ("32gb", "512gb")
    db.rollback()  # end the read: SQLite's writers would wait on it
    assert api.get("/client/equipment", memory="32gb").json()["total"] == 1
    assert api.get("/client/equipment", memory="16gb").json()["total"] == 0


@pytest.mark.one_database
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"id": str(uuid.uuid4())}, "id"),
        ({"source": "Platform"}, "source"),
        ({"title": None}, "title"),
        ({"status": "Lost"}, "status"),
        ({"country": "Atlantis"}, "country"),
    ],
)
def test_patch_refuses_unknown_or_bad_fields(api: Api, body: dict[str, object], field: str) -> None:
    record = register(api, **FULL)
    result = assert_error(api.patch(f"/client/equipment/{record['id']}", body), 422)
    assert field in result["errors"]
    assert api.get(f"/client/equipment/{record['id']}").json()["data"] == record | {
        "usage_duration": record["usage_duration"]
    }


def test_malformed_and_unknown_ids_are_404(api: Api) -> None:
    for equipment_id in ("not-a-uuid", str(uuid.uuid4())):
        assert_error(api.get(f"/client/equipment/{equipment_id}"), 404, "not found")
        assert_error(api.patch(f"/client/equipment/{equipment_id}", {"title": "x"}), 404)
        assert_error(api.delete(f"/client/equipment/{equipment_id}"), 404)


def test_read_only_token_cannot_write(api: Api, companies: CompanyFactory) -> None:
    reader = companies.token(api, ["read"])
    assert reader.get("/client/equipment").status_code == 200
    assert_error(reader.post("/client/equipment", {"title": "x"}), 403)
