"""Custom field values on devices through HTTP: each type's checks (errors at custom_fields.<key>),
defaults and required fields, device types, PATCH, bulk writes and the CSV import."""

from __future__ import annotations

from typing import Any

import pytest

from tests.customfields.helpers import define, device, errors_of
from tests.factories import Api

# type, rules, a good value, its stored form, bad values and a fragment of each one's message
CASES: list[tuple[str, dict[str, Any], Any, Any, list[tuple[Any, str]]]] = [
    ("text", {"pattern": "[0-9]{15}"}, " 356938035643809 ", "356938035643809",
     [("35693", "pattern"), (12, "as a string"), ("", "empty"), ("x" * 501, "500")]),
    ("long_text", {}, "line one\nline two", "line one\nline two",
     [("y" * 10_001, "10,000"), (["a"], "string")]),
    ("number", {"minimum": 0, "maximum": 64}, 16, 16,
     [("16", "JSON integer"), (65, "64 or less"), (-1, "0 or more"), (1.5, "integer"), (True, "not true")]),
    ("decimal", {"minimum": "0.5"}, "12.50", "12.5",
     [(2.5, "decimal string"), ("abc", "not a number"), ("0.1", "0.5 or more"),
      ("1.1234567", "decimal places")]),
    ("date", {}, "2026-03-01", "2026-03-01", [("01/03/2026", "YYYY-MM-DD"), ("2026-02-30", "YYYY-MM-DD")]),
    ("boolean", {}, True, True, [("true", "JSON boolean"), (1, "true or false")]),
    ("choice", {"choices": ["Lisbon", "Lagos"]}, "Lagos", "Lagos", [("Paris", "not one of")]),
    ("multi_choice", {"choices": ["red", "green", "blue"]}, ["blue", "red"], ["red", "blue"],
     [(["red", "red"], "twice"), (["pink"], "not one of"), ("red", "list")]),
    ("url", {}, "https://example.com/manual", "https://example.com/manual",
     [("ftp://example.com", "http"), ("javascript:alert(1)", "http")]),
    ("email", {}, "Owner@Example.com", "owner@example.com", [("not-an-email", "email")]),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "rules", "good", "stored", "bad"), CASES, ids=[case[0] for case in CASES])
def test_each_type_checks_its_values_and_names_the_field(
    api: Api, kind: str, rules: dict[str, Any], good: Any, stored: Any, bad: list[tuple[Any, str]]
) -> None:
    define(api, "extra", kind, **rules)
    made = device(api, custom_fields={"extra": good})
    assert made["custom_fields"] == {"extra": stored}
    assert api.get(f"/client/equipment/{made['id']}").json()["data"]["custom_fields"] == {"extra": stored}
    for value, fragment in bad:
        errors = errors_of(api.post("/client/equipment", {"title": "Bad", "custom_fields": {"extra": value}}))
        assert list(errors) == ["custom_fields.extra"], (value, errors)
        assert fragment.lower() in errors["custom_fields.extra"][0].lower(), (value, errors)
        errors = errors_of(api.patch(f"/client/equipment/{made['id']}", {"custom_fields": {"extra": value}}))
        assert list(errors) == ["custom_fields.extra"]
    # Nothing a refused request sent was written.
    listed = api.get("/client/equipment").json()["data"]
    assert listed["total"] == 1 and listed["data"][0]["custom_fields"] == {"extra": stored}


def test_unknown_keys_defaults_required_fields_and_device_types(api: Api) -> None:
    define(api, "imei", required=True, device_types=["Phones"], pattern="[0-9]{15}")
    define(api, "site", "choice", choices=["HQ", "Remote"], default="HQ")
    errors = errors_of(
        api.post("/client/equipment", {"title": "P", "type": "Phones", "custom_fields": {"nope": 1}})
    )
    assert errors == {
        "custom_fields.nope": ["No custom field 'nope' is defined for devices."],
        "custom_fields.imei": ["Imei is required."],
    }
    errors = errors_of(
        api.post(
            "/client/equipment",
            {"title": "L", "type": "Laptop", "custom_fields": {"imei": "356938035643809"}},
        )
    )
    assert errors == {"custom_fields.imei": ["Imei applies only to devices of type Phones."]}
    laptop = device(api, "Laptop", type="Laptop")  # imei is not required of a laptop
    assert laptop["custom_fields"] == {"site": "HQ"}  # the default
    phone = device(api, type="Phones", custom_fields={"imei": "356938035643809", "site": "Remote"})
    assert phone["custom_fields"] == {"imei": "356938035643809", "site": "Remote"}

    # PATCH merges: a key given changes, a null clears, a required one cannot be cleared.
    path = f"/client/equipment/{phone['id']}"
    changed = api.patch(path, {"custom_fields": {"site": None}}).json()["data"]
    assert changed["custom_fields"] == {"imei": "356938035643809"}
    assert errors_of(api.patch(path, {"custom_fields": {"imei": None}})) == {
        "custom_fields.imei": ["Imei is required."]
    }
    events = api.get("/client/events", type="equipment.updated", subject_id=phone["id"]).json()["data"][
        "data"
    ]
    assert len(events) == 1 and events[0]["data"]["custom_fields"] == {"imei": "356938035643809"}
    # A PATCH giving the values a device already has changes nothing and writes no event.
    api.patch(path, {"custom_fields": {"imei": "356938035643809"}})
    assert (
        api.get("/client/events", type="equipment.updated", subject_id=phone["id"]).json()["data"]["total"]
        == 1
    )


def test_bulk_writes_check_every_item_and_write_none_on_an_error(api: Api) -> None:
    define(api, "ram", "number", maximum=64)
    bad = api.post(
        "/client/equipment/bulk",
        {
            "equipment": [
                {"title": "A", "custom_fields": {"ram": 16}},
                {"title": "B", "custom_fields": {"ram": 128}},
            ]
        },
    )
    assert errors_of(bad) == {"equipment.1.custom_fields.ram": ["Must be 64 or less."]}
    assert api.get("/client/equipment").json()["data"]["total"] == 0
    made = api.post(
        "/client/equipment/bulk",
        {
            "equipment": [
                {"title": "A", "custom_fields": {"ram": 16}},
                {"title": "B", "custom_fields": {"ram": 32}},
            ]
        },
    )
    assert made.status_code == 201, made.text
    assert [item["custom_fields"] for item in made.json()["data"]] == [{"ram": 16}, {"ram": 32}]


def test_the_csv_import_takes_a_column_per_field(api: Api) -> None:
    define(api, "ram", "number")
    define(api, "rugged", "boolean")
    define(api, "tags", "multi_choice", choices=["loaner", "spare"])
    csv = (
        "title,custom_fields.ram,custom_fields.rugged,custom_fields.tags\nA,16,yes,spare|loaner\nB,,false,\n"
    )
    imported = api.post(
        "/client/equipment/import", content=csv.encode(), headers={"Content-Type": "text/csv"}
    )
    assert imported.status_code == 200, imported.text
    rows = {
        item["title"]: item["custom_fields"] for item in api.get("/client/equipment").json()["data"]["data"]
    }
    assert rows == {"A": {"ram": 16, "rugged": True, "tags": ["loaner", "spare"]}, "B": {"rugged": False}}
    bad = "title,custom_fields.ram,custom_fields.colour\nC,many,x\n"
    errors = errors_of(
        api.post("/client/equipment/import", content=bad.encode(), headers={"Content-Type": "text/csv"})
    )
    assert "rows.1.custom_fields.colour" in errors
    bad = "title,custom_fields.ram\nC,many\n"
    errors = errors_of(
        api.post("/client/equipment/import", content=bad.encode(), headers={"Content-Type": "text/csv"})
    )
    assert errors == {"rows.2.custom_fields.ram": ["'many' is not a number."]}
    assert api.get("/client/equipment").json()["data"]["total"] == 2
