"""Reference data (countries, currencies) and the catalog: assets, their specifications (the
purchasable variants) and a price per specification, country and currency."""

from __future__ import annotations

import uuid
from decimal import Decimal
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from outfitter.db.base import Base, IdMixin, TimestampMixin, str_enum


class CurrencyStatus(StrEnum):
    ACTIVE = "Active"


class AssetStatus(StrEnum):
    """Of an asset and of each specification: only Available ones are listed and can be ordered."""

    AVAILABLE = "Available"
    UNAVAILABLE = "Unavailable"  # withdrawn by a catalog import


class Currency(IdMixin, TimestampMixin, Base):
    __tablename__ = "currencies"

    code: Mapped[str] = mapped_column(String(3), unique=True)
    name: Mapped[str] = mapped_column(String(100))
    symbol: Mapped[str] = mapped_column(String(16))
    minor_units: Mapped[int]
    status: Mapped[CurrencyStatus] = mapped_column(
        str_enum(CurrencyStatus, 20), default=CurrencyStatus.ACTIVE
    )

    @property
    def quantum(self) -> Decimal:
        """The smallest amount of this currency: 0.01 for two minor units, 1 for none."""
        return Decimal(1).scaleb(-self.minor_units)


class Country(IdMixin, TimestampMixin, Base):
    __tablename__ = "countries"

    name: Mapped[str] = mapped_column(String(100), unique=True)
    code: Mapped[str] = mapped_column(String(2), unique=True)
    currency_code: Mapped[str] = mapped_column(String(3))


class Category(IdMixin, TimestampMixin, Base):
    __tablename__ = "categories"

    name: Mapped[str] = mapped_column(String(100), unique=True)


class AssetModel(IdMixin, TimestampMixin, Base):
    __tablename__ = "asset_models"

    name: Mapped[str] = mapped_column(String(200), unique=True)


class Asset(IdMixin, TimestampMixin, Base):
    __tablename__ = "assets"

    # The natural key a catalog import matches on: asset_code when given, else make|model|name|year.
    import_key: Mapped[str] = mapped_column(String(500), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(String(4000), default="")
    year: Mapped[str] = mapped_column(String(4))
    type: Mapped[str] = mapped_column(String(50))
    make: Mapped[str] = mapped_column(String(100))
    model_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("asset_models.id"), index=True)
    category_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("categories.id"), index=True)
    asset_code: Mapped[str | None] = mapped_column(String(100))
    images: Mapped[list[str]] = mapped_column(JSON, default=list)
    status: Mapped[AssetStatus] = mapped_column(str_enum(AssetStatus, 20), default=AssetStatus.AVAILABLE)

    category: Mapped[Category] = relationship(lazy="raise")
    model_ref: Mapped[AssetModel] = relationship(lazy="raise")
    specifications: Mapped[list[AssetSpecification]] = relationship(
        back_populates="asset", lazy="raise", order_by="AssetSpecification.created_at"
    )

    @property
    def model(self) -> str:
        return self.model_ref.name


class AssetSpecification(IdMixin, TimestampMixin, Base):
    __tablename__ = "asset_specifications"
    __table_args__ = (UniqueConstraint("asset_id", "spec_key"),)

    asset_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("assets.id", ondelete="CASCADE"), index=True)
    spec_key: Mapped[str] = mapped_column(String(1000))  # canonical JSON of `spec`, for idempotent imports
    spec: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    images: Mapped[list[str]] = mapped_column(JSON, default=list)
    status: Mapped[AssetStatus] = mapped_column(str_enum(AssetStatus, 20), default=AssetStatus.AVAILABLE)

    asset: Mapped[Asset] = relationship(back_populates="specifications", lazy="raise")
    prices: Mapped[list[AssetPricing]] = relationship(back_populates="specification", lazy="raise")


class AssetPricing(IdMixin, TimestampMixin, Base):
    __tablename__ = "asset_pricing"
    __table_args__ = (
        UniqueConstraint("specification_id", "country_id", "currency_id"),
        # The asset list filters on (country, currency) and joins back to the specification.
        Index("ix_asset_pricing_country_currency", "country_id", "currency_id", "specification_id"),
    )

    specification_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("asset_specifications.id", ondelete="CASCADE")
    )
    country_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("countries.id"))
    currency_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("currencies.id"))
    amount: Mapped[Decimal]

    specification: Mapped[AssetSpecification] = relationship(back_populates="prices", lazy="raise")
    country: Mapped[Country] = relationship(lazy="raise")
    currency: Mapped[Currency] = relationship(lazy="raise")
