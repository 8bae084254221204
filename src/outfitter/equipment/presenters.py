"""Equipment records as the API answers them (docs/equipment.md), built from the rows of the
repository's hot reads as plain dicts (the route validates and renders them once, against
EquipmentListItem/EquipmentOut), and the computed fields of the single answer (score, missing
information, readable durations)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Row

from outfitter.models import EquipmentStatus

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


def _base_fields(row: Row[Any] | SimpleNamespace) -> dict[str, Any]:
    specs = row.specs or {}
    return {
        "id": row.id,
        "title": row.title,
        "year": row.year,
        "make": row.make,
        "model": row.model,
        "state": row.state,
        "source": row.source,
        "purchase_date": row.purchase_date,
        "purchase_price": price(row.purchase_price),
        "type": row.type,
        "hash_code": row.hash_code,
        "asset_order_id": row.asset_order_id,
        "catalog": row.catalog,
        "currency": None
        if row.currency_id is None
        else {
            "id": row.currency_id,
            "name": row.currency_name,
            "code": row.currency_code,
            "symbol": row.currency_symbol,
            "status": row.currency_status,
            "created_at": row.currency_created_at,
            "updated_at": row.currency_updated_at,
        },
        "image_url": row.image_url,
        "serial_number": row.serial_number,
        "other_details": other_details_text(row.other_details),
        "specs": {
            "memory": _text(specs.get("memory")),
            "storage": _text(specs.get("storage")),
            "color": _text(specs.get("color")),
        },
        "description": row.description or "",
        "status": row.status,
        "country": row.country_name,
        "country_code": row.country_code,
        "custom_fields": row.custom_fields or {},
        "location_id": row.location_id,
        "home_location_id": row.home_location_id,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def price(amount: Decimal | None) -> Decimal | None:
    """Stored with six decimals; written with two ('1200.50') unless it has more."""
    if amount is None:
        return None
    cents = amount.quantize(CENT)
    return cents if cents == amount else amount.normalize()


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _history_assignee(entry: Row[Any] | SimpleNamespace) -> dict[str, Any] | None:
    if entry.assignee_id is None:
        return None
    return {"id": entry.assignee_id, "name": entry.assignee_name or ""}


def list_item(row: Row[Any], history: list[Row[Any]]) -> dict[str, Any]:
    """A list record (EquipmentListItem's fields), from a row of EquipmentRepository.page."""
    item = _base_fields(row)
    item["assignee"] = (
        None
        if row.assignee_id is None
        else {"id": row.assignee_id, "name": f"{row.assignee_first_name} {row.assignee_last_name}"}
    )
    item["history"] = [
        {
            "id": entry.id,
            "event_type": entry.event_type,
            "event_date": entry.event_date,
            "assignee": _history_assignee(entry),
        }
        for entry in history
    ]
    return item


def detail(
    row: Row[Any] | SimpleNamespace,
    history: Sequence[Row[Any] | SimpleNamespace],
    now: datetime | None = None,
) -> dict[str, Any]:
    """The single-record answer (EquipmentOut's fields), from EquipmentRepository.detail (or a
    `written_row` and its history entries' columns)."""
    now = now or datetime.now(UTC)
    missing = missing_information(row)
    item = _base_fields(row)
    item["assignee"] = (
        None
        if row.assignee_id is None
        else {
            "id": row.assignee_id,
            "name": f"{row.assignee_first_name} {row.assignee_last_name}",
            "email": row.assignee_email,
            "job_title": row.assignee_job_title,
            "department": row.assignee_department,
            "level": row.assignee_level,
            "country": row.assignee_country,
            "country_code": row.assignee_country_code,
            "address": row.assignee_address,
            "employment_type": row.assignee_employment_type,
            "phone": row.assignee_phone,
        }
    )
    item["history"] = [
        {
            "id": entry.id,
            "event_type": entry.event_type,
            "event_date": entry.event_date,
            "assignee": _history_assignee(entry),
            "equipment": row.title,
            "actor": entry.actor,
            "payload": entry.payload,
        }
        for entry in history
    ]
    item["device_setup"] = row.device_setup
    item["score"] = score(missing)
    item["missing_information"] = missing
    item["has_missing_information"] = bool(missing)
    item["insurance_expiring_in"] = insurance_expiring_in(row.insurance_expires_at, now)
    item["usage_duration"] = readable_between(row.purchase_date, now) if row.purchase_date else UNKNOWN_USAGE
    item["storage_duration"] = (
        readable_between(row.status_changed_at, now) if row.status == EquipmentStatus.IN_STORAGE else None
    )
    item["documents"] = list(row.documents or [])
    return item


def written_row(
    device: dict[str, Any], currency: Any | None, country: Any | None, assignee: Row[Any] | None
) -> SimpleNamespace:
    """A detail row (what `detail` reads) of a device a batch has just written as `device` (its
    columns), with its currency and country, and its assignee's `assignee_*` fields: the batch's
    answers are rendered from what it wrote instead of reading it back."""
    fields: dict[str, Any] = {name: None for name in _WRITTEN_DEFAULTS} | device
    if currency is not None:
        fields |= {f"currency_{name}": getattr(currency, name) for name in _CURRENCY_FIELDS}
    if country is not None:
        fields |= {"country_name": country.name, "country_code": country.code}
    if assignee is not None:
        fields |= {name: value for name, value in assignee._mapping.items() if name != "id"}
    return SimpleNamespace(**fields)


def written_detail(
    device: dict[str, Any],
    history: Sequence[dict[str, Any]],
    currency: Any | None,
    country: Any | None,
    assignee: Row[Any] | None,
) -> dict[str, Any]:
    """The single-record answer of a device just written as `device` with its `history` rows
    (see `written_row`), without reading either back."""
    row = written_row(device, currency, country, assignee)
    return detail(row, [SimpleNamespace(**entry) for entry in history])


_CURRENCY_FIELDS = ("name", "code", "symbol", "status", "created_at", "updated_at")
# What a batch's rows leave out (NULL in the table), and the joined fields of a device with no
# currency, country or assignee.
_WRITTEN_DEFAULTS = (
    "hash_code",
    "asset_order_id",
    "catalog",
    "device_setup",
    "insurance_expires_at",
    *(f"currency_{name}" for name in _CURRENCY_FIELDS),
    "country_name",
    "country_code",
    "assignee_first_name",
    "assignee_last_name",
    "assignee_email",
    "assignee_job_title",
    "assignee_department",
    "assignee_level",
    "assignee_country",
    "assignee_country_code",
    "assignee_address",
    "assignee_employment_type",
    "assignee_phone",
)


def missing_information(row: Row[Any] | SimpleNamespace) -> list[str]:
    specs = row.specs or {}
    values: dict[str, object] = {
        "serial_number": row.serial_number,
        "purchase_date": row.purchase_date,
        "purchase_price": price(row.purchase_price),
        "make": row.make,
        "model": row.model,
        "year": row.year,
        "type": row.type,
        "state": row.state,
        "image_url": row.image_url,
        "specs.memory": specs.get("memory"),
        "specs.storage": specs.get("storage"),
        "country": row.country_id,
    }
    return [name for name in SCORED_FIELDS if values[name] is None or values[name] == ""]


def score(missing: list[str]) -> int:
    filled = len(SCORED_FIELDS) - len(missing)
    return round(100 * filled / len(SCORED_FIELDS))


def insurance_expiring_in(expires: datetime | None, now: datetime) -> str | None:
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


def other_details_text(other_details: list[str] | None) -> str:
    """`other_details` as answers give it: the list as JSON text (whatever text a row keeps: a COPY
    writes it compact, an INSERT spaced)."""
    return json.dumps(list(other_details)) if other_details else "[]"
