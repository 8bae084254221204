"""Changing a definition whose field has values: refused with what would break, or the values
migrated as asked (convert, clear); sensitivity moves the values; delete clears them."""

from __future__ import annotations

from typing import Any

from tests.customfields.helpers import define, device
from tests.factories import Api, assert_error


def values(api: Api) -> dict[str, dict[str, Any]]:
    listed = api.get("/client/equipment", per_page=100).json()["data"]["data"]
    return {item["title"]: item["custom_fields"] for item in listed}


def test_a_type_change_is_refused_then_converted_or_cleared(api: Api) -> None:
    field = define(api, "ram")
    device(api, "A", custom_fields={"ram": "16"})
    device(api, "B", custom_fields={"ram": "lots"})
    path = f"/client/custom-fields/{field['id']}"
    refused = assert_error(api.patch(path, {"type": "number"}), 409, "would break")
    assert "1 values would change form" in refused["message"] and "'lots'" in refused["message"]
    assert values(api) == {"A": {"ram": "16"}, "B": {"ram": "lots"}}  # nothing changed
    assert api.get(path).json()["data"]["type"] == "text"

    converted = api.patch(path, {"type": "number", "migrate": "convert"})
    assert converted.status_code == 200, converted.text
    assert "1 converted, 1 cleared" in converted.json()["message"]
    assert values(api) == {"A": {"ram": 16}, "B": {}}
    event = api.get("/client/events", type="custom_field.updated").json()["data"]["data"][0]
    assert event["data"]["type"] == "number"


def test_narrowed_choices_and_a_new_required_rule(api: Api) -> None:
    field = define(api, "site", "choice", choices=["HQ", "Lagos", "Lisbon"])
    device(api, "A", custom_fields={"site": "Lisbon"})
    device(api, "B", custom_fields={"site": "HQ"})
    device(api, "C")
    path = f"/client/custom-fields/{field['id']}"
    assert_error(api.patch(path, {"choices": ["HQ", "Lagos"]}), 409, "'Lisbon'")
    cleared = api.patch(path, {"choices": ["HQ", "Lagos"], "migrate": "clear"})
    assert cleared.status_code == 200 and values(api) == {"A": {}, "B": {"site": "HQ"}, "C": {}}
    # Required with records lacking it: a default is needed, then migrate fills them.
    assert_error(api.patch(path, {"required": True, "migrate": "clear"}), 409, "give a default")
    assert_error(api.patch(path, {"required": True, "default": "Lagos"}), 409, "2 devices would lack")
    filled = api.patch(path, {"required": True, "default": "Lagos", "migrate": "clear"})
    assert filled.status_code == 200, filled.text
    assert values(api) == {"A": {"site": "Lagos"}, "B": {"site": "HQ"}, "C": {"site": "Lagos"}}


def test_sensitivity_moves_values_and_delete_clears_them_keeping_the_history(api: Api) -> None:
    field = define(api, "serial_tag")
    made = device(api, "A", custom_fields={"serial_tag": "T-1"})
    path = f"/client/custom-fields/{field['id']}"
    assert api.patch(path, {"sensitive": True}).status_code == 200
    assert values(api) == {"A": {}}
    assert api.patch(path, {"sensitive": False}).status_code == 200
    assert values(api) == {"A": {"serial_tag": "T-1"}}
    deleted = api.delete(path)
    assert deleted.status_code == 200 and "1 values cleared" in deleted.json()["message"]
    assert values(api) == {"A": {}}
    # The activity log keeps the field's history and the device's values as they were.
    kinds = [event["type"] for event in api.get("/client/events").json()["data"]["data"]]
    assert kinds[0] == "custom_field.deleted" and kinds.count("custom_field.updated") == 2
    added = api.get("/client/events", type="equipment.added", subject_id=made["id"]).json()["data"]["data"]
    assert added[0]["data"]["custom_fields"] == {"serial_tag": "T-1"}
    # A new field of the same key starts empty.
    define(api, "serial_tag", "number")
    assert values(api) == {"A": {}}
