"""The lists' custom field filters: `cf_<key>=value` (equality; for many of a list, holding the
value) and, for numbers, decimals and dates, `cf_<key>__gte|__lte|__gt|__lt=value`.

`parse_filters` turns a request's `cf_*` query parameters into `CustomFilter`s against the
company's definitions: an unknown key, a sensitive field, a range on a type without order or a
value that is no value of the field is a 422 naming the parameter, never a filter ignored.
`conditions` makes their SQL (customfields.sql), bound by position (`cf_0`, `cf_1`...), so the
statement depends on the keys and operators only, not on the values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement

from outfitter.core.errors import ValidationFailed
from outfitter.customfields.records import NOUNS, FieldSet
from outfitter.customfields.sql import RANGE_OPERATORS, value_in_range, value_matches
from outfitter.customfields.values import check_value
from outfitter.models import CustomFieldType

PREFIX = "cf_"
MAX_FILTERS = 10
ORDERED = (CustomFieldType.NUMBER, CustomFieldType.DECIMAL, CustomFieldType.DATE)


@dataclass(frozen=True)
class CustomFilter:
    key: str
    operator: str  # "eq", or one of sql.RANGE_OPERATORS
    kind: CustomFieldType
    value: str  # the bound text: JSON `{"key": value}` for "eq", the value itself for a range

    @property
    def shape(self) -> tuple[str, str, str]:
        return (self.key, self.operator, self.kind)


def custom_parameters(query: Mapping[str, str]) -> dict[str, str]:
    """The request's `cf_*` query parameters (the last value of one given twice)."""
    return {name: value for name, value in query.items() if name.startswith(PREFIX)}


def parse_filters(fields: FieldSet, parameters: Mapping[str, str]) -> tuple[CustomFilter, ...]:
    errors: dict[str, list[str]] = {}
    found: list[CustomFilter] = []
    if len(parameters) > MAX_FILTERS:
        raise ValidationFailed.field("query", f"At most {MAX_FILTERS} custom field filters at once.")
    for name, text in sorted(parameters.items()):
        key, _, operator = name.removeprefix(PREFIX).partition("__")
        operator = operator or "eq"
        definition = fields.definitions.get(key)
        problem = None
        if definition is None:
            noun = NOUNS[fields.entity]
            problem = f"No custom field {key!r} is defined for {noun}: this filter cannot be applied."
        elif definition.sensitive:
            problem = f"{definition.label} is a sensitive field: lists do not filter on it."
        elif operator != "eq" and (operator not in RANGE_OPERATORS or definition.type not in ORDERED):
            problem = f"Unknown filter {name!r}: give cf_{key}=value" + (
                f", or cf_{key}__gte / __lte / __gt / __lt for a range."
                if definition.type in ORDERED
                else "."
            )
        if definition is None or problem is not None:
            errors[f"query.{name}"] = [problem or ""]
            continue
        try:
            value = check_value(_unbounded(definition), text, from_text=True)
        except ValueError as error:
            errors[f"query.{name}"] = [str(error)]
            continue
        if definition.type == CustomFieldType.MULTI_CHOICE and len(value) != 1:
            errors[f"query.{name}"] = ["Give one choice: the records whose list holds it."]
            continue
        bound = json.dumps({key: value}) if operator == "eq" else str(value)
        found.append(CustomFilter(key, operator, definition.type, bound))
    if errors:
        raise ValidationFailed.fields(errors)
    return tuple(found)


@dataclass(frozen=True)
class _Unbounded:
    """A definition's rules without its bounds or pattern: a filter may ask for any value."""

    key: str
    type: CustomFieldType
    choices: list[str]
    pattern: None = None
    minimum: None = None
    maximum: None = None


def _unbounded(definition: Any) -> _Unbounded:
    return _Unbounded(definition.key, definition.type, list(definition.choices or []))


def parameters(filters: tuple[CustomFilter, ...]) -> dict[str, str]:
    return {f"cf_{position}": custom.value for position, custom in enumerate(filters)}


def conditions(
    column: Any, shape: tuple[tuple[str, str, str], ...], values: tuple[str, ...] | None = None
) -> list[ColumnElement[bool]]:
    """The filters' conditions; their values are given at execution (`parameters`), or carried
    by the statement when `values` are given (a statement built per request)."""
    made: list[ColumnElement[bool]] = []
    for position, (key, operator, kind) in enumerate(shape):
        parameter = f"cf_{position}"
        value = values[position] if values is not None else None
        if operator == "eq":
            contains = kind == CustomFieldType.MULTI_CHOICE
            made.append(value_matches(column, key, parameter, contains=contains, value=value))
        else:
            numeric = kind != CustomFieldType.DATE
            made.append(value_in_range(column, key, operator, parameter, numeric=numeric, value=value))
    return made


def carried(column: Any, filters: tuple[CustomFilter, ...]) -> list[ColumnElement[bool]]:
    """`conditions` carrying the filters' values."""
    return conditions(column, tuple(item.shape for item in filters), tuple(item.value for item in filters))
