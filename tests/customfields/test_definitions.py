"""The definitions API (/client/custom-fields): shapes, the rules a definition must follow, tenancy,
and the events each change writes."""

from __future__ import annotations

from tests.customfields.helpers import define, errors_of
from tests.factories import Api, assert_error

FIELDS = {
    "id", "entity", "key", "label", "type", "required", "default", "pattern", "minimum", "maximum",
    "choices", "sensitive", "device_types", "created_at", "updated_at",
}  # fmt: skip


def test_a_field_is_created_read_listed_changed_and_deleted(api: Api) -> None:
    created = define(
        api, "imei", pattern="[0-9]{15}", device_types=["Phones"], required=True, default="000000000000000"
    )
    assert set(created) == FIELDS
    assert created["entity"] == "device" and created["device_types"] == ["Phones"]
    assert created["default"] == "000000000000000" and created["required"] is True
    assert api.get(f"/client/custom-fields/{created['id']}").json()["data"] == created
    define(api, "badge", entity="employee")
    listed = api.get("/client/custom-fields").json()["data"]
    assert [item["key"] for item in listed["data"]] == ["badge", "imei"] and listed["total"] == 2
    only_devices = api.get("/client/custom-fields", entity="device").json()["data"]["data"]
    assert [item["key"] for item in only_devices] == ["imei"]

    changed = api.patch(f"/client/custom-fields/{created['id']}", {"label": "IMEI number"})
    assert changed.status_code == 200, changed.text
    assert changed.json()["data"]["label"] == "IMEI number"
    deleted = api.delete(f"/client/custom-fields/{created['id']}")
    assert deleted.status_code == 200 and deleted.json()["data"]["key"] == "imei"
    assert_error(api.get(f"/client/custom-fields/{created['id']}"), 404)

    events = api.get("/client/events", type="custom_field.*").json()["data"]["data"]
    assert [event["type"] for event in events] == [
        "custom_field.deleted", "custom_field.updated", "custom_field.created", "custom_field.created",
    ]  # fmt: skip
    # The deleted field's history stays in the activity log, the definition as it was.
    assert events[0]["data"]["key"] == "imei" and events[0]["data"]["label"] == "IMEI number"


def test_a_definition_that_cannot_be_is_refused_naming_each_field(api: Api) -> None:
    errors = errors_of(
        api.post(
            "/client/custom-fields",
            {"entity": "device", "key": "Bad Key", "label": "", "type": "colour"},
        )
    )
    assert {"key", "label", "type"} <= set(errors)
    errors = errors_of(
        api.post(
            "/client/custom-fields",
            {"entity": "employee", "key": "size", "label": "Size", "type": "choice", "pattern": "x",
             "minimum": 1, "device_types": ["Phones"]},
        )
    )  # fmt: skip
    assert set(errors) == {"choices", "pattern", "minimum", "device_types"}
    errors = errors_of(
        api.post(
            "/client/custom-fields",
            {"entity": "device", "key": "ram", "label": "RAM", "type": "number", "minimum": 10, "maximum": 2},
        )
    )
    assert errors == {"maximum": ["The maximum is below the minimum."]}
    errors = errors_of(
        api.post(
            "/client/custom-fields",
            {
                "entity": "device",
                "key": "ram",
                "label": "RAM",
                "type": "number",
                "maximum": 64,
                "default": 128,
            },
        )
    )
    assert errors == {"default": ["Must be 64 or less."]}
    errors = errors_of(
        api.post(
            "/client/custom-fields",
            {"entity": "device", "key": "re", "label": "R", "type": "text", "pattern": "("},
        )
    )
    assert "Not a regular expression" in errors["pattern"][0]
    assert api.get("/client/custom-fields").json()["data"]["total"] == 0  # nothing was written


def test_a_key_is_unique_per_kind_of_record(api: Api) -> None:
    define(api, "badge", entity="employee")
    define(api, "badge", entity="device")  # another kind of record: its own keys
    assert_error(
        api.post(
            "/client/custom-fields", {"entity": "employee", "key": "badge", "label": "B", "type": "text"}
        ),
        409,
        "already exists",
    )


def test_definitions_are_walled_off_between_companies(api: Api, other_api: Api) -> None:
    mine = define(api, "imei")
    assert other_api.get("/client/custom-fields").json()["data"]["total"] == 0
    for response in (
        other_api.get(f"/client/custom-fields/{mine['id']}"),
        other_api.patch(f"/client/custom-fields/{mine['id']}", {"label": "Stolen"}),
        other_api.delete(f"/client/custom-fields/{mine['id']}"),
    ):
        assert_error(response, 404, "Custom field not found")
    # The same key is free in another company, and its devices do not see this company's fields.
    define(other_api, "imei")
    made = other_api.post("/client/equipment", {"title": "X", "custom_fields": {"imei": "1"}})
    assert made.status_code == 201 and made.json()["data"]["custom_fields"] == {"imei": "1"}
    assert api.get(f"/client/custom-fields/{mine['id']}").json()["data"]["label"] == "Imei"
