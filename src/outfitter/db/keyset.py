"""One pagination helper for every list, in two modes (docs/api.md, "Pagination"):

- **pages**: `page` / `per_page`, exact counters, a stable order (as page-based clients expect);
- **cursor**: `cursor` / `limit` (and `updated_since` on the lists that sync), keyset pages that
  cost the same at any depth, `next_cursor` instead of counters.

A cursor is opaque to clients: the keyset of the last row sent (its sort values and id) and a
fingerprint of the query it was made for, signed with an HMAC (`core.cursors`). The parameters
are read by `http.pagination`.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import ColumnElement, Select, bindparam, func, select, tuple_
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.types import Enum, Uuid

from outfitter.core.cursors import OTHER_QUERY, encode_cursor
from outfitter.core.errors import ValidationFailed
from outfitter.core.timestamps import as_utc
from outfitter.db.base import UTCDateTime
from outfitter.db.clock import sync_horizon

RowT = TypeVar("RowT")


@dataclass(frozen=True)
class PageParams:
    page: int
    per_page: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page


@dataclass(frozen=True)
class CursorParams:
    """A cursor-mode request: `after` is the keyset of the last row the client has (None: the
    first page); `query` fingerprints the filters and sort that the cursor is bound to."""

    limit: int
    after: tuple[str, ...] | None
    query: str
    key: bytes = field(repr=False)  # what the cursors are signed with
    updated_since: datetime | None = None

    def next_cursor(self, values: tuple[Any, ...]) -> str:
        return encode_cursor(self.key, self.query, values)


ListParams = PageParams | CursorParams


# --- results -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PageResult(Generic[RowT]):
    items: list[RowT]
    total: int
    params: PageParams

    @property
    def last_page(self) -> int:
        return max(1, math.ceil(self.total / self.params.per_page))

    def counters(self) -> dict[str, int]:
        return {
            "total": self.total,
            "per_page": self.params.per_page,
            "current_page": self.params.page,
            "last_page": self.last_page,
        }

    def body(self, records: list[Any]) -> dict[str, Any]:
        """The paginated `data` object: records plus counters."""
        return {"data": records, **self.counters()}


@dataclass(frozen=True)
class CursorResult(Generic[RowT]):
    items: list[RowT]
    next_cursor: str | None
    params: CursorParams

    def counters(self) -> dict[str, Any]:
        return {"next_cursor": self.next_cursor, "limit": self.params.limit}

    def body(self, records: list[Any]) -> dict[str, Any]:
        """The cursor page's `data` object: records, `next_cursor` (None at the end) and `limit`."""
        return {"data": records, **self.counters()}


ListResult = PageResult[RowT] | CursorResult[RowT]


# --- keysets -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Keyset:
    """A list's order as a keyset: its sort columns, the id last as the tie-break, one direction.

    `after()` is the row-value comparison `(a, ..., id) < (:after_0, ..., :after_n)` (`>` when
    ascending), which an index on the same columns answers as a range: any depth costs the same."""

    columns: tuple[InstrumentedAttribute[Any], ...]
    descending: bool = True

    def order_by(self) -> list[ColumnElement[Any]]:
        return [column.desc() if self.descending else column.asc() for column in self.columns]

    def after(self) -> ColumnElement[bool]:
        row = tuple_(*self.columns)
        bound = tuple_(*(bindparam(f"after_{i}", type_=c.type) for i, c in enumerate(self.columns)))
        return row < bound if self.descending else row > bound

    def parameters(self, after: tuple[str, ...]) -> dict[str, Any]:
        """The bound values of `after()` for a cursor's keyset (422 if it does not fit this list)."""
        if len(after) != len(self.columns):
            raise ValidationFailed.field("query.cursor", OTHER_QUERY)
        try:
            return {
                f"after_{i}": _typed(column, value)
                for i, (column, value) in enumerate(zip(self.columns, after, strict=True))
            }
        except ValueError:
            raise ValidationFailed.field("query.cursor", OTHER_QUERY) from None

    def values(self, row: Any) -> tuple[Any, ...]:
        """The keyset of a row or an ORM object (attributes named as the columns)."""
        return tuple(getattr(row, column.key) for column in self.columns)

    def result(self, rows: list[Any], params: CursorParams) -> CursorResult[Any]:
        """`rows` fetched with `limit + 1`: the extra one only says that there is a next page."""
        items = rows[: params.limit]
        more = len(rows) > params.limit
        return CursorResult(items, params.next_cursor(self.values(items[-1])) if more else None, params)


def _typed(column: InstrumentedAttribute[Any], value: str) -> Any:
    kind = column.type
    if isinstance(kind, UTCDateTime):
        return as_utc(datetime.fromisoformat(value))
    if isinstance(kind, Uuid):
        return uuid.UUID(value)
    if isinstance(kind, Enum) and kind.enum_class is not None:
        return kind.enum_class(value)
    return value


def cursor_page(
    session: Session, statement: Select[Any], keyset: Keyset, params: CursorParams
) -> CursorResult[Any]:
    """One cursor page of `statement` (filtered; its order is replaced by the keyset's): one
    statement, plus what its loader options add."""
    statement = statement.order_by(None).order_by(*keyset.order_by()).limit(params.limit + 1)
    values: dict[str, Any] = {}
    if params.after is not None:
        statement = statement.where(keyset.after())
        values = keyset.parameters(params.after)
    rows = list(session.scalars(statement, values).unique())
    return keyset.result(rows, params)


def paginate(session: Session, statement: Select[Any], params: PageParams) -> PageResult[Any]:
    """Run `statement` (already filtered and ordered) for one page, and count all its rows.

    Two statements whatever the page size; loader options on `statement` add a fixed number more.
    """
    count_statement = select(func.count()).select_from(statement.order_by(None).subquery())
    total = session.scalar(count_statement) or 0
    if params.offset >= total:
        return PageResult(items=[], total=total, params=params)  # past the end: nothing to fetch
    items = list(session.scalars(statement.limit(params.per_page).offset(params.offset)).unique())
    return PageResult(items=items, total=total, params=params)


def list_page(
    session: Session, statement: Select[Any], keyset: Keyset, params: ListParams
) -> ListResult[Any]:
    """A page of either mode: `statement` filtered, in the keyset's order."""
    if isinstance(params, CursorParams):
        return cursor_page(session, statement, keyset, params)
    return paginate(session, statement.order_by(None).order_by(*keyset.order_by()), params)


def newest_first(model: Any) -> Keyset:
    """Every list's default order: newest `created_at` first, then id."""
    return Keyset((model.created_at, model.id))


def syncing(params: ListParams) -> datetime | None:
    """The `updated_since` of a cursor-mode request, or None."""
    return params.updated_since if isinstance(params, CursorParams) else None


@dataclass(frozen=True)
class ListOrder:
    """A list's order and the conditions it adds; `horizon` only for an `updated_since` walk."""

    keyset: Keyset
    conditions: list[ColumnElement[bool]]
    horizon: datetime | None = None


def list_order(session: Session, model: Any, params: ListParams) -> ListOrder:
    """The order of a list that syncs: newest first; with `updated_since`, the records changed
    since then and before the horizon (reads it: one statement), oldest change first."""
    since = syncing(params)
    if since is None:
        return ListOrder(newest_first(model), [])
    horizon = sync_horizon(session)
    keyset = Keyset((model.updated_at, model.id), descending=False)
    return ListOrder(keyset, [model.updated_at >= since, model.updated_at < horizon], horizon)


def merge_pages(keyset: Keyset, params: CursorParams, *sources: tuple[list[Any], bool]) -> CursorResult[Any]:
    """One cursor page from several sources of the same keyset (live records and tombstones), each
    read with the same cursor: (its first `limit` rows, whether it has more)."""
    rows = sorted(
        (row for items, _ in sources for row in items), key=keyset.values, reverse=keyset.descending
    )
    items = rows[: params.limit]
    more = len(rows) > params.limit or any(has_more for _, has_more in sources)
    return CursorResult(
        items, params.next_cursor(keyset.values(items[-1])) if more and items else None, params
    )
