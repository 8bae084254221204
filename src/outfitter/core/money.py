"""Money arithmetic: Decimal only, rounded half-up to the currency's minor unit."""

from __future__ import annotations

import re
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


_DECIMAL_TEXT = re.compile(r"-?[0-9]+(\.[0-9]+)?")


def decimal_text(text: str) -> Decimal | None:
    """`text` as a Decimal when it is written as people write amounts: the digits 0-9, at most one
    point, perhaps a leading minus; None for what Decimal alone would also read (an exponent, "_",
    "NaN", other scripts' digits), which no operator means as an amount."""
    text = text.strip()
    return Decimal(text) if _DECIMAL_TEXT.fullmatch(text) else None
