"""The dashboard's figures, each counted by the service that answers the API's list it links to
(the list's `total`), so the tiles and the API never disagree."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from outfitter.db.keyset import PageParams, PageResult
from outfitter.db.reads import run_in_session
from outfitter.equipment import service as equipment_service
from outfitter.events import service as events_service
from outfitter.models import EquipmentStatus, EquipmentType, Event, OrderKind, OrderStatus
from outfitter.payments import service as payments_service

LIVE_STATUSES = (
    EquipmentStatus.ASSIGNED,
    EquipmentStatus.UNASSIGNED,
    EquipmentStatus.IN_STORAGE,
    EquipmentStatus.SOLD,
)
# Laptop/Workstation counts Laptop and Workstation too, as the list's filter does.
TYPES = (
    EquipmentType.LAPTOP_WORKSTATION,
    EquipmentType.PHONES,
    EquipmentType.TABLET,
    EquipmentType.ACCESSORIES,
)
RECENT_EVENTS = 10
_ONE = PageParams(page=1, per_page=1)


@dataclass(frozen=True)
class Bar:
    label: str
    value: int
    href: str | None
    share: float  # of the largest bar, 0..1: the bar's length


@dataclass(frozen=True)
class Figures:
    devices: int  # every device but the Archived, as the unfiltered list counts
    by_status: list[Bar]
    by_type: list[Bar]
    orders_in_flight: list[Bar]
    recent: list[Event]


def _bars(values: Sequence[tuple[str, int, str | None]]) -> list[Bar]:
    largest = max((value for _, value, _ in values), default=0) or 1
    return [Bar(label, value, href, value / largest) for label, value, href in values]


def device_count(session: Session, **filters: Any) -> int:
    """The total the API's `GET /client/equipment` answers with these filters."""
    plan = equipment_service.list_plan(
        run_in_session(session, equipment_service.filters_plan(**filters)), _ONE
    )
    _, page = run_in_session(session, plan)
    assert isinstance(page, PageResult)  # page mode: PageParams
    return page.total


def figures(session: Session) -> Figures:
    total = device_count(session)
    by_status = [
        (
            status.value.replace("_", " "),
            device_count(session, status=status),
            f"devices?status={status.value}",
        )
        for status in LIVE_STATUSES
    ]
    by_type: list[tuple[str, int, str | None]] = [
        (kind.value, device_count(session, type=kind), f"devices?type={kind.value}") for kind in TYPES
    ]
    by_type.append(("Other or none", total - sum(value for _, value, _ in by_type), None))
    in_flight = [
        (
            kind.value.replace("_", " ").capitalize(),
            int(payments_service.list_orders(session, _ONE, kind, OrderStatus.IN_PROGRESS)["total"]),
            None,
        )
        for kind in OrderKind
    ]
    recent = events_service.list_events(session, PageParams(1, RECENT_EVENTS), None, None, None, None)
    return Figures(
        devices=total,
        by_status=_bars(by_status),
        by_type=_bars(by_type),
        orders_in_flight=_bars(in_flight),
        recent=list(recent.items),
    )
