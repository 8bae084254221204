"""Every catalog query. The catalog is shared by all companies; operators maintain it."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence

from sqlalchemy import Select, select
from sqlalchemy.orm import Session, contains_eager, joinedload

from outfitter.models import (
    Asset,
    AssetModel,
    AssetPricing,
    AssetSpecification,
    AssetStatus,
    Category,
    Country,
    Currency,
)


class CatalogRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def priced_specifications(
        self, country: Country, currency: Currency, asset_id: uuid.UUID | None = None
    ) -> Select[AssetPricing]:
        """Prices for one country and currency, each with its Available specification and asset
        loaded by joins: one statement for a whole page."""
        statement = (
            select(AssetPricing)
            .join(AssetPricing.specification)
            .join(AssetSpecification.asset)
            .where(
                AssetPricing.country_id == country.id,
                AssetPricing.currency_id == currency.id,
                AssetSpecification.status == AssetStatus.AVAILABLE,
                Asset.status == AssetStatus.AVAILABLE,
            )
            .options(
                contains_eager(AssetPricing.specification)
                .contains_eager(AssetSpecification.asset)
                .options(joinedload(Asset.category), joinedload(Asset.model_ref))
            )
            .order_by(AssetSpecification.created_at.desc(), AssetSpecification.id.desc())
        )
        if asset_id is not None:
            statement = statement.where(Asset.id == asset_id)
        return statement

    def pricings(self, pricing_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, AssetPricing]:
        """Prices by id with their market and their specification's asset, category and model:
        what ordering needs, in one statement."""
        statement = (
            select(AssetPricing)
            .where(AssetPricing.id.in_(pricing_ids))
            .options(
                joinedload(AssetPricing.currency),
                joinedload(AssetPricing.country),
                joinedload(AssetPricing.specification)
                .joinedload(AssetSpecification.asset)
                .options(joinedload(Asset.category), joinedload(Asset.model_ref)),
            )
        )
        return {pricing.id: pricing for pricing in self.session.scalars(statement).unique()}

    def asset(self, asset_id: uuid.UUID) -> Asset | None:
        return self.session.scalars(
            select(Asset)
            .where(Asset.id == asset_id, Asset.status == AssetStatus.AVAILABLE)
            .options(joinedload(Asset.category), joinedload(Asset.model_ref))
        ).one_or_none()

    def prices_of_asset(
        self, asset_id: uuid.UUID, country: Country, currency: Currency
    ) -> Sequence[AssetPricing]:
        return self.session.scalars(self.priced_specifications(country, currency, asset_id)).unique().all()

    def categories(self) -> Sequence[Category]:
        return self.session.scalars(select(Category).order_by(Category.name)).all()

    def models(self) -> Sequence[AssetModel]:
        return self.session.scalars(select(AssetModel).order_by(AssetModel.name)).all()

    def countries(self) -> Sequence[Country]:
        return self.session.scalars(select(Country).order_by(Country.name)).all()

    def currencies(self) -> Sequence[Currency]:
        return self.session.scalars(select(Currency).order_by(Currency.code)).all()
