"""SCIM filters (RFC 7644 section 3.4.2.2) as SQL: scim2-models parses the expression, and this
visitor turns its tree into a WHERE clause over the columns each resource's attributes live in.

Every comparison operator, `pr`, `and`, `or`, `not` and value paths (`emails[value co "x"]`) are
supported on the attributes of `Attribute` maps; strings compare in any case unless the attribute
is case-exact (externalId, id). Anything else is a 400 `invalidFilter`.

In any case means one folding on both sides. Python's `str.lower()` and PostgreSQL's `lower()`
disagree on a few letters (`İ`, U+0130, is `i̇` in one and `i` in the other), so a value is never
folded in Python to meet a column folded by the database: an attribute whose column holds the
value folded by Python (`folded`: what the uniqueness checks compare, such as a department's
`active_name`) is compared with the value folded by Python, and any other with both sides
folded by the database's `lower()` (on SQLite that is Python's, `db.session`).

`not` is true wherever its expression is not (RFC 7644 section 3.4.2.2), also where SQL's answer
is NULL because the attribute is absent. A filter is bounded (MAX_FILTER_LENGTH characters,
MAX_FILTER_TERMS comparisons), checked before any SQL is built.
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
from sqlalchemy import ColumnElement, and_, case, false, func, literal, not_, or_, true

from outfitter.core.timestamps import as_utc

Column = ColumnElement[Any]

# A filter's bounds (ServiceProviderConfig and docs/scim.md state them): what identity providers
# send is one to a few comparisons; the bounds keep one request's parsing and SQL small, and its
# bind parameters far below what either database takes in one statement.
MAX_FILTER_LENGTH = 10_000  # characters
MAX_FILTER_TERMS = 100  # comparisons and `pr`, value paths' included


@dataclass(frozen=True)
class Attribute:
    """Where a filterable attribute lives. `columns`: one or more (any of them matches);
    `kind`: "string", "id", "bool" or "datetime"; `case_exact` for strings; `folded` for a
    column that holds the value as Python's `str.lower()` folds it (compared with the value folded
    alike); `custom`: builds the condition itself from (operator, value), a string value folded
    by Python."""

    columns: tuple[Any, ...] = ()  # mapped attributes or SQL expressions
    kind: str = "string"
    case_exact: bool = False
    folded: bool = False
    custom: Callable[[CompareOperator, Any], Column] | None = None


def parse(expression: str) -> FilterNode:
    """The filter's tree; 400 invalidFilter for one that is not valid or is past the bounds."""
    if len(expression) > MAX_FILTER_LENGTH:
        raise InvalidFilterException(
            detail=f"The filter is {len(expression):,} characters long; at most {MAX_FILTER_LENGTH:,} "
            "are taken: send a shorter one, or several requests."
        )
    try:
        tree = ScimFilter(expression).ast
    except (SCIMException, ValueError) as exc:
        raise InvalidFilterException(detail=f"The filter {expression!r} is not valid: {exc}") from None
    terms = count_terms(tree)
    if terms > MAX_FILTER_TERMS:
        raise InvalidFilterException(
            detail=f"The filter has {terms:,} comparisons; at most {MAX_FILTER_TERMS} are taken: "
            "send several requests."
        )
    return tree


def count_terms(node: FilterNode) -> int:
    """The comparisons and `pr` of a filter (its nesting is bounded by the parser)."""
    if isinstance(node, LogicalExpr):
        return sum(count_terms(term) for term in node.terms)
    if isinstance(node, Not):
        return count_terms(node.expr)
    if isinstance(node, ValuePath):
        return count_terms(node.val_filter)
    return 1


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
        # NOT of NULL (an absent attribute compared) is NULL in SQL, which no row matches: the
        # CASE makes the expression's unknown a false, so `not` matches there.
        return case((self.visit(node.expr), false()), else_=true())

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
        if attribute.kind == "string" and not (attribute.case_exact or attribute.folded):
            return or_(*(_compare_folded(column, node.op, value) for column in attribute.columns))
        return or_(*(_compare(column, node.op, value) for column in attribute.columns))


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
    if attribute.kind == "string" and (attribute.folded or attribute.custom is not None):
        return value.lower()  # as the column (or the custom condition's) holds it
    return value  # case-exact, or folded by the database with the column (_compare_folded)


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


def _compare_folded(column: Any, op: CompareOperator, value: str) -> Any:
    """`column` compared with `value`, both folded by the database's `lower()`."""
    folded = func.lower(column)
    if op in (CompareOperator.co, CompareOperator.sw, CompareOperator.ew):
        # The LIKE pattern escaped here, folded there: folding leaves `\\`, `%` and `_` as they are.
        escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        pattern = {
            CompareOperator.co: f"%{escaped}%",
            CompareOperator.sw: f"{escaped}%",
            CompareOperator.ew: f"%{escaped}",
        }[op]
        return folded.like(func.lower(literal(pattern)), escape="\\")
    return _compare(folded, op, func.lower(literal(value)))


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
