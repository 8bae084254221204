"""Equipment records as the interface shows them, and the computed fields of the single answer
(score, missing information, readable durations)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from outfitter.equipment.lifecycle import IN_STORAGE
from outfitter.equipment.models import Equipment, EquipmentHistory
from outfitter.equipment.schemas import (
    AssigneeBrief,
    AssigneeOut,
    CurrencyOut,
    EquipmentListItem,
    EquipmentOut,
    HistoryBrief,
    HistoryOut,
    SpecsOut,
)

# The fields whose share makes the score, in the order missing_information lists them.
SCORED_FIELDS = (
    "serial_number",
    "purchase_date",
    "purchase_price",
    "make",
    "model",
    "year",
    "type",
    "state",
    "image_url",
    "specs.memory",
    "specs.storage",
    "country",
)
UNKNOWN_USAGE = "Unknown"
CENT = Decimal("0.01")


def _base_fields(equipment: Equipment) -> dict[str, Any]:
    specs = equipment.specs or {}
    country = equipment.country
    currency = equipment.currency
    return {
        "id": equipment.id,
        "title": equipment.title,
        "year": equipment.year,
        "make": equipment.make,
        "model": equipment.model,
        "state": equipment.state,
        "source": equipment.source,
        "purchase_date": equipment.purchase_date,
        "purchase_price": _price(equipment.purchase_price),
        "type": equipment.type,
        "hash_code": equipment.hash_code,
        "asset_order_id": equipment.asset_order_id,
        "catalog": equipment.catalog,
        "currency": CurrencyOut.model_validate(currency) if currency else None,
        "image_url": equipment.image_url,
        "serial_number": equipment.serial_number,
        "other_details": json.dumps(list(equipment.other_details or [])),
        "specs": SpecsOut(
            memory=_text(specs.get("memory")),
            storage=_text(specs.get("storage")),
            color=_text(specs.get("color")),
        ),
        "description": equipment.description or "",
        "status": equipment.status,
        "country": country.name if country else None,
        "country_code": country.code if country else None,
        "created_at": equipment.created_at,
        "updated_at": equipment.updated_at,
    }


def _price(amount: Decimal | None) -> Decimal | None:
    """Stored with six decimals; written with two ('1200.50') unless it has more."""
    if amount is None:
        return None
    cents = amount.quantize(CENT)
    return cents if cents == amount else amount.normalize()


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _history_assignee(entry: EquipmentHistory) -> AssigneeBrief | None:
    if entry.assignee_id is None:
        return None
    return AssigneeBrief(id=entry.assignee_id, name=entry.assignee_name or "")


def to_list_item(equipment: Equipment) -> EquipmentListItem:
    assignee = equipment.assignee
    return EquipmentListItem(
        **_base_fields(equipment),
        assignee=AssigneeBrief(id=assignee.id, name=assignee.full_name) if assignee else None,
        history=[
            HistoryBrief(
                id=entry.id,
                event_type=entry.event_type,
                event_date=entry.event_date,
                assignee=_history_assignee(entry),
            )
            for entry in equipment.history
        ],
    )


def to_detail(equipment: Equipment, department: str | None, now: datetime | None = None) -> EquipmentOut:
    """The single-record answer; `department` is the assignee's first active department."""
    now = now or datetime.now(UTC)
    missing = missing_information(equipment)
    assignee = equipment.assignee
    return EquipmentOut(
        **_base_fields(equipment),
        assignee=(
            AssigneeOut(
                id=assignee.id,
                name=assignee.full_name,
                email=assignee.email,
                job_title=assignee.job_title,
                department=department,
                level=assignee.level,
                country=assignee.country.name,
                country_code=assignee.country.code,
                address=assignee.address,
                employment_type=assignee.employment_type,
                phone=assignee.phone,
            )
            if assignee
            else None
        ),
        history=[
            HistoryOut(
                id=entry.id,
                event_type=entry.event_type,
                event_date=entry.event_date,
                assignee=_history_assignee(entry),
                equipment=equipment.title,
                actor=entry.actor,
                payload=entry.payload,
            )
            for entry in equipment.history
        ],
        device_setup=equipment.device_setup,
        score=score(missing),
        missing_information=missing,
        has_missing_information=bool(missing),
        insurance_expiring_in=insurance_expiring_in(equipment, now),
        usage_duration=(
            readable_between(equipment.purchase_date, now) if equipment.purchase_date else UNKNOWN_USAGE
        ),
        storage_duration=(
            readable_between(equipment.status_changed_at, now) if equipment.status == IN_STORAGE else None
        ),
        documents=list(equipment.documents or []),
    )


def missing_information(equipment: Equipment) -> list[str]:
    specs = equipment.specs or {}
    values: dict[str, object] = {
        "serial_number": equipment.serial_number,
        "purchase_date": equipment.purchase_date,
        "purchase_price": _price(equipment.purchase_price),
        "make": equipment.make,
        "model": equipment.model,
        "year": equipment.year,
        "type": equipment.type,
        "state": equipment.state,
        "image_url": equipment.image_url,
        "specs.memory": specs.get("memory"),
        "specs.storage": specs.get("storage"),
        "country": equipment.country_id,
    }
    return [name for name in SCORED_FIELDS if values[name] is None or values[name] == ""]


def score(missing: list[str]) -> int:
    filled = len(SCORED_FIELDS) - len(missing)
    return round(100 * filled / len(SCORED_FIELDS))


def insurance_expiring_in(equipment: Equipment, now: datetime) -> str | None:
    expires = equipment.insurance_expires_at
    if expires is None:
        return None
    if expires <= now:
        return "Expired"
    return readable_between(now, expires)


def _plural(count: int, unit: str) -> str:
    return f"{count} {unit}{'' if count == 1 else 's'}"


def readable_between(start: datetime, end: datetime) -> str:
    """'1 year, 2 months', '3 months', '12 days' or 'Less than a day' (calendar months, UTC)."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    months = (end.year - start.year) * 12 + (end.month - start.month)
    if (end.day, end.time()) < (start.day, start.time()):
        months -= 1
    if months <= 0:
        days = (end - start).days
        return "Less than a day" if days <= 0 else _plural(days, "day")
    years, months = divmod(months, 12)
    parts = []
    if years:
        parts.append(_plural(years, "year"))
    if months:
        parts.append(_plural(months, "month"))
    return ", ".join(parts)
