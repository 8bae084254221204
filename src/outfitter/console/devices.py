"""The devices list's view state (the API's filters, search and sort, the cursor of the page and
the columns shown, all in the URL, so a link shares the view) and its reads through the equipment
service: every page in the API's cursor mode (any depth costs what the first page does), headed by
the filter's count up to a cap."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.orm import Session
from starlette.datastructures import QueryParams

from outfitter.core.cursors import decode_cursor, encode_cursor, query_fingerprint
from outfitter.core.errors import ValidationFailed
from outfitter.db.keyset import CursorParams
from outfitter.db.reads import run_in_session
from outfitter.equipment import service as equipment_service
from outfitter.equipment.filters import EquipmentFilters, EquipmentSort
from outfitter.equipment.lifecycle import ALLOWED_MOVES
from outfitter.http.pagination import cursor_key
from outfitter.models import EquipmentStatus, EquipmentType
from outfitter.people.repository import EmployeeRepository

PER_PAGE_CHOICES = (25, 50, 100)
TYPE_CHOICES = (
    EquipmentType.LAPTOP_WORKSTATION,
    EquipmentType.PHONES,
    EquipmentType.TABLET,
    EquipmentType.ACCESSORIES,
)
SORT_LABELS = {
    EquipmentSort.CREATED_AT_DESC: "Newest first",
    EquipmentSort.CREATED_AT: "Oldest first",
    EquipmentSort.UPDATED_AT_DESC: "Recently changed",
    EquipmentSort.NAME: "Name A-Z",
    EquipmentSort.NAME_DESC: "Name Z-A",
    EquipmentSort.STATUS: "Status",
}
# The columns a person may show (the name is always shown), with their headings; and the default.
COLUMNS = {
    "serial": "Serial number",
    "type": "Type",
    "status": "Status",
    "assignee": "Assignee",
    "country": "Country",
    "make": "Make and model",
    "specs": "Memory / storage",
    "purchase": "Purchased",
    "price": "Price",
    "created": "Registered",
    "updated": "Changed",
}
DEFAULT_COLUMNS = ("serial", "type", "status", "assignee", "country")
MAX_TEXT = 200
MAX_CURSOR = 1000
# The heading counts a filter's devices up to here, then says "10,000+": an exact count of a
# million rows would cost more than the page it heads.
COUNT_CAP = 10_000
STALE_CURSOR = "This page's link was made for other filters or has expired: here is the first page."
# The opposite order of each sort: a Previous page is read backwards from the page's first row.
_REVERSED = {
    EquipmentSort.CREATED_AT: EquipmentSort.CREATED_AT_DESC,
    EquipmentSort.CREATED_AT_DESC: EquipmentSort.CREATED_AT,
    EquipmentSort.UPDATED_AT: EquipmentSort.UPDATED_AT_DESC,
    EquipmentSort.UPDATED_AT_DESC: EquipmentSort.UPDATED_AT,
    EquipmentSort.NAME: EquipmentSort.NAME_DESC,
    EquipmentSort.NAME_DESC: EquipmentSort.NAME,
    EquipmentSort.STATUS: EquipmentSort.STATUS_DESC,
    EquipmentSort.STATUS_DESC: EquipmentSort.STATUS,
}


@dataclass(frozen=True)
class DeviceQuery:
    """What the list shows; `errors` says, by field, which values were set aside and why.
    `after` / `before` are signed cursors: the page after (before) a row of the same view."""

    status: EquipmentStatus | None = None
    type: EquipmentType | None = None
    q: str = ""
    country: str = ""
    sort: EquipmentSort = EquipmentSort.CREATED_AT_DESC
    per_page: int = PER_PAGE_CHOICES[0]
    after: str = ""
    before: str = ""
    cols: tuple[str, ...] = DEFAULT_COLUMNS
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, params: QueryParams) -> DeviceQuery:
        errors: dict[str, str] = {}
        status = params.get("status") or None
        if status is not None and status not in set(EquipmentStatus):
            errors["status"] = "Choose a status from the list."
            status = None
        kind = params.get("type") or None
        if kind is not None and kind not in set(TYPE_CHOICES):
            errors["type"] = "Choose a type from the list."
            kind = None
        sort = params.get("sort") or EquipmentSort.CREATED_AT_DESC.value
        if sort not in set(EquipmentSort):
            errors["sort"] = "Choose an order from the list."
            sort = EquipmentSort.CREATED_AT_DESC.value
        per_page = _whole(params.get("per_page"), PER_PAGE_CHOICES[0])
        if per_page not in PER_PAGE_CHOICES:
            per_page = PER_PAGE_CHOICES[0]
        cols = tuple(name for name in COLUMNS if name in params.getlist("cols"))
        return cls(
            status=EquipmentStatus(status) if status else None,
            type=EquipmentType(kind) if kind else None,
            q=(params.get("q") or "").strip()[:MAX_TEXT],
            country=(params.get("country") or "").strip()[:MAX_TEXT],
            sort=EquipmentSort(sort),
            per_page=per_page,
            after=(params.get("after") or "")[:MAX_CURSOR],
            before="" if params.get("after") else (params.get("before") or "")[:MAX_CURSOR],
            cols=cols or DEFAULT_COLUMNS,
            errors=errors,
        )

    def params(self, **changes: Any) -> list[tuple[str, str]]:
        """The view as query parameters (defaults left out), with `changes`: a link's query."""
        view = replace(self, **changes)
        values = [
            ("q", view.q),
            ("status", view.status.value if view.status else ""),
            ("type", view.type.value if view.type else ""),
            ("country", view.country),
            ("sort", "" if view.sort == EquipmentSort.CREATED_AT_DESC else view.sort.value),
            ("per_page", "" if view.per_page == PER_PAGE_CHOICES[0] else str(view.per_page)),
            *(("cols", name) for name in (() if view.cols == DEFAULT_COLUMNS else view.cols)),
            ("after", view.after),
            ("before", view.before),
        ]
        return [(name, value) for name, value in values if value]

    def filter_params(self) -> list[tuple[str, str]]:
        """The filters alone (what an export, a bulk action and a cursor are bound to)."""
        return [(n, v) for n, v in self.params(after="", before="", cols=DEFAULT_COLUMNS) if n != "per_page"]

    @property
    def fingerprint(self) -> str:
        return query_fingerprint("/console/devices", self.filter_params())


def _whole(value: str | None, default: int) -> int:
    if value is None or not value.isdigit() or len(value) > 9:
        return default
    return max(1, int(value))


@dataclass(frozen=True)
class Count:
    """A filter's device count as a heading shows it: exact up to COUNT_CAP, then "10,000+"."""

    value: int
    more: bool

    def __str__(self) -> str:
        return f"{self.value:,}+" if self.more else f"{self.value:,}"


@dataclass(frozen=True)
class Listing:
    devices: list[dict[str, Any]]
    total: Count
    next_cursor: str | None  # the `after` of the Next link, None on the last page
    previous_cursor: str | None  # the `before` of the Previous link, None on the first page


def resolve_filters(session: Session, query: DeviceQuery) -> EquipmentFilters:
    """The query's filters as the API's list resolves them; a filter the service refuses (an
    unknown country) is noted in `query.errors` and left out."""
    try:
        return run_in_session(
            session,
            equipment_service.filters_plan(
                status=query.status, type=query.type, country=query.country or None, q=query.q or None
            ),
        )
    except ValidationFailed as exc:
        query.errors["country"] = first_message(exc) or "No country has this name or code."
        return run_in_session(
            session, equipment_service.filters_plan(status=query.status, type=query.type, q=query.q or None)
        )


def list_devices(session: Session, query: DeviceQuery) -> Listing:
    """A page of devices as `GET /client/equipment?limit=` answers the same filters, every page
    by cursor: the next ones after the page's last row (`after`), a previous one read in the
    opposite order from its first row (`before`); and the filter's count up to COUNT_CAP."""
    filters = resolve_filters(session, query)
    key = cursor_key()
    cursor = query.after or query.before
    position: tuple[str, ...] | None = None
    if cursor:
        try:
            position = decode_cursor(key, cursor, query.fingerprint)
        except ValidationFailed:
            query.errors["page"] = STALE_CURSOR
    backwards = position is not None and bool(query.before)
    sort = _REVERSED[query.sort] if backwards else query.sort
    params = CursorParams(limit=query.per_page, after=position, query=query.fingerprint, key=key)
    records, page = run_in_session(session, equipment_service.list_plan(filters, params, sort))
    more = getattr(page, "next_cursor", None) is not None
    total = run_in_session(session, equipment_service.count_plan(filters, COUNT_CAP + 1))
    count = Count(min(total, COUNT_CAP), total > COUNT_CAP)
    if backwards:
        records.reverse()
        return Listing(
            records,
            count,
            _cursor_of(key, query, records[-1]) if records else None,
            _cursor_of(key, query, records[0]) if more and records else None,
        )
    return Listing(
        records,
        count,
        _cursor_of(key, query, records[-1]) if more else None,
        _cursor_of(key, query, records[0]) if position is not None and records else None,
    )


def _cursor_of(key: bytes, query: DeviceQuery, record: dict[str, Any]) -> str:
    return encode_cursor(key, query.fingerprint, tuple(record[c.key] for c in query.sort.keyset.columns))


def first_message(exc: ValidationFailed) -> str | None:
    messages = next(iter((exc.errors or {}).values()), [])
    return str(messages[0]) if messages else None


def device_moves(status: str) -> list[EquipmentStatus]:
    """The statuses the console offers a device in `status`: the status table's moves, but
    Assigned, which needs an employee (the device page's assign form, later)."""
    allowed = ALLOWED_MOVES.get(EquipmentStatus(status), frozenset())
    return [move for move in EquipmentStatus if move in allowed and move != EquipmentStatus.ASSIGNED]


EMPLOYEE_CHOICES = 30


@dataclass(frozen=True)
class EmployeeChoice:
    id: str
    label: str


def employee_choices(session: Session, search: str) -> list[EmployeeChoice]:
    """Up to EMPLOYEE_CHOICES of the company's employees matching `search` (name or email), as
    `GET /client/employees?search=` filters them (its repository's listing, newest first, without
    the devices and orders each answer carries): the choices of an assignee picker."""
    listing = EmployeeRepository(session).listing(None, None, search.strip()[:MAX_TEXT] or None)
    employees = session.scalars(listing.limit(EMPLOYEE_CHOICES)).unique()
    return [
        EmployeeChoice(str(person.id), f"{person.first_name} {person.last_name} <{person.email}>")
        for person in employees
    ]
