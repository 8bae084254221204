"""Catalog response shapes, field for field as docs/api.md and the OpenAPI document give them."""

from __future__ import annotations

import uuid
from decimal import Decimal

from pydantic import Field

from outfitter.core.money import round_money
from outfitter.core.schemas import Money, Schema, Timestamp
from outfitter.models import AssetPricing, AssetSpecification, AssetStatus, Currency, CurrencyStatus


class CurrencyBrief(Schema):
    code: str
    name: str
    symbol: str


class AssetPricingOut(Schema):
    id: uuid.UUID
    amount: Money
    currency: CurrencyBrief


class AssetSpecificationOut(Schema):
    id: uuid.UUID
    asset_spec_id: uuid.UUID
    asset_id: uuid.UUID
    name: str
    description: str
    year: str
    type: str
    make: str
    model: str
    category: str
    asset_code: str | None
    status: AssetStatus
    spec: dict[str, str]
    images: list[str]
    asset_pricing: AssetPricingOut


class AssetSpecificationListItem(AssetSpecificationOut):
    created_at: Timestamp = Field(serialization_alias="createdAt")
    updated_at: Timestamp = Field(serialization_alias="updatedAt")


class AssetOut(Schema):
    id: uuid.UUID
    name: str
    description: str
    year: str
    type: str
    make: str
    model: str
    images: list[str]
    specifications: list[AssetSpecificationOut]
    category: str
    asset_code: str | None
    status: AssetStatus


class NamedOut(Schema):
    id: uuid.UUID
    name: str


class CountryOut(Schema):
    id: uuid.UUID
    name: str
    code: str
    currency_code: str


class CurrencyOut(Schema):
    id: uuid.UUID
    code: str
    name: str
    symbol: str
    minor_units: int
    status: CurrencyStatus


def pricing_out(pricing: AssetPricing, currency: Currency) -> AssetPricingOut:
    amount: Decimal = round_money(pricing.amount, currency.minor_units)
    return AssetPricingOut(
        id=pricing.id,
        amount=amount,
        currency=CurrencyBrief(code=currency.code, name=currency.name, symbol=currency.symbol),
    )


def specification_fields(
    spec: AssetSpecification, pricing: AssetPricing, currency: Currency
) -> dict[str, object]:
    asset = spec.asset
    return {
        "id": spec.id,
        "asset_spec_id": spec.id,
        "asset_id": asset.id,
        "name": asset.name,
        "description": asset.description,
        "year": asset.year,
        "type": asset.type,
        "make": asset.make,
        "model": asset.model,
        "category": asset.category.name,
        "asset_code": asset.asset_code,
        "status": spec.status,
        "spec": {str(key): str(value) for key, value in spec.spec.items()},
        "images": spec.images or asset.images,
        "asset_pricing": pricing_out(pricing, currency),
        "created_at": spec.created_at,
        "updated_at": spec.updated_at,
    }
