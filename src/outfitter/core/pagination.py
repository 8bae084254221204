"""One pagination helper: validated page parameters, exact counters, a stable order."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

from fastapi import Depends, Query
from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

DEFAULT_PER_PAGE = 15
MAX_PER_PAGE = 100
MAX_PAGE = 2**31 - 1  # page is an int32 in the OpenAPI document

RowT = TypeVar("RowT")


@dataclass(frozen=True)
class PageParams:
    page: int
    per_page: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page


async def page_params(
    page: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Page number, from 1")] = 1,
    per_page: Annotated[
        int, Query(ge=1, le=MAX_PER_PAGE, description=f"Records per page, 1 to {MAX_PER_PAGE}")
    ] = DEFAULT_PER_PAGE,
) -> PageParams:
    return PageParams(page=page, per_page=per_page)


Pagination = Annotated[PageParams, Depends(page_params)]


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
