"""A country named as a client knows it: any name ISO 3166 or CLDR's English gives it, accents or
not, or its alpha-3 code, on every path that takes a country (single and bulk writes, filters, the
catalog's hot read, SCIM's default country), and still refused when nothing names it."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from tests.factories import Api, assert_error, load_demo_catalog
from tests.people.helpers import create_employee, employee_body

# (what a client sends, the country it names): the table stores one name each (`Vietnam`, `Türkiye`,
# `Russian Federation`, `Côte d'Ivoire`)
OTHER_NAMES = [
    ("Viet Nam", "VN"),  # ISO's short name
    ("Socialist Republic of Viet Nam", "VN"),  # ISO's official name
    ("VNM", "VN"),
    ("turkiye", "TR"),  # without its accent
    ("Republic of Türkiye", "TR"),
    ("Russia", "RU"),  # CLDR's English name
    ("south korea", "KR"),
    ("Cote d\N{RIGHT SINGLE QUOTATION MARK}Ivoire", "CI"),  # typographic apostrophe, no circumflex
    ("United  States", "US"),  # doubled space
]


@pytest.mark.parametrize(("name", "code"), OTHER_NAMES)
def test_an_employee_takes_a_country_by_any_of_its_names(api: Api, name: str, code: str) -> None:
    for _ in range(2):  # once asking the database, once from the process's copy of the countries
        employee = create_employee(api, country_id=name)
        assert employee["country_code"] == code


def test_the_bulk_writes_and_the_filters_take_the_other_names(api: Api) -> None:
    response = api.post(
        "/client/employees/bulk",
        {"employees": [employee_body(country_id="Viet Nam"), employee_body(country_id="RUS")]},
    )
    assert response.status_code == 201, response.text
    assert [employee["country_code"] for employee in response.json()["data"]] == ["VN", "RU"]

    devices = [
        {"title": "Laptop", "country": "Viet Nam", "currency": "VND"},
        {"title": "Phone", "country": "Republic of Türkiye", "currency": "TRY"},
        {"title": "Tablet", "country": "vietnam", "currency": "VND"},
    ]
    response = api.post("/client/equipment/bulk", {"equipment": devices})
    assert response.status_code == 201, response.text
    assert [device["country_code"] for device in response.json()["data"]] == ["VN", "TR", "VN"]

    listed = api.get("/client/equipment", country="VNM").json()["data"]
    assert sorted(device["title"] for device in listed["data"]) == ["Laptop", "Tablet"]
    employees = api.get("/client/employees", country="Russia").json()["data"]
    assert [employee["country_code"] for employee in employees["data"]] == ["RU"]


def test_the_catalog_takes_the_alpha_3_code(engine: Engine, api: Api) -> None:
    load_demo_catalog(engine)
    by_alpha_3 = api.get("/client/assets", country_id="KEN", currency_code="KES").json()["data"]
    by_alpha_2 = api.get("/client/assets", country_id="KE", currency_code="KES").json()["data"]
    assert by_alpha_3["total"] == by_alpha_2["total"] == 21


@pytest.mark.parametrize("name", ["Turkey", "Ivory Coast", "Atlantis", "VN M"])
def test_a_name_neither_iso_nor_cldr_gives_is_still_refused(api: Api, name: str) -> None:
    body = assert_error(api.post("/client/employees", employee_body(country_id=name)), 422, "unknown country")
    assert body["errors"] == {
        "country_id": [
            f"Unknown country {name!r}: give a country id, name or two-letter code (see /client/countries)."
        ]
    }
    items = [{"title": "Laptop", "country": name}]
    body = assert_error(api.post("/client/equipment/bulk", {"equipment": items}), 422)
    assert list(body["errors"]) == ["equipment.0.country"]
