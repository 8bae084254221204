"""Lists filter on custom fields (`cf_key=value`, ranges for numbers and dates), and an unknown or
unfilterable field is a 422 naming it, never ignored."""

from __future__ import annotations

from typing import Any

from tests.customfields.helpers import define, device, errors_of
from tests.factories import Api


def titles(api: Api, **params: Any) -> list[str]:
    response = api.get("/client/equipment", **params)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["total"] == body["data"]["total"] == len(body["data"]["data"])
    return sorted(item["title"] for item in body["data"]["data"])


def test_filters_by_equality_by_range_and_by_a_choice_held(api: Api) -> None:
    define(api, "imei")
    define(api, "ram", "number")
    define(api, "price", "decimal")
    define(api, "warranty", "date")
    define(api, "rugged", "boolean")
    define(api, "tags", "multi_choice", choices=["loaner", "spare", "vip"])
    device(
        api,
        "A",
        custom_fields={
            "imei": "111",
            "ram": 8,
            "price": "10.5",
            "warranty": "2026-01-31",
            "rugged": True,
            "tags": ["loaner"],
        },
    )
    device(
        api,
        "B",
        custom_fields={
            "imei": "222",
            "ram": 16,
            "price": "99.99",
            "warranty": "2027-06-01",
            "rugged": False,
            "tags": ["spare", "loaner"],
        },
    )
    device(api, "C", custom_fields={"ram": 32})
    device(api, "D")  # fmt: skip

    assert titles(api, cf_imei="222") == ["B"]
    assert titles(api, cf_imei="333") == []
    assert titles(api, cf_ram="16") == ["B"]
    assert titles(api, cf_ram__gte="16") == ["B", "C"]
    assert titles(api, cf_ram__gt="8", cf_ram__lt="32") == ["B"]
    assert titles(api, cf_price="10.50") == ["A"]  # one decimal, however it is written
    assert titles(api, cf_price__lte="50") == ["A"]
    assert titles(api, cf_warranty__gte="2026-06-01") == ["B"]
    assert titles(api, cf_warranty__lt="2026-06-01") == ["A"]
    assert titles(api, cf_rugged="true") == ["A"]
    assert titles(api, cf_rugged="false") == ["B"]
    assert titles(api, cf_tags="loaner") == ["A", "B"]
    assert titles(api, cf_tags="spare", cf_rugged="false") == ["B"]
    assert titles(api, cf_ram__gte="8", type="Phones") == []
    # The cursor mode and the export take the same filters.
    cursor = api.get("/client/equipment", cf_ram__gte="16", limit=1).json()
    assert len(cursor["data"]["data"]) == 1 and cursor["next_cursor"]
    exported = api.get("/client/equipment/export", cf_imei="111")
    assert exported.status_code == 200 and exported.text.count("\n") == 2


def test_an_unknown_or_unfilterable_field_is_a_422_naming_it(api: Api, other_api: Api) -> None:
    define(api, "ram", "number")
    define(api, "imei")
    define(api, "pin", sensitive=True)
    define(other_api, "colour")
    assert errors_of(api.get("/client/equipment", cf_colour="red")) == {
        "query.cf_colour": ["No custom field 'colour' is defined for devices: this filter cannot be applied."]
    }
    errors = errors_of(api.get("/client/equipment", cf_ram="many", cf_imei__gte="1", cf_pin="1234"))
    assert errors["query.cf_ram"] == ["'many' is not a number."]
    assert "cf_imei=value" in errors["query.cf_imei__gte"][0]
    assert errors["query.cf_pin"] == ["Pin is a sensitive field: lists do not filter on it."]
    assert errors_of(api.get("/client/equipment/export", cf_nope="1")) == {
        "query.cf_nope": ["No custom field 'nope' is defined for devices: this filter cannot be applied."]
    }
