"""`outfitter catalog import FILE`: load a catalog JSON file; importing it twice changes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)
from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.catalog.reference import find_country, find_currency
from outfitter.core.errors import validation_message
from outfitter.core.money import decimal_text, round_money
from outfitter.core.schemas import WEB_URL
from outfitter.db.session import one_at_a_time
from outfitter.models import Asset, AssetModel, AssetPricing, AssetSpecification, AssetStatus, Category

_NO_NUL = r"^[^\x00]*$"  # neither database keeps a NUL in text (SQLite would, and answer it)


def _limits(max_length: int, min_length: int = 1) -> StringConstraints:
    """A catalog field's text: trimmed, as long as its column takes, no NUL."""
    return StringConstraints(
        strip_whitespace=True, min_length=min_length, max_length=max_length, pattern=_NO_NUL
    )


def _web_url(value: str) -> str:
    """An image's address, which fulfilment copies to a device's `image_url`: a web URL (a client
    shows it as an image or a link: no javascript:, no spaces), as a payment's redirect_url is."""
    if not WEB_URL.fullmatch(value):
        raise ValueError("Give an http:// or https:// URL, with no spaces or control characters.")
    return value


Text = Annotated[str, _limits(200)]
ImageUrl = Annotated[str, StringConstraints(strip_whitespace=True, max_length=1000), AfterValidator(_web_url)]
SpecText = Annotated[str, _limits(200, min_length=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _written_as_prices_are(value: object) -> object:
    """An amount given as text is the digits 0-9 with at most one point: Decimal alone also reads
    other scripts' digits ("١٢" is 12), an exponent and "_", which a spreadsheet's slip would
    turn into a price unseen. A JSON number is taken as it is."""
    if isinstance(value, str) and decimal_text(value) is None:
        raise ValueError('Give the amount as the digits 0-9 with at most one point, e.g. "1999.00".')
    return value


class PriceIn(_Strict):
    country: Text
    currency: Text
    amount: Annotated[
        Decimal, BeforeValidator(_written_as_prices_are), Field(gt=0, max_digits=18, decimal_places=6)
    ]


class SpecificationIn(_Strict):
    spec: dict[SpecText, SpecText] = Field(default_factory=dict)
    images: list[ImageUrl] = Field(default_factory=list)
    status: AssetStatus = AssetStatus.AVAILABLE
    prices: list[PriceIn] = Field(default_factory=list)


class AssetIn(_Strict):
    name: Text
    description: Annotated[str, _limits(4000, min_length=0)] = ""
    year: Annotated[str, StringConstraints(pattern=r"^[0-9]{4}$")]  # ASCII digits, as the document says
    type: Annotated[str, _limits(50)] = "Sale"
    make: Annotated[str, _limits(100)]
    model: Text
    category: Annotated[str, _limits(100)]
    asset_code: Annotated[str, _limits(100)] | None = None
    images: list[ImageUrl] = Field(default_factory=list)
    status: AssetStatus = AssetStatus.AVAILABLE
    specifications: list[SpecificationIn] = Field(min_length=1)

    @property
    def import_key(self) -> str:
        return self.asset_code or f"{self.make}|{self.model}|{self.name}|{self.year}"


class CatalogFile(_Strict):
    assets: list[AssetIn]


class CatalogImportError(ValueError):
    pass


@dataclass
class ImportSummary:
    assets_created: int = 0
    assets_updated: int = 0
    specifications_created: int = 0
    prices_created: int = 0
    prices_updated: int = 0


MAX_CATALOG_BYTES = 64 * 1024 * 1024  # what `outfitter catalog import` reads of a file


def load_catalog_file(path: Path) -> CatalogFile:
    """A catalog file the service ships (the demo's), read whole."""
    return parse_catalog(path.read_bytes(), str(path))


SHAPE_PROBLEMS_SHOWN = 20


def parse_catalog(data: bytes, source: str) -> CatalogFile:
    """A catalog file's bytes, checked; CatalogImportError naming `source` and each problem of its
    shape (or the first of the others)."""
    try:
        raw: Any = json.loads(data.decode("utf-8-sig"))  # a BOM, as Notepad writes, is no content
    except UnicodeDecodeError as exc:
        raise CatalogImportError(f"{source} is not UTF-8 text (byte {exc.start} cannot be read)") from exc
    except json.JSONDecodeError as exc:
        raise CatalogImportError(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno}") from exc
    except RecursionError as exc:
        raise CatalogImportError(f"{source} nests arrays or objects too deeply to be a catalog") from exc
    if not isinstance(raw, dict):
        raise CatalogImportError(f'{source}: a catalog file is a JSON object with one key, "assets"')
    try:
        return CatalogFile.model_validate(raw)
    except ValidationError as exc:
        # Every problem of the file's shape, a line each (up to SHAPE_PROBLEMS_SHOWN), so that one
        # round of fixes is enough.
        lines = [
            f"{source}: {'.'.join(str(part) for part in error['loc'])}: {_problem(error)}"
            for error in exc.errors()[:SHAPE_PROBLEMS_SHOWN]
        ]
        more = exc.error_count() - len(lines)
        if more:
            lines.append(f"{source}: and {more} more problem(s) of the same kind")
        raise CatalogImportError("\n".join(lines)) from exc


def _problem(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "not a field of a catalog file (docs/catalog.md lists them)"
    if error["type"] == "string_pattern_mismatch" and error["ctx"]["pattern"] == _NO_NUL:
        return "must not contain a NUL character (\\u0000)"
    return validation_message(error)


def _named(session: Session, model: type[Category] | type[AssetModel], name: str) -> Any:
    record = session.scalars(select(model).where(model.name == name)).one_or_none()
    if record is None:
        record = model(name=name)
        session.add(record)
        session.flush()
    return record


def import_catalog(
    session: Session, catalog: CatalogFile, progress: Callable[[int], None] | None = None
) -> ImportSummary:
    """Upsert every asset, specification and price of `catalog`, calling `progress(1)` after each
    asset. Flushes; the caller commits. An asset, a specification of an asset or a price of a
    specification given twice is an error naming both places: the second would silently replace
    the first (a copy-paste slip repricing another product). Imports run one at a time: a second
    one started meanwhile waits, then finds the first's records (it changes what differs)."""
    one_at_a_time(session.connection(), "outfitter catalog import")
    summary = ImportSummary()
    first_of_asset: dict[str, int] = {}
    for index, item in enumerate(catalog.assets):
        earlier = first_of_asset.setdefault(item.import_key, index)
        if earlier != index:
            what = f"asset_code {item.asset_code!r}" if item.asset_code else "make, model, name and year"
            raise CatalogImportError(
                f"assets.{index}: the same {what} as assets.{earlier}: give each asset once"
            )
        first_of_spec: dict[str, int] = {}
        for spec_index, spec_in in enumerate(item.specifications):
            earlier = first_of_spec.setdefault(_spec_key(spec_in), spec_index)
            if earlier != spec_index:
                raise CatalogImportError(
                    f"assets.{index}.specifications.{spec_index}: the same spec as "
                    f"assets.{index}.specifications.{earlier}: give each specification once"
                )
        category = _named(session, Category, item.category)
        model = _named(session, AssetModel, item.model)
        asset = session.scalars(select(Asset).where(Asset.import_key == item.import_key)).one_or_none()
        fields = {
            "name": item.name,
            "description": item.description,
            "year": item.year,
            "type": item.type,
            "make": item.make,
            "model_id": model.id,
            "category_id": category.id,
            "asset_code": item.asset_code,
            "images": item.images,
            "status": item.status,
        }
        if asset is None:
            asset = Asset(import_key=item.import_key, **fields)
            session.add(asset)
            summary.assets_created += 1
        else:
            changed = any(getattr(asset, key) != value for key, value in fields.items())
            for key, value in fields.items():
                setattr(asset, key, value)
            summary.assets_updated += int(changed)
        session.flush()
        for spec_index, spec_in in enumerate(item.specifications):
            _import_specification(
                session, asset, spec_in, f"assets.{index}.specifications.{spec_index}", summary
            )
        if progress is not None:
            progress(1)
    return summary


def _spec_key(spec_in: SpecificationIn) -> str:
    return json.dumps(spec_in.spec, sort_keys=True)


def _import_specification(
    session: Session, asset: Asset, spec_in: SpecificationIn, where: str, summary: ImportSummary
) -> None:
    spec_key = _spec_key(spec_in)
    spec = session.scalars(
        select(AssetSpecification).where(
            AssetSpecification.asset_id == asset.id, AssetSpecification.spec_key == spec_key
        )
    ).one_or_none()
    if spec is None:
        spec = AssetSpecification(asset_id=asset.id, spec_key=spec_key, spec=spec_in.spec)
        session.add(spec)
        summary.specifications_created += 1
    spec.images = spec_in.images
    spec.status = spec_in.status
    session.flush()
    first_of_price: dict[tuple[object, object], int] = {}
    for price_index, price_in in enumerate(spec_in.prices):
        country = find_country(session, price_in.country)
        currency = find_currency(session, price_in.currency)
        if country is None or currency is None:
            unknown = price_in.country if country is None else price_in.currency
            raise CatalogImportError(f"{where}.prices.{price_index}: unknown country or currency {unknown!r}")
        earlier = first_of_price.setdefault((country.id, currency.id), price_index)
        if earlier != price_index:
            raise CatalogImportError(
                f"{where}.prices.{price_index}: a second price for {country.name} in {currency.code} "
                f"(the first is {where}.prices.{earlier}): one price per country and currency"
            )
        if round_money(price_in.amount, currency.minor_units) != price_in.amount:
            raise CatalogImportError(
                f"{where}.prices.{price_index}: {price_in.amount} has more decimal places than "
                f"{currency.code} amounts have ({currency.minor_units})"
            )
        pricing = session.scalars(
            select(AssetPricing).where(
                AssetPricing.specification_id == spec.id,
                AssetPricing.country_id == country.id,
                AssetPricing.currency_id == currency.id,
            )
        ).one_or_none()
        if pricing is None:
            session.add(
                AssetPricing(
                    specification_id=spec.id,
                    country_id=country.id,
                    currency_id=currency.id,
                    amount=price_in.amount,
                )
            )
            summary.prices_created += 1
        elif pricing.amount != price_in.amount:
            pricing.amount = price_in.amount
            summary.prices_updated += 1
    session.flush()
