"""The dashboard's figures, each counted by the service that answers the API's list it links to
(the list's `total`), so the tiles and the API never disagree."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy.orm import Session

from outfitter.db.base import utcnow
from outfitter.db.keyset import PageParams, PageResult
from outfitter.db.reads import run_in_session
from outfitter.equipment import service as equipment_service
from outfitter.events import service as events_service
from outfitter.models import STAGES, EquipmentStatus, EquipmentType, Event, OrderKind, OrderStatus
from outfitter.payments import service as payments_service
from outfitter.payments.fees import to_minor_units

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
SPEND_MONTHS = 12
# The stages an order in flight can be at (its least advanced item's): every one but a path's last.
IN_FLIGHT_STAGES = tuple(dict.fromkeys(stage for path in STAGES.values() for stage in path[:-1]))
_ONE = PageParams(page=1, per_page=1)


@dataclass(frozen=True)
class Bar:
    label: str
    value: int
    href: str | None
    share: float  # of the largest bar, 0..1: the bar's length


@dataclass(frozen=True)
class Month:
    start: datetime
    amount: Decimal  # exact, in the currency's minor units
    share: float  # of the largest month of the currency, 0..1: the column's height (drawing only)

    @property
    def label(self) -> str:
        return self.start.strftime("%Y-%m")

    @property
    def short(self) -> str:
        return self.start.strftime("%b")


@dataclass(frozen=True)
class Spend:
    currency: str
    months: list[Month]  # the oldest first

    @property
    def total(self) -> Decimal:
        return sum((month.amount for month in self.months), Decimal(0))


@dataclass(frozen=True)
class Figures:
    devices: int  # every device but the Archived, as the unfiltered list counts
    by_status: list[Bar]
    by_type: list[Bar]
    orders_in_flight: list[Bar]
    orders_by_stage: list[Bar]
    awaiting_retrieval: int  # devices that retrievals in progress have still to collect
    spend: list[Spend]  # per currency, the last SPEND_MONTHS months
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


def orders_in_flight(session: Session, **filters: Any) -> int:
    """The total `GET /client/orders?status=in_progress` answers with these filters."""
    return int(
        payments_service.list_orders(session, _ONE, status=OrderStatus.IN_PROGRESS, **filters)["total"]
    )


def spend(session: Session, now: datetime | None = None) -> list[Spend]:
    sums = payments_service.spend_by_month(session, SPEND_MONTHS, now or utcnow())
    result = []
    for currency, months in sums.items():
        largest = max(amount for _, amount in months) or Decimal(1)
        result.append(
            Spend(
                currency,
                [
                    Month(start, to_minor_units(amount, currency), float(amount / largest))
                    for start, amount in months
                ],
            )
        )
    return result


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
    in_flight: list[tuple[str, int, str | None]] = [
        (
            kind.value.replace("_", " ").capitalize(),
            orders_in_flight(session, kind=kind),
            f"orders?status=in_progress&kind={kind.value}",
        )
        for kind in OrderKind
    ]
    by_stage: list[tuple[str, int, str | None]] = [
        (
            stage.value.replace("_", " ").capitalize(),
            orders_in_flight(session, stage=stage),
            f"orders?status=in_progress&stage={stage.value}",
        )
        for stage in IN_FLIGHT_STAGES
    ]
    recent = events_service.list_events(session, PageParams(1, RECENT_EVENTS), None, None, None, None)
    return Figures(
        devices=total,
        by_status=_bars(by_status),
        by_type=_bars(by_type),
        orders_in_flight=_bars(in_flight),
        orders_by_stage=_bars(by_stage),
        awaiting_retrieval=payments_service.awaiting_retrieval(session),
        spend=spend(session),
        recent=list(recent.items),
    )
