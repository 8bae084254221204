"""One pagination helper for every list, in two modes (docs/api.md, "Pagination"):

- **pages**: `page` / `per_page`, exact counters, a stable order (as page-based clients expect);
- **cursor**: `cursor` / `limit` (and `updated_since` on the lists that sync), keyset pages that
  cost the same at any depth, `next_cursor` instead of counters.

A cursor is opaque to clients: the keyset of the last row sent (its sort values and id) and a
fingerprint of the query it was made for, signed with an HMAC. A cursor that was altered, or sent
to another list, or with other filters or another sort than the ones it came from, is a 422 naming
`query.cursor`.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Generic, TypeVar

from fastapi import Depends, Query, Request
from sqlalchemy import ColumnElement, Select, bindparam, func, literal, select, tuple_
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.types import Enum, Uuid

from outfitter.core.cursors import OTHER_QUERY, decode_cursor, encode_cursor, query_fingerprint
from outfitter.core.errors import ValidationFailed
from outfitter.core.schemas import DateTimeText, NotNull, WholeNumberText, as_utc
from outfitter.db.base import UTCDateTime, utcnow

DEFAULT_PER_PAGE = 15
MAX_PER_PAGE = 100
MAX_PAGE = 2**31 - 1  # page is an int32 in the OpenAPI document
MAX_CURSOR_LENGTH = 1000

RowT = TypeVar("RowT")

PAGE_PARAMETERS = ("page", "per_page")
CURSOR_PARAMETERS = ("cursor", "limit", "updated_since")
MIXED = "Use either page and per_page, or cursor and limit (and updated_since), not both."


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
    updated_since: datetime | None = None

    def next_cursor(self, values: tuple[Any, ...]) -> str:
        return encode_cursor(self.query, values)


ListParams = PageParams | CursorParams


# --- the dependencies ----------------------------------------------------------------------------


def page_mode_params(page: int | None, per_page: int | None) -> PageParams:
    """Page mode's parameters with their defaults, which the document does not show (PageQuery)."""
    return PageParams(page=page or 1, per_page=per_page or DEFAULT_PER_PAGE)


def _list_params(
    request: Request,
    page: int | None,
    per_page: int | None,
    cursor: str | None,
    limit: int | None,
    since: datetime | None,
    cursor_parameters: tuple[str, ...],
) -> ListParams:
    given = request.query_params
    cursor_mode = [name for name in cursor_parameters if name in given]
    if not cursor_mode:
        return page_mode_params(page, per_page)
    if any(name in given for name in PAGE_PARAMETERS):
        raise ValidationFailed.field(f"query.{cursor_mode[0]}", MIXED)
    try:
        updated_since = as_utc(since) if since is not None else None
    except ValueError as exc:
        raise ValidationFailed.field("query.updated_since", str(exc)) from None
    query = query_fingerprint(
        request, {"updated_since": updated_since.isoformat()} if updated_since else None
    )
    after = decode_cursor(cursor, query) if cursor else None
    return CursorParams(
        limit=limit or DEFAULT_PER_PAGE, after=after, query=query, updated_since=updated_since
    )


# No default in the document (the defaults are applied here): a generated client that fills in
# documented defaults would otherwise send page=1 with every cursor, and be refused for mixing.
PageQuery = Annotated[
    int | None,
    Query(ge=1, le=MAX_PAGE, description="Page number, from 1 (page mode; default 1)"),
    NotNull(),
    WholeNumberText,
]
PerPageQuery = Annotated[
    int | None,
    Query(
        ge=1,
        le=MAX_PER_PAGE,
        description=f"Records per page, 1 to {MAX_PER_PAGE} (page mode; default {DEFAULT_PER_PAGE})",
    ),
    NotNull(),
    WholeNumberText,
]
CursorQuery = Annotated[
    str | None,
    Query(
        max_length=MAX_CURSOR_LENGTH,
        description="Cursor mode: the `next_cursor` of the previous page (leave out for the first page)",
    ),
]
LimitQuery = Annotated[
    int | None,
    Query(ge=1, le=MAX_PER_PAGE, description=f"Cursor mode: records per page, 1 to {MAX_PER_PAGE} (15)"),
    WholeNumberText,
]
UpdatedSinceQuery = Annotated[
    DateTimeText | None,
    Query(
        description="Cursor mode: the records created or changed at or after this time (ISO 8601; no "
        "offset: UTC), deleted ones included, oldest change first",
    ),
]


async def list_params(
    request: Request,
    page: PageQuery = None,
    per_page: PerPageQuery = None,
    cursor: CursorQuery = None,
    limit: LimitQuery = None,
) -> ListParams:
    return _list_params(request, page, per_page, cursor, limit, None, CURSOR_PARAMETERS[:2])


async def sync_list_params(
    request: Request,
    page: PageQuery = None,
    per_page: PerPageQuery = None,
    cursor: CursorQuery = None,
    limit: LimitQuery = None,
    updated_since: UpdatedSinceQuery = None,
) -> ListParams:
    return _list_params(request, page, per_page, cursor, limit, updated_since, CURSOR_PARAMETERS)


async def page_params(
    page: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Page number, from 1"), WholeNumberText] = 1,
    per_page: Annotated[
        int,
        Query(ge=1, le=MAX_PER_PAGE, description=f"Records per page, 1 to {MAX_PER_PAGE}"),
        WholeNumberText,
    ] = DEFAULT_PER_PAGE,
) -> PageParams:
    return PageParams(page=page, per_page=per_page)


# A list with page mode only (the catalog); with both modes; with both and `updated_since`.
Pagination = Annotated[PageParams, Depends(page_params)]
Listing = Annotated[ListParams, Depends(list_params)]
SyncListing = Annotated[ListParams, Depends(sync_list_params)]


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


class _SyncHorizon(ColumnElement[datetime]):
    """The time before which no transaction still in flight can have stamped a change: the start
    of the oldest open transaction of another client of this database (our writes stamp
    `updated_at` after their transaction began), or now. On SQLite, which runs one writer at a
    time and shows a reader only committed data, NULL (no horizon)."""

    type = UTCDateTime()
    inherit_cache = True


@compiles(_SyncHorizon, "postgresql")
def _horizon_on_postgresql(_element: _SyncHorizon, _compiler: Any, **_kw: Any) -> str:
    return (
        "(SELECT least(min(xact_start), clock_timestamp()) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND backend_type = 'client backend' AND xact_start IS NOT NULL)"
    )


@compiles(_SyncHorizon)
def _no_horizon(_element: _SyncHorizon, _compiler: Any, **_kw: Any) -> str:
    return "NULL"


def change_time(session: Session) -> datetime:
    """The time to stamp a change with, taken once the session's transaction has begun in the
    database. The horizon trusts that no change still uncommitted is stamped before its
    transaction's start; a transaction begins at its first statement, so a request that ended its
    reads to call another system (`ClientWork.end_reads`) begins its next one here first."""
    session.execute(_TRANSACTION_BEGUN)
    return utcnow()


_TRANSACTION_BEGUN = select(literal(1))


# Read in a statement of its own BEFORE the page: a transaction that commits between the two is
# then either counted in the horizon or visible to the page (PostgreSQL's READ COMMITTED gives
# each statement a new snapshot), never neither.
SYNC_HORIZON = select(_SyncHorizon().label("horizon"))
NO_HORIZON = datetime(9999, 12, 31, tzinfo=UTC)


def sync_horizon(session: Session) -> datetime:
    """The horizon now, in a statement of its own (see SYNC_HORIZON); far in the future on SQLite."""
    return session.scalar(SYNC_HORIZON) or NO_HORIZON


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
