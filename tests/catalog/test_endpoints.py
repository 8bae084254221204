"""The four asset endpoints and the reference-data lists, as a client calls them."""

from __future__ import annotations

import re
import uuid
from decimal import Decimal

import pytest
from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from outfitter.catalog.reference import sync_reference_data
from outfitter.models import Currency
from tests.factories import Api, assert_error, load_demo_catalog

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
SPEC_FIELDS = {
    "id",
    "asset_spec_id",
    "asset_id",
    "name",
    "description",
    "year",
    "type",
    "make",
    "model",
    "category",
    "asset_code",
    "status",
    "spec",
    "images",
    "asset_pricing",
}


@pytest.fixture(autouse=True)
def catalog(engine: Engine) -> None:
    load_demo_catalog(engine)


def test_list_assets_answers_priced_specifications_with_every_field(api: Api) -> None:
    response = api.get("/client/assets", country_id="NG", currency_code="NGN")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["success"] is True
    assert body["message"] == "Assets fetched successfully."
    page = body["data"]
    assert page["total"] == 21  # every specification of the demo catalog has an NGN price in Nigeria
    assert (page["per_page"], page["current_page"], page["last_page"]) == (15, 1, 2)
    assert len(page["data"]) == 15
    for record in page["data"]:
        assert set(record) == SPEC_FIELDS | {"createdAt", "updatedAt"}
        assert record["id"] == record["asset_spec_id"]
        uuid.UUID(record["asset_id"])
        assert re.fullmatch(r"\d{4}", record["year"])
        assert record["type"] == "Sale"
        assert record["status"] == "Available"
        assert all(isinstance(value, str) for value in record["spec"].values())
        assert record["images"] and all(url.startswith("https://") for url in record["images"])
        assert TIMESTAMP.match(record["createdAt"]) and TIMESTAMP.match(record["updatedAt"])
        pricing = record["asset_pricing"]
        uuid.UUID(pricing["id"])
        assert re.fullmatch(r"\d+\.\d{2}", pricing["amount"])
        assert pricing["currency"] == {"code": "NGN", "name": "Nigerian Naira", "symbol": "₦"}


def test_a_price_is_the_imported_figure_for_that_country_and_currency(api: Api) -> None:
    page = api.get("/client/assets", country_id="Nigeria", currency_code="usd", per_page=100).json()["data"]
    dock = next(record for record in page["data"] if record["asset_code"] == "ANK-777")
    assert dock["asset_pricing"]["amount"] == "229.00"
    assert dock["asset_pricing"]["currency"]["code"] == "USD"
    assert dock["name"] == "USB-C Dock" and dock["make"] == "Anker" and dock["category"] == "Accessories"


def test_list_accepts_country_and_currency_aliases_and_the_country_uuid(api: Api) -> None:
    countries = api.get("/client/countries").json()["data"]
    kenya = next(country for country in countries if country["code"] == "KE")
    by_alias = api.get("/client/assets", country="ke", currency="KES").json()["data"]
    by_id = api.get("/client/assets", country_id=kenya["id"], currency_code="KES").json()["data"]
    assert by_alias["total"] == by_id["total"] == 21
    assert by_alias["data"][0]["asset_pricing"]["currency"]["symbol"] == "Ksh"


def test_a_market_without_prices_lists_nothing(api: Api) -> None:
    response = api.get("/client/assets", country_id="FR", currency_code="EUR")
    assert response.status_code == 200
    assert response.json()["data"] == {
        "data": [],
        "total": 0,
        "per_page": 15,
        "current_page": 1,
        "last_page": 1,
    }


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"country_id": "Atlantis", "currency_code": "NGN"}, "query.country_id"),
        ({"country_id": "NG", "currency_code": "XYZ"}, "query.currency_code"),
        ({"currency_code": "NGN"}, "query.country_id"),
        ({"country_id": "NG"}, "query.currency_code"),
    ],
)
def test_unknown_or_missing_country_and_currency_are_422_naming_the_parameter(
    api: Api, params: dict[str, str], field: str
) -> None:
    body = assert_error(api.get("/client/assets", **params), 422)
    assert field in body["errors"]
    assert field in body["message"]


@pytest.mark.parametrize(
    ("per_page", "page"), [("0", "1"), ("101", "1"), ("ten", "1"), ("15", "0"), ("15", "x")]
)
def test_pagination_parameters_out_of_range_are_422(api: Api, per_page: str, page: str) -> None:
    body = assert_error(
        api.get("/client/assets", country_id="NG", currency_code="NGN", per_page=per_page, page=page), 422
    )
    assert set(body["errors"]) <= {"query.per_page", "query.page"} and body["errors"]


def test_a_page_past_the_end_is_empty_with_correct_counters(api: Api) -> None:
    body = api.get("/client/assets", country_id="NG", currency_code="NGN", page=9, per_page=10).json()
    assert body["data"] == {"data": [], "total": 21, "per_page": 10, "current_page": 9, "last_page": 3}


def test_pages_do_not_overlap_and_keep_a_stable_order(api: Api) -> None:
    ids = []
    for page in (1, 2, 3):
        data = api.get("/client/assets", country_id="NG", currency_code="NGN", page=page, per_page=8).json()[
            "data"
        ]
        ids += [record["id"] for record in data["data"]]
    assert len(ids) == len(set(ids)) == 21


def test_retrieve_asset_has_every_field_and_only_specifications_priced_for_the_market(api: Api) -> None:
    listed = api.get("/client/assets", country_id="GB", currency_code="GBP", per_page=100).json()["data"][
        "data"
    ]
    macbook = next(record for record in listed if record["asset_code"] == "APL-MBP14-M3P")
    response = api.get(f"/client/assets/{macbook['asset_id']}", country_id="GB", currency_code="GBP")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["message"] == "Asset fetched successfully."
    asset = body["data"]
    assert set(asset) == {
        "id",
        "name",
        "description",
        "year",
        "type",
        "make",
        "model",
        "images",
        "specifications",
        "category",
        "asset_code",
        "status",
    }
    assert asset["id"] == macbook["asset_id"]
    assert (asset["name"], asset["make"], asset["category"], asset["year"]) == (
        "MacBook Pro 14",
        "Apple",
        "Laptops",
        "2024",
    )
    assert len(asset["specifications"]) == 2
    for spec in asset["specifications"]:
        assert set(spec) == SPEC_FIELDS
        assert spec["asset_id"] == asset["id"]
        assert spec["asset_pricing"]["currency"]["code"] == "GBP"
    amounts = sorted(Decimal(spec["asset_pricing"]["amount"]) for spec in asset["specifications"])
    assert amounts == [Decimal("1579.21"), Decimal("2053.21")]

    elsewhere = api.get(f"/client/assets/{macbook['asset_id']}", country_id="FR", currency_code="EUR").json()
    assert elsewhere["data"]["specifications"] == []


def test_retrieve_unknown_or_malformed_asset_id_is_404(api: Api) -> None:
    assert_error(
        api.get(f"/client/assets/{uuid.uuid4()}", country_id="NG", currency_code="NGN"), 404, "Asset"
    )
    assert_error(api.get("/client/assets/not-a-uuid", country_id="NG", currency_code="NGN"), 404)


def test_categories_and_models(api: Api) -> None:
    categories = api.get("/client/assets/categories").json()
    assert categories["success"] is True
    assert [category["name"] for category in categories["data"]] == [
        "Accessories",
        "Laptops",
        "Phones",
        "Tablets",
    ]
    assert all(set(category) == {"id", "name"} for category in categories["data"])
    models = api.get("/client/assets/models").json()["data"]
    assert len(models) == 14
    assert "iPhone 15" in {model["name"] for model in models}


def test_countries_and_currencies_come_from_iso_data(api: Api) -> None:
    countries = api.get("/client/countries").json()["data"]
    nigeria = next(country for country in countries if country["code"] == "NG")
    assert nigeria["name"] == "Nigeria" and nigeria["currency_code"] == "NGN"
    assert set(nigeria) == {"id", "name", "code", "currency_code"}
    assert len(countries) > 240
    currencies = api.get("/client/currencies").json()["data"]
    yen = next(currency for currency in currencies if currency["code"] == "JPY")
    assert yen["minor_units"] == 0 and yen["status"] == "Active" and yen["symbol"]
    assert set(yen) == {"id", "code", "name", "symbol", "minor_units", "status"}
    # Minor units as ISO 4217 publishes them, where CLDR differs (it says 0 for IQD and RSD).
    units = {currency["code"]: currency["minor_units"] for currency in currencies}
    assert (units["IQD"], units["RSD"], units["NGN"], units["KWD"]) == (3, 2, 2, 3)
    # What ISO gives no minor unit is not money anyone pays in: gold, the SDR, "no currency"...
    assert not {"XAU", "XAG", "XDR", "XTS", "XXX", "XBA"} & set(units)
    assert {"XOF", "XAF", "XCD"} <= set(units)  # the CFA francs and the East Caribbean dollar are money


def test_reference_sync_corrects_minor_units_seeded_from_cldr(engine: Engine) -> None:
    with Session(engine) as session, session.begin():
        session.execute(update(Currency).where(Currency.code == "IQD").values(minor_units=0))
    with Session(engine) as session, session.begin():
        sync_reference_data(session)
    with Session(engine) as session:
        assert session.scalars(select(Currency.minor_units).where(Currency.code == "IQD")).one() == 3
