"""Money arithmetic: Decimal only, rounded half-up to the currency's minor unit."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal


def round_money(amount: Decimal, minor_units: int) -> Decimal:
    return amount.quantize(Decimal(1).scaleb(-minor_units), rounding=ROUND_HALF_UP)


def percent_of(amount: Decimal, percent: Decimal, minor_units: int) -> Decimal:
    return round_money(amount * percent / Decimal(100), minor_units)
