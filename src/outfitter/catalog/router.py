"""Catalog and reference-data endpoints. HTTP only: parse, call the service, wrap the answer."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from outfitter.catalog import service
from outfitter.catalog.repository import CatalogRepository
from outfitter.catalog.schemas import AssetOut, AssetSpecificationListItem, CountryOut, CurrencyOut, NamedOut
from outfitter.core.schemas import Envelope, Page, error_responses, ok
from outfitter.http.openapi import id_path, required_in_document
from outfitter.http.pagination import Pagination
from outfitter.http.unit_of_work import ReadAccess, UnitOfWorkRoute

router = APIRouter(prefix="/client", tags=["catalog"], route_class=UnitOfWorkRoute)

# Both are required (service.resolve_market answers 422 naming the missing one); they default to
# None only so that the older names `country` and `currency` may stand in for them. The aliases
# are left out of the document, so that a client (or a fuzzer) knows one name per parameter.
CountryQuery = Annotated[
    str | None,
    Query(description="The employee's country: its id, name or two-letter code (alias: `country`)"),
]
CurrencyQuery = Annotated[
    str | None,
    Query(description="ISO 4217 code of the currency the company pays in (alias: `currency`)"),
]
CountryAlias = Annotated[str | None, Query(include_in_schema=False)]
CurrencyAlias = Annotated[str | None, Query(include_in_schema=False)]
MARKET_REQUIRED = required_in_document("country_id", "currency_code")


@router.get(
    "/assets",
    response_model=Envelope[Page[AssetSpecificationListItem]],
    response_model_by_alias=True,
    responses=error_responses(422),
    openapi_extra=MARKET_REQUIRED,
    summary="List the specifications priced for a country and currency",
)
def list_assets(
    client: ReadAccess,
    pagination: Pagination,
    country_id: CountryQuery = None,
    currency_code: CurrencyQuery = None,
    country: CountryAlias = None,
    currency: CurrencyAlias = None,
) -> dict[str, object]:
    """The catalog's specifications that have a price for `country_id` and `currency_code` (both required: an
    id, a name or a code), each with its asset and that price. Paginated; an unknown country or currency
    is 422 naming it."""
    market = service.resolve_market(client.session, country_id or country, currency_code or currency)
    records, page = service.list_assets(client.session, *market, pagination)
    return ok(page.body(records), "Assets fetched successfully.")


@router.get(
    "/assets/categories",
    response_model=Envelope[list[NamedOut]],
    responses=error_responses(),
    summary="List asset categories",
)
def list_categories(client: ReadAccess) -> dict[str, object]:
    """Every asset category (Laptops, Phones...), to filter and read the catalog by."""
    categories = CatalogRepository(client.session).categories()
    return ok(categories, "Categories fetched successfully.")


@router.get(
    "/assets/models",
    response_model=Envelope[list[NamedOut]],
    responses=error_responses(),
    summary="List asset models",
)
def list_models(client: ReadAccess) -> dict[str, object]:
    """Every asset model the catalog holds (id and name)."""
    models = CatalogRepository(client.session).models()
    return ok(models, "Models fetched successfully.")


@router.get(
    "/assets/{asset_id}",
    response_model=Envelope[AssetOut],
    responses=error_responses(404, 422),
    openapi_extra=MARKET_REQUIRED,
    summary="Retrieve one asset with its specifications priced for a country and currency",
)
def get_asset(
    asset_id: Annotated[str, id_path("The asset's id")],
    client: ReadAccess,
    country_id: CountryQuery = None,
    currency_code: CurrencyQuery = None,
    country: CountryAlias = None,
    currency: CurrencyAlias = None,
) -> dict[str, object]:
    """One asset with its specifications and, for each, its price in `country_id` and `currency_code`. An
    unknown asset is 404; an unknown country or currency 422."""
    market = service.resolve_market(client.session, country_id or country, currency_code or currency)
    asset = service.get_asset(client.session, asset_id, *market)
    return ok(asset, "Asset fetched successfully.")


@router.get(
    "/countries",
    response_model=Envelope[list[CountryOut]],
    responses=error_responses(),
    summary="List countries (ISO 3166-1) with their currency",
)
def list_countries(client: ReadAccess) -> dict[str, object]:
    """Every country (ISO 3166-1) with its id, two-letter code and currency: use any of id, name or code
    wherever a body or query names a country."""
    countries = CatalogRepository(client.session).countries()
    return ok(countries, "Countries fetched successfully.")


@router.get(
    "/currencies",
    response_model=Envelope[list[CurrencyOut]],
    responses=error_responses(),
    summary="List currencies (ISO 4217)",
)
def list_currencies(client: ReadAccess) -> dict[str, object]:
    """Every currency (ISO 4217) with its code and minor units (decimal places of its amounts)."""
    currencies = CatalogRepository(client.session).currencies()
    return ok(currencies, "Currencies fetched successfully.")
