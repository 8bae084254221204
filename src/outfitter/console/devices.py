"""The devices list's view state (the API's filters, search, sort and page, all in the URL, so a
link shares the view) and its reads through the equipment service."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.orm import Session
from starlette.datastructures import QueryParams

from outfitter.core.errors import ValidationFailed
from outfitter.db.keyset import PageParams, PageResult
from outfitter.db.reads import run_in_session
from outfitter.equipment import service as equipment_service
from outfitter.equipment.filters import EquipmentSort
from outfitter.equipment.lifecycle import ALLOWED_MOVES
from outfitter.models import EquipmentStatus, EquipmentType

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
MAX_TEXT = 200


@dataclass(frozen=True)
class DeviceQuery:
    """What the list shows; `errors` says, by field, which values were set aside and why."""

    status: EquipmentStatus | None = None
    type: EquipmentType | None = None
    q: str = ""
    country: str = ""
    sort: EquipmentSort = EquipmentSort.CREATED_AT_DESC
    page: int = 1
    per_page: int = PER_PAGE_CHOICES[0]
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
        page = _whole(params.get("page"), 1)
        per_page = _whole(params.get("per_page"), PER_PAGE_CHOICES[0])
        if per_page not in PER_PAGE_CHOICES:
            per_page = PER_PAGE_CHOICES[0]
        return cls(
            status=EquipmentStatus(status) if status else None,
            type=EquipmentType(kind) if kind else None,
            q=(params.get("q") or "").strip()[:MAX_TEXT],
            country=(params.get("country") or "").strip()[:MAX_TEXT],
            sort=EquipmentSort(sort),
            page=page,
            per_page=per_page,
            errors=errors,
        )

    def params(self, **changes: Any) -> dict[str, str]:
        """The view as query parameters (defaults left out), with `changes`: a link's query."""
        view = replace(self, **changes)
        values = {
            "q": view.q,
            "status": view.status.value if view.status else "",
            "type": view.type.value if view.type else "",
            "country": view.country,
            "sort": "" if view.sort == EquipmentSort.CREATED_AT_DESC else view.sort.value,
            "per_page": "" if view.per_page == PER_PAGE_CHOICES[0] else str(view.per_page),
            "page": "" if view.page == 1 else str(view.page),
        }
        return {name: value for name, value in values.items() if value}


def _whole(value: str | None, default: int) -> int:
    if value is None or not value.isdigit() or len(value) > 9:
        return default
    return max(1, int(value))


@dataclass(frozen=True)
class Listing:
    devices: list[dict[str, Any]]
    total: int
    page: int
    last_page: int


def list_devices(session: Session, query: DeviceQuery) -> Listing:
    """A page of devices, as `GET /client/equipment` answers the same filters; a filter the service
    refuses (an unknown country) is noted in `query.errors` and left out."""
    try:
        filters = run_in_session(
            session,
            equipment_service.filters_plan(
                status=query.status, type=query.type, country=query.country or None, q=query.q or None
            ),
        )
    except ValidationFailed as exc:
        query.errors["country"] = _first_message(exc) or "No country has this name or code."
        filters = run_in_session(
            session, equipment_service.filters_plan(status=query.status, type=query.type, q=query.q or None)
        )
    params = PageParams(page=query.page, per_page=query.per_page)
    records, page = run_in_session(session, equipment_service.list_plan(filters, params, query.sort))
    assert isinstance(page, PageResult)  # page mode: PageParams
    return Listing(records, page.total, query.page, page.last_page)


def _first_message(exc: ValidationFailed) -> str | None:
    messages = next(iter((exc.errors or {}).values()), [])
    return str(messages[0]) if messages else None


def device_moves(status: str) -> list[EquipmentStatus]:
    """The statuses the console offers a device in `status`: the status table's moves, but
    Assigned, which needs an employee (the device page's assign form, later)."""
    allowed = ALLOWED_MOVES.get(EquipmentStatus(status), frozenset())
    return [move for move in EquipmentStatus if move in allowed and move != EquipmentStatus.ASSIGNED]
