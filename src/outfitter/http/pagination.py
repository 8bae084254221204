"""The lists' query parameters (docs/api.md, "Pagination"): page mode (`page` / `per_page`) or
cursor mode (`cursor` / `limit`, and `updated_since` on the lists that sync), read into the
`PageParams` or `CursorParams` that `db.keyset` pages by. Mixing the two modes, or a cursor that
was altered or made for another query, is a 422 naming the parameter.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import Depends, Query, Request

from outfitter.config import get_settings
from outfitter.core.cursors import decode_cursor, query_fingerprint
from outfitter.core.errors import ValidationFailed
from outfitter.core.schemas import DateTimeText, NotNull, WholeNumberText
from outfitter.core.timestamps import as_utc
from outfitter.db.keyset import CursorParams, ListParams, PageParams

DEFAULT_PER_PAGE = 15
MAX_PER_PAGE = 100
MAX_PAGE = 2**31 - 1  # page is an int32 in the OpenAPI document
MAX_CURSOR_LENGTH = 1000

PAGE_PARAMETERS = ("page", "per_page")
CURSOR_PARAMETERS = ("cursor", "limit", "updated_since")
MIXED = "Use either page and per_page, or cursor and limit (and updated_since), not both."


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
        request.url.path,
        request.query_params.multi_items(),
        {"updated_since": updated_since.isoformat()} if updated_since else None,
    )
    key = cursor_key()
    after = decode_cursor(key, cursor, query) if cursor else None
    return CursorParams(
        limit=limit or DEFAULT_PER_PAGE, after=after, query=query, key=key, updated_since=updated_since
    )


def cursor_key() -> bytes:
    secret = get_settings().cursor_secret
    if secret is None:  # Settings fills it in (embedded) or refuses to start without it (production)
        raise RuntimeError("OUTFITTER_CURSOR_SECRET is not set")
    return secret.encode()


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
