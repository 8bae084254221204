"""SCIM filters (RFC 7644 section 3.4.2.2) as SQL: scim2-models parses the expression, and this
visitor turns its tree into a WHERE clause over the columns each resource's attributes live in.

Every comparison operator, `pr`, `and`, `or`, `not` and value paths (`emails[value co "x"]`) are
supported on the attributes of `Attribute` maps; strings compare in any case unless the attribute
is case-exact (externalId, id). Anything else is a 400 `invalidFilter`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scim2_models import InvalidFilterException, SCIMException, ScimFilter
from scim2_models.path import (
    AttrPath,
    CompareOperator,
    Comparison,
    FilterNode,
    FilterVisitor,
    LogicalExpr,
    LogicalOperator,
    Not,
    Present,
    ValuePath,
)
from sqlalchemy import ColumnElement, and_, func, not_, or_, true

from outfitter.core.timestamps import as_utc

Column = ColumnElement[Any]


@dataclass(frozen=True)
class Attribute:
    """Where a filterable attribute lives. `columns`: one or more (any of them matches);
    `kind`: "string", "id", "bool" or "datetime"; `case_exact` for strings;
    `custom`: builds the condition itself from (operator, value)."""

    columns: tuple[Any, ...] = ()  # mapped attributes or SQL expressions
    kind: str = "string"
    case_exact: bool = False
    custom: Callable[[CompareOperator, Any], Column] | None = None


def parse(expression: str) -> FilterNode:
    try:
        return ScimFilter(expression).ast
    except (SCIMException, ValueError) as exc:
        raise InvalidFilterException(detail=f"The filter {expression!r} is not valid: {exc}") from None


def where(expression: str, attributes: Mapping[str, Attribute], core_urn: str) -> Column:
    return _SqlFilter(attributes, core_urn.lower()).visit(parse(expression))


class _SqlFilter(FilterVisitor[Column]):
    def __init__(self, attributes: Mapping[str, Attribute], core_urn: str, prefix: str = "") -> None:
        self.attributes = attributes
        self.core_urn = core_urn
        self.prefix = prefix  # inside a value path: the multi-valued attribute's name

    def _attribute(self, path: AttrPath) -> tuple[str, Attribute]:
        name = str(path).lower().removeprefix(self.core_urn + ":")
        if self.prefix:
            name = f"{self.prefix}.{name}"
        found = self.attributes.get(name) or self.attributes.get(f"{name}.value")
        if found is None:
            raise InvalidFilterException(detail=f"Filtering on {name!r} is not supported.")
        return name, found

    def visit_logical_expr(self, node: LogicalExpr) -> Column:
        terms = [self.visit(term) for term in node.terms]
        return and_(*terms) if node.op == LogicalOperator.and_ else or_(*terms)

    def visit_not(self, node: Not) -> Column:
        return not_(self.visit(node.expr))

    def visit_value_path(self, node: ValuePath) -> Column:
        name = str(node.attr_path).lower().removeprefix(self.core_urn + ":")
        return _SqlFilter(self.attributes, self.core_urn, name).visit(node.val_filter)

    def visit_present(self, node: Present) -> Column:
        _, attribute = self._attribute(node.attr_path)
        if attribute.custom is not None:
            return attribute.custom(CompareOperator.ne, None)
        present = [
            and_(column.is_not(None), column != "") if attribute.kind == "string" else column.is_not(None)
            for column in attribute.columns
        ]
        return or_(*present)

    def visit_comparison(self, node: Comparison) -> Column:
        name, attribute = self._attribute(node.attr_path)
        value = _value(name, attribute, node.op, node.value)
        if attribute.custom is not None:
            return attribute.custom(node.op, value)
        if value is None:  # "eq null": absent
            absent = [column.is_(None) for column in attribute.columns]
            return or_(*absent) if node.op == CompareOperator.eq else not_(or_(*absent))
        return or_(
            *(_compare(self._folded(column, attribute), node.op, value) for column in attribute.columns)
        )

    @staticmethod
    def _folded(column: Column, attribute: Attribute) -> Column:
        return func.lower(column) if attribute.kind == "string" and not attribute.case_exact else column


def _value(name: str, attribute: Attribute, op: CompareOperator, value: Any) -> Any:
    if value is None:
        if op not in (CompareOperator.eq, CompareOperator.ne):
            raise InvalidFilterException(detail=f"{name}: only eq and ne compare with null.")
        return None
    if attribute.kind == "bool":
        if not isinstance(value, bool) or op not in (CompareOperator.eq, CompareOperator.ne):
            raise InvalidFilterException(
                detail=f"{name} is a boolean: compare it with eq or ne and true or false."
            )
        return value
    if not isinstance(value, str):
        raise InvalidFilterException(detail=f"{name} is a string: compare it with a quoted value.")
    if attribute.kind == "datetime":
        try:
            given = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidFilterException(detail=f"{name}: {value!r} is not an ISO 8601 time.") from None
        try:  # without an offset, UTC: as everywhere in the API
            return as_utc(given)
        except ValueError as error:
            raise InvalidFilterException(detail=f"{name}: {value!r}: {error}") from None
    if attribute.kind == "id":
        if op in (CompareOperator.eq, CompareOperator.ne):
            try:
                return uuid.UUID(value)
            except ValueError:
                return _NO_SUCH_ID
        raise InvalidFilterException(detail=f"{name}: compare ids with eq or ne.")
    return value if attribute.case_exact or attribute.kind != "string" else value.lower()


_NO_SUCH_ID = uuid.UUID(int=0)  # a malformed id matches nothing, as an unknown one


def _compare(column: Any, op: CompareOperator, value: Any) -> Any:
    if op == CompareOperator.eq:
        return column == value
    if op == CompareOperator.ne:
        return or_(column != value, column.is_(None))
    if op == CompareOperator.co:
        return column.contains(value, autoescape=True)
    if op == CompareOperator.sw:
        return column.startswith(value, autoescape=True)
    if op == CompareOperator.ew:
        return column.endswith(value, autoescape=True)
    if op == CompareOperator.gt:
        return column > value
    if op == CompareOperator.ge:
        return column >= value
    if op == CompareOperator.lt:
        return column < value
    if op == CompareOperator.le:
        return column <= value
    raise InvalidFilterException(detail=f"Unsupported operator {op}.")


def compare_text(column: Any, op: CompareOperator, value: Any) -> Any:
    """`column` compared as a string attribute is (for a custom attribute): `pr` when `value` is None."""
    if value is None:
        return column.is_not(None) if op == CompareOperator.ne else column.is_(None)
    return _compare(column, op, value)


def bool_attribute(condition: Column) -> Attribute:
    """A boolean attribute computed from a condition (e.g. `active`)."""

    def compare(op: CompareOperator, value: Any) -> Column:
        if value is None:  # `pr`: always present
            return true()
        wanted = value if op == CompareOperator.eq else not value
        return condition if wanted else not_(condition)

    return Attribute(kind="bool", custom=compare)
