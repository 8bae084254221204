"""The SQL of custom field values, per database: a match on a field's value, a range on it, and
whether a record has the field. The key is part of the statement (a definition's key matches
schemas.KEY_PATTERN: letters, digits and single underscores), the value a bound parameter.

PostgreSQL: an equality is JSONB containment (`custom_fields @> '{"imei": "35..."}'`), which the
GIN `jsonb_path_ops` index answers; many of a list matches a list holding the value
(`'{"tags": ["red"]}'`). SQLite: `json_extract` and `json_each` of the JSON text. The bound
value is the same JSON text on both (`{"key": value}`), so one statement serves the two drivers.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import BindParameter, ColumnElement, String, bindparam
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnClause
from sqlalchemy.types import Boolean

_SAFE_KEY = re.compile(r"[a-z][a-z0-9_]*")
RANGE_OPERATORS = {"gte": ">=", "lte": "<=", "gt": ">", "lt": "<"}


def _key(key: str) -> str:
    if _SAFE_KEY.fullmatch(key) is None:  # never reached: definitions are checked when made
        raise ValueError(f"not a custom field key: {key!r}")
    return key


def _bound(name: str, value: str | None) -> BindParameter[str]:
    """The parameter, given at execution (a statement built once), or carrying its `value`."""
    if value is None:
        return bindparam(name, type_=String())
    return bindparam(name, value, type_=String())


class value_matches(ColumnElement[bool]):
    """`column`'s value of `key` equals the parameter's (JSON text `{"key": value}`), or, for
    many of a list (`contains`), the record's list holds it (`{"key": [value]}`)."""

    inherit_cache = False
    type = Boolean()

    def __init__(
        self, column: Any, key: str, parameter: str, *, contains: bool = False, value: str | None = None
    ) -> None:
        self.column = column
        self.key = _key(key)
        self.parameter: BindParameter[str] = _bound(parameter, value)
        self.in_list = contains


class value_in_range(ColumnElement[bool]):
    """`column`'s value of `key` compared (`operator`: gte, lte, gt, lt) with the parameter, a
    number (`numeric`) or an ISO date compared as text."""

    inherit_cache = False
    type = Boolean()

    def __init__(
        self, column: Any, key: str, operator: str, parameter: str, *, numeric: bool, value: str | None = None
    ) -> None:
        self.column = column
        self.key = _key(key)
        self.operator = RANGE_OPERATORS[operator]
        self.parameter: BindParameter[str] = _bound(parameter, value)
        self.numeric = numeric


class has_value(ColumnElement[bool]):
    """Whether `column` holds a value for `key`."""

    inherit_cache = False
    type = Boolean()

    def __init__(self, column: ColumnClause[Any] | Any, key: str) -> None:
        self.column = column
        self.key = _key(key)


@compiles(value_matches, "postgresql")
def _matches_postgresql(element: value_matches, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)
    # Through text: asyncpg takes the parameter as the str it is, whatever the cast's type.
    return f"{column} @> CAST(CAST({compiler.process(element.parameter, **kw)} AS TEXT) AS JSONB)"


@compiles(value_matches, "sqlite")
def _matches_sqlite(element: value_matches, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)
    parameter = compiler.process(element.parameter, **kw)
    if element.in_list:
        return (
            f"EXISTS (SELECT 1 FROM json_each({column}, '$.{element.key}') AS chosen "
            f"WHERE chosen.value = json_extract({parameter}, '$.{element.key}[0]'))"
        )
    return f"json_extract({column}, '$.{element.key}') = json_extract({parameter}, '$.{element.key}')"


@compiles(value_in_range, "postgresql")
def _range_postgresql(element: value_in_range, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)
    parameter = f"CAST({compiler.process(element.parameter, **kw)} AS TEXT)"
    value = f"({column} ->> '{element.key}')"
    if element.numeric:
        # Only rows holding a number reach the cast: a jsonb_typeof guard, evaluated first.
        return (
            f"(CASE WHEN jsonb_typeof({column} -> '{element.key}') IN ('number', 'string') "
            f"THEN CAST({value} AS NUMERIC) {element.operator} CAST({parameter} AS NUMERIC) END)"
        )
    return f"{value} {element.operator} {parameter}"


@compiles(value_in_range, "sqlite")
def _range_sqlite(element: value_in_range, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)
    parameter = compiler.process(element.parameter, **kw)
    value = f"json_extract({column}, '$.{element.key}')"
    if element.numeric:
        return f"CAST({value} AS REAL) {element.operator} CAST({parameter} AS REAL)"
    return f"{value} {element.operator} {parameter}"


@compiles(has_value, "postgresql")
def _has_postgresql(element: has_value, compiler: Any, **kw: Any) -> str:
    return f"({compiler.process(element.column, **kw)} -> '{element.key}') IS NOT NULL"


@compiles(has_value, "sqlite")
def _has_sqlite(element: has_value, compiler: Any, **kw: Any) -> str:
    return f"json_type({compiler.process(element.column, **kw)}, '$.{element.key}') IS NOT NULL"
