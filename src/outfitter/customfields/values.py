"""Checking a custom field's value against its definition: the one place a value's type, pattern,
bounds and choices are enforced, for JSON bodies, CSV cells and list filters alike.

A value is stored in the JSON form its type gives it (models.customfields.CustomFieldType): text
as a string, a number as a JSON integer, a decimal as its canonical string ("12.5", exact), a date
as "YYYY-MM-DD", a boolean as true/false, one of a list as its string, many of a list as a list
of distinct strings. Each check answers that form or raises `ValueError` with a sentence a
person can act on; callers put it under `custom_fields.<key>`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol
from urllib.parse import urlsplit

from email_validator import EmailNotValidError, validate_email

from outfitter.models import CustomFieldType

MAX_TEXT = 500
MAX_LONG_TEXT = 10_000
MAX_URL = 2_000
MAX_MAGNITUDE = Decimal(10) ** 15  # numbers and decimals: what every client's JSON reads exactly
MAX_DECIMAL_PLACES = 6
MULTI_SEPARATOR = "|"  # many of a list in one CSV cell or filter value: "red|blue"
TRUE_WORDS = frozenset({"true", "yes", "1"})
FALSE_WORDS = frozenset({"false", "no", "0"})


class FieldRules(Protocol):
    """What a check reads of a definition (the row, or a definition being made)."""

    @property
    def key(self) -> str: ...
    @property
    def type(self) -> CustomFieldType: ...
    @property
    def pattern(self) -> str | None: ...
    @property
    def minimum(self) -> str | None: ...
    @property
    def maximum(self) -> str | None: ...
    @property
    def choices(self) -> list[str]: ...


def check_value(rules: FieldRules, value: object, *, from_text: bool = False) -> Any:
    """`value` in its stored form, or ValueError. `from_text`: a CSV cell or a query value, where
    every value is a string ("42", "true", "red|blue")."""
    if value is None:
        raise ValueError("Give a value, or leave the field out.")
    kind = rules.type
    if kind in (CustomFieldType.TEXT, CustomFieldType.LONG_TEXT):
        return _text(rules, value, MAX_TEXT if kind == CustomFieldType.TEXT else MAX_LONG_TEXT)
    if kind in (CustomFieldType.NUMBER, CustomFieldType.DECIMAL):
        return _number(rules, value, from_text=from_text)
    if kind == CustomFieldType.DATE:
        return _date(value)
    if kind == CustomFieldType.BOOLEAN:
        return _boolean(value, from_text=from_text)
    if kind == CustomFieldType.CHOICE:
        return _choice(rules, value)
    if kind == CustomFieldType.MULTI_CHOICE:
        return _choices(rules, value, from_text=from_text)
    if kind == CustomFieldType.URL:
        return _url(value)
    return _email(value)


def _string(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"Give {what} as a string.")
    if "\x00" in value:
        raise ValueError("The value contains a NUL character.")
    return value


def _text(rules: FieldRules, value: object, limit: int) -> str:
    text = _string(value, "the text").strip()
    if not text:
        raise ValueError("The text is empty: give a value, or leave the field out.")
    if len(text) > limit:
        raise ValueError(f"At most {limit:,} characters.")
    if rules.pattern and re.fullmatch(rules.pattern, text) is None:
        raise ValueError(f"Does not match the field's pattern {rules.pattern}.")
    return text


def parse_decimal(value: object, *, from_text: bool) -> Decimal:
    """A number given as a JSON number (integers only: a float may already be rounded) or a decimal
    string; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError("Give a number, not true or false.")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, str):
        try:
            number = Decimal(value.strip())
        except InvalidOperation:
            raise ValueError(f"{value.strip()[:50]!r} is not a number.") from None
        if not number.is_finite():
            raise ValueError("Give a finite number.")
        return number
    what = "an integer or a decimal string such as '12.50'" if not from_text else "a number"
    raise ValueError(f"Give {what}.")


def _number(rules: FieldRules, value: object, *, from_text: bool) -> int | str:
    if rules.type == CustomFieldType.NUMBER and isinstance(value, str) and not from_text:
        raise ValueError("Give the number as a JSON integer, not a string.")
    number = parse_decimal(value, from_text=from_text)
    if abs(number) >= MAX_MAGNITUDE:
        raise ValueError(f"Must be between -{MAX_MAGNITUDE:,} and {MAX_MAGNITUDE:,}.")
    if rules.minimum is not None and number < Decimal(rules.minimum):
        raise ValueError(f"Must be {rules.minimum} or more.")
    if rules.maximum is not None and number > Decimal(rules.maximum):
        raise ValueError(f"Must be {rules.maximum} or less.")
    if rules.type == CustomFieldType.NUMBER:
        if number != number.to_integral_value():
            raise ValueError("Give a whole number.")
        return int(number)
    if -number.as_tuple().exponent > MAX_DECIMAL_PLACES:  # type: ignore[operator]
        raise ValueError(f"At most {MAX_DECIMAL_PLACES} decimal places.")
    return canonical_decimal(number)


def canonical_decimal(number: Decimal) -> str:
    """One spelling per value ("12.50" and "12.5" are one value): what equality filters compare."""
    text = format(number.normalize(), "f")
    return "0" if text in ("-0", "0") else text


def _date(value: object) -> str:
    text = _string(value, "the date").strip()
    try:
        if len(text) != 10:
            raise ValueError
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise ValueError("Give a date as YYYY-MM-DD.") from None


def _boolean(value: object, *, from_text: bool) -> bool:
    if isinstance(value, bool):
        return value
    if from_text and isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise ValueError("Give true or false.")
    raise ValueError("Give true or false (a JSON boolean).")


def _choice(rules: FieldRules, value: object) -> str:
    text = _string(value, "the choice").strip()
    if text not in rules.choices:
        raise ValueError(f"{text[:100]!r} is not one of: {', '.join(rules.choices)}.")
    return text


def _choices(rules: FieldRules, value: object, *, from_text: bool) -> list[str]:
    if from_text and isinstance(value, str):
        value = [part for part in value.split(MULTI_SEPARATOR) if part.strip()]
    if not isinstance(value, list):
        raise ValueError("Give a list of choices.")
    chosen = [_choice(rules, item) for item in value]
    if len(set(chosen)) != len(chosen):
        raise ValueError("A choice is given twice.")
    order = {choice: position for position, choice in enumerate(rules.choices)}
    return sorted(chosen, key=order.__getitem__)


def _url(value: object) -> str:
    text = _string(value, "the URL").strip()
    parts = urlsplit(text)
    if len(text) > MAX_URL or parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ValueError(f"Give an http:// or https:// URL of at most {MAX_URL:,} characters.")
    return text


def _email(value: object) -> str:
    text = _string(value, "the email address").strip()
    try:
        return validate_email(text, check_deliverability=False).normalized.lower()
    except EmailNotValidError as error:
        raise ValueError(f"Not a valid email address: {error}") from None


def filled(values: Mapping[str, Any], key: str) -> bool:
    return values.get(key) not in (None, "", [])
