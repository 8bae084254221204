"""ISO 3166-1 countries and ISO 4217 currencies, never typed by hand: pycountry for the countries,
Babel (CLDR) for names, symbols and each country's legal tender, and the iso4217 package (ISO's own
published table) for minor units, where CLDR differs (IQD: ISO 3, CLDR 0). Also the lookups that
accept a country as its id, its name (any name ISO or CLDR gives it) or its alpha-2 or alpha-3 code."""

from __future__ import annotations

import functools
import unicodedata
import uuid
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import pycountry
from babel import Locale, UnknownLocaleError
from babel.numbers import (
    get_currency_name,
    get_currency_precision,
    get_currency_symbol,
    get_territory_currencies,
)
from sqlalchemy import bindparam, func, or_, select
from sqlalchemy.orm import Session

from outfitter.core.errors import ValidationFailed
from outfitter.db.reads import Read, ReadPlan
from outfitter.db.tenancy import parse_uuid
from outfitter.models import Country, Currency


def _local_symbol(code: str, territory: str | None) -> str:
    """The symbol people of the currency's own country use (₦, Ksh, R), else the English one."""
    if territory:
        try:
            return get_currency_symbol(code, f"en_{territory}")
        except UnknownLocaleError:
            pass
    return get_currency_symbol(code, "en")


def _iso_exponent(code: str) -> int | None:
    """ISO 4217's minor unit of `code` (ValueError when ISO's table lacks it). Imported here: the
    table's module costs more to load than most CLI commands take to run."""
    import iso4217

    exponent = iso4217.Currency(code).exponent
    return None if exponent is None else int(exponent)


def is_money(code: str) -> bool:
    """Whether ISO 4217 gives the currency a minor unit. It gives none ("N.A.") to what is not money
    anyone pays in: gold and the other metals, the SDR, bond units, the testing code XTS and XXX,
    "no currency". A code ISO's current table lacks (a tender CLDR still lists) counts as money."""
    try:
        return _iso_exponent(code) is not None
    except ValueError:
        return True


def minor_units(code: str) -> int:
    """Decimal places of a currency per ISO 4217; CLDR's for the few ISO lists as N.A. (gold...)."""
    try:
        exponent = _iso_exponent(code)
    except ValueError:  # not in ISO's current table
        exponent = None
    return int(exponent) if exponent is not None else int(get_currency_precision(code))


def sync_reference_data(session: Session) -> tuple[int, int]:
    """Insert the countries and currencies that are missing; idempotent. Returns (countries, currencies)
    added. Countries with no current legal tender (Antarctica) are left out: nobody can be paid there."""
    country_currency: dict[str, str] = {}
    for country in pycountry.countries:
        tenders = get_territory_currencies(country.alpha_2, tender=True)
        if tenders:
            country_currency[country.alpha_2] = tenders[0]
    home_territory: dict[str, str] = {}
    for alpha_2, code in sorted(country_currency.items()):
        home_territory.setdefault(code, alpha_2)
    codes = {currency.alpha_3 for currency in pycountry.currencies if is_money(currency.alpha_3)}
    codes |= set(country_currency.values())

    known_currencies = set(session.scalars(select(Currency.code)))
    new_currencies = [
        Currency(
            code=code,
            name=get_currency_name(code, locale="en"),
            symbol=_local_symbol(code, home_territory.get(code)),
            minor_units=minor_units(code),
        )
        for code in sorted(codes - known_currencies)
    ]
    session.add_all(new_currencies)
    for currency in session.scalars(select(Currency).where(Currency.code.in_(known_currencies))):
        currency.minor_units = minor_units(currency.code)  # databases seeded from CLDR: corrected

    known_countries = set(session.scalars(select(Country.code)))
    new_countries = [
        Country(
            name=getattr(country, "common_name", None) or country.name,
            code=country.alpha_2,
            currency_code=country_currency[country.alpha_2],
        )
        for country in pycountry.countries
        if country.alpha_2 in country_currency and country.alpha_2 not in known_countries
    ]
    session.add_all(new_countries)
    session.flush()
    return len(new_countries), len(new_currencies)


def _folded(name: str) -> str:
    """A country's name as people type it: any case, accents or not, either apostrophe, single
    spaces ("Côte d\N{RIGHT SINGLE QUOTATION MARK}Ivoire" and "cote d'ivoire" are one name)."""
    decomposed = unicodedata.normalize("NFKD", name.replace("\N{RIGHT SINGLE QUOTATION MARK}", "'"))
    return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).casefold().split())


@functools.cache
def _codes_by_other_name() -> dict[str, str]:
    """Every other name of a country, folded, to its alpha-2 code: ISO 3166's short and official
    names and its common name (pycountry: "Viet Nam", "Russian Federation", "Republic of Türkiye"),
    CLDR's English name (Babel: "Vietnam", "Russia", "South Korea"), and its alpha-3 code. The
    countries' table keeps one name each (the common one); a client may know another."""
    english = Locale("en").territories
    codes: dict[str, str] = {}
    for country in pycountry.countries:
        for name in (
            country.name,
            getattr(country, "official_name", None),
            getattr(country, "common_name", None),
            english.get(country.alpha_2),
            country.alpha_3,
        ):
            if name:
                codes.setdefault(_folded(name), country.alpha_2)
    return codes


def country_code_named(value: str) -> str:
    """The alpha-2 code of the country `value` names by another of its names or its alpha-3 code;
    else `value` in capitals (it may be an alpha-2 code). Ids and stored names are matched first."""
    return _codes_by_other_name().get(_folded(value), value.upper())


# A country is named by its id, its name in any case, or its code (`country_code_named`).
_COUNTRY_NAMED = or_(
    func.lower(Country.name) == bindparam("country_name"), Country.code == bindparam("country_code")
)
_COUNTRY_ID_BY_ID = select(Country.id).where(Country.id == bindparam("country_id"))
_COUNTRY_ID_BY_NAME = select(Country.id).where(_COUNTRY_NAMED).limit(1)


def _naming(value: str) -> dict[str, str]:
    return {"country_name": value.lower(), "country_code": country_code_named(value)}


def country_codes(session: Session) -> list[str]:
    """Every country's alpha-2 code, in order."""
    return list(session.scalars(select(Country.code).order_by(Country.code)))


def find_country(session: Session, value: str) -> Country | None:
    value = value.strip()
    if not value:
        return None
    parsed = parse_uuid(value)
    if parsed is not None:
        return session.get(Country, parsed)
    return session.scalars(select(Country).where(_COUNTRY_NAMED), _naming(value)).first()


def resolve_country(session: Session, value: str | None, field: str) -> Country:
    """The country named by `value` (id, name or alpha-2 code), or 422 naming `field`."""
    country = find_country(session, value) if value is not None else None
    if country is None:
        raise _unknown_country(value, field)
    return country


@dataclass(frozen=True)
class CountryRef:
    """What a write needs of a country: its id, and what answers show of it."""

    id: uuid.UUID
    name: str
    code: str
    currency_code: str


class _Named(Protocol):
    """A country as a lookup needs it: a `Country` row, or a `CountryRef`."""

    @property
    def id(self) -> uuid.UUID: ...

    @property
    def name(self) -> str: ...

    @property
    def code(self) -> str: ...


NamedT = TypeVar("NamedT", bound=_Named)


class Countries(Generic[NamedT]):
    """Countries by id, lower-cased name and code; `find` takes a country as a client names it
    (`find_country`'s rules, without a statement): the process's copy of them all, or a batch's."""

    def __init__(self, countries: Iterable[NamedT]) -> None:
        self.by_id: dict[uuid.UUID, NamedT] = {}
        self.by_name: dict[str, NamedT] = {}
        self.by_code: dict[str, NamedT] = {}
        for country in countries:
            self.by_id[country.id] = country
            self.by_name[country.name.lower()] = country
            self.by_code[country.code] = country

    def find(self, value: str) -> NamedT | None:
        parsed = parse_uuid(value)
        if parsed is not None:
            return self.by_id.get(parsed)
        return self.by_name.get(value.lower()) or self.by_code.get(country_code_named(value))


# Countries are reference data that only `db upgrade` adds to (and nothing renames or removes): each
# process keeps a copy per database (engine), so the writes that name one read none. A value the copy
# does not know is asked of the database, as `find_country` asks, and a hit renews the copy.
_countries: weakref.WeakKeyDictionary[Any, Countries[CountryRef]] = weakref.WeakKeyDictionary()
_ALL_COUNTRIES = select(Country.id, Country.name, Country.code, Country.currency_code)


def _load_countries(session: Session) -> Countries[CountryRef]:
    countries = Countries(CountryRef(*row) for row in session.execute(_ALL_COUNTRIES))
    _countries[session.get_bind()] = countries
    return countries


def resolve_country_ref(session: Session, value: str | None, field: str) -> CountryRef:
    """`resolve_country` from the process's copy of the countries: no statement once it is made."""
    name = (value or "").strip()
    countries = _countries.get(session.get_bind())
    country = countries.find(name) if countries is not None and name else None
    if country is None and name and (countries is None or find_country(session, name) is not None):
        country = _load_countries(session).find(name)
    if country is None:
        raise _unknown_country(value, field)
    return country


def country_id_plan(value: str, field: str) -> ReadPlan[uuid.UUID]:
    """`resolve_country` as a read plan (db.reads) answering the country's id."""
    value = value.strip()
    parsed = parse_uuid(value)
    rows: Sequence[Any] = ()
    if parsed is not None:
        rows = yield Read(_COUNTRY_ID_BY_ID, {"country_id": parsed}, scoped=False)
    elif value:
        rows = yield Read(_COUNTRY_ID_BY_NAME, _naming(value), scoped=False)
    if not rows:
        raise _unknown_country(value, field)
    return rows[0].id  # type: ignore[no-any-return]


def _unknown_country(value: str | None, field: str) -> ValidationFailed:
    return ValidationFailed.field(
        field,
        f"Unknown country {value!r}: give a country id, name or two-letter code (see /client/countries).",
    )


def find_currency(session: Session, code: str) -> Currency | None:
    return session.scalars(select(Currency).where(Currency.code == code.strip().upper())).one_or_none()


def resolve_currency(session: Session, code: str | None, field: str) -> Currency:
    currency = find_currency(session, code) if code else None
    if currency is None:
        raise ValidationFailed.field(
            field, f"Unknown currency {code!r}: give an ISO 4217 code such as USD (see /client/currencies)."
        )
    return currency


def currencies_by_code(session: Session, codes: Iterable[str]) -> dict[str, Currency]:
    """The currencies among `codes` (any case), by upper-case code: one statement for a batch."""
    wanted = {code.strip().upper() for code in codes if code.strip()}
    if not wanted:
        return {}
    return {
        currency.code: currency
        for currency in session.scalars(select(Currency).where(Currency.code.in_(wanted)))
    }
