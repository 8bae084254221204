"""Money arithmetic: Decimal only, rounded half-up to the currency's minor unit."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

# The largest amount (exclusive) any price, charge, credit or balance may reach. The Money column
# stores NUMERIC(24, 6) on PostgreSQL but integer millionths on SQLite, whose 64-bit integers end
# at 9.2 x 10^12: one bound below both keeps every amount storable on either database.
MAX_AMOUNT = Decimal(10) ** 12


def storable(amount: Decimal) -> bool:
    return amount.is_finite() and -MAX_AMOUNT < amount < MAX_AMOUNT


def round_money(amount: Decimal, minor_units: int) -> Decimal:
    return amount.quantize(Decimal(1).scaleb(-minor_units), rounding=ROUND_HALF_UP)


def percent_of(amount: Decimal, percent: Decimal, minor_units: int) -> Decimal:
    return round_money(amount * percent / Decimal(100), minor_units)
