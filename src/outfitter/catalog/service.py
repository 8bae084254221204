"""Catalog rules: what a company can buy for a country, in a currency, and at what price."""

from __future__ import annotations

from sqlalchemy.orm import Session

from outfitter.catalog.reference import resolve_country, resolve_currency
from outfitter.catalog.repository import CatalogRepository
from outfitter.catalog.schemas import (
    AssetOut,
    AssetSpecificationListItem,
    AssetSpecificationOut,
    specification_fields,
)
from outfitter.core.errors import NotFound, ValidationFailed
from outfitter.db.keyset import PageParams, PageResult, paginate
from outfitter.db.tenancy import parse_uuid
from outfitter.models import Country, Currency


def resolve_market(
    session: Session, country: str | None, currency_code: str | None
) -> tuple[Country, Currency]:
    """The country and currency of a catalog query; both required. Errors name the query parameter."""
    errors: dict[str, list[str]] = {}
    if not country:
        errors["query.country_id"] = ["Required: the id, name or two-letter code of the employee's country."]
    if not currency_code:
        errors["query.currency_code"] = ["Required: the ISO 4217 code of the currency the company pays in."]
    if errors:
        raise ValidationFailed.fields(errors)
    assert country is not None and currency_code is not None
    return (
        resolve_country(session, country, "query.country_id"),
        resolve_currency(session, currency_code, "query.currency_code"),
    )


def list_assets(
    session: Session, country: Country, currency: Currency, params: PageParams
) -> tuple[list[AssetSpecificationListItem], PageResult[object]]:
    statement = CatalogRepository(session).priced_specifications(country, currency)
    page = paginate(session, statement, params)
    records = [
        AssetSpecificationListItem.model_validate(
            specification_fields(pricing.specification, pricing, currency)
        )
        for pricing in page.items
    ]
    return records, page


def get_asset(session: Session, asset_id: str, country: Country, currency: Currency) -> AssetOut:
    parsed = parse_uuid(asset_id)
    repository = CatalogRepository(session)
    asset = repository.asset(parsed) if parsed else None
    if asset is None:
        raise NotFound.record("Asset")
    specifications = [
        AssetSpecificationOut.model_validate(specification_fields(pricing.specification, pricing, currency))
        for pricing in repository.prices_of_asset(asset.id, country, currency)
    ]
    return AssetOut(
        id=asset.id,
        name=asset.name,
        description=asset.description,
        year=asset.year,
        type=asset.type,
        make=asset.make,
        model=asset.model,
        images=asset.images,
        specifications=specifications,
        category=asset.category.name,
        asset_code=asset.asset_code,
        status=asset.status,
    )
