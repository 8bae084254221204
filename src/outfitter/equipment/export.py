"""The equipment list as a CSV file: the list's fields, nested ones flattened (`specs.memory`,
`assignee.name`, `currency.code`), one row per device. A device's history is not a column: the
single retrieve shows it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from outfitter.csvio.writer import CHUNK_ROWS, csv_text, escaped, stream_chunks
from outfitter.customfields.cells import custom_cells
from outfitter.equipment import presenters
from outfitter.equipment.repository import EquipmentFilters, EquipmentRepository

COLUMNS = (
    "id",
    "title",
    "year",
    "make",
    "model",
    "state",
    "source",
    "purchase_date",
    "purchase_price",
    "currency.code",
    "currency.name",
    "currency.symbol",
    "type",
    "hash_code",
    "asset_order_id",
    "image_url",
    "serial_number",
    "other_details",
    "specs.memory",
    "specs.storage",
    "specs.color",
    "description",
    "status",
    "country",
    "country_code",
    "location_id",
    "home_location_id",
    "assignee.id",
    "assignee.name",
    "catalog",
    "created_at",
    "updated_at",
)
Keyset = tuple[datetime, uuid.UUID]


def equipment_chunks(
    open_session: Callable[[], Session],
    filters: EquipmentFilters,
    custom_keys: Sequence[str] = (),
    sensitive_keys: Sequence[str] = (),
) -> Iterator[str]:
    """The filtered list, newest first, chunk by chunk (each its own short read), as CSV text; a
    column per custom field after the list's (`custom_keys`, then `sensitive_keys` if any)."""
    sensitive = bool(sensitive_keys)

    def read(session: Session, after: Keyset | None) -> tuple[Sequence[Any], Keyset | None]:
        rows = EquipmentRepository(session).chunk(filters, after, CHUNK_ROWS, sensitive=sensitive)
        last = (
            (datetime.fromisoformat(rows[-1].created_at), uuid.UUID(rows[-1].id))
            if len(rows) == CHUNK_ROWS
            else None
        )
        return rows, last

    def render(rows: Sequence[Any]) -> str:
        extra = 2 if sensitive else 1  # the values' columns, after the list's
        return csv_text(
            _cells(row[:-extra])
            + custom_cells(row[-extra], custom_keys)
            + (custom_cells(row[-1], sensitive_keys) if sensitive else [])
            for row in rows
        )

    return stream_chunks(open_session, read, render)


def _cells(row: Sequence[Any]) -> list[str]:
    """A row of the export's chunk as its CSV cells: what `cell` writes of the list record's
    fields (presenters.list_item), written straight from the columns (100,000 rows a few seconds
    faster than building the records)."""
    (
        id_,
        title,
        year,
        make,
        model,
        state,
        source,
        purchase_date,
        purchase_price,
        currency_code,
        currency_name,
        currency_symbol,
        type_,
        hash_code,
        asset_order_id,
        image_url,
        serial_number,
        other_details,
        memory,
        storage,
        color,
        description,
        status,
        country,
        country_code,
        location_id,
        home_location_id,
        assignee_id,
        first_name,
        last_name,
        catalog,
        created_at,
        updated_at,
    ) = row
    price = presenters.price(purchase_price)
    return [
        id_,
        escaped(title),
        escaped(year),
        escaped(make),
        escaped(model),
        state or "",
        source or "",
        purchase_date or "",
        "" if price is None else escaped(format(price, "f")),
        escaped(currency_code),
        escaped(currency_name),
        escaped(currency_symbol),
        escaped(type_),
        escaped(hash_code),
        asset_order_id or "",
        escaped(image_url),
        escaped(serial_number),
        escaped(_other_details(other_details)),
        escaped(memory),
        escaped(storage),
        escaped(color),
        escaped(description),
        status,
        escaped(country),
        escaped(country_code),
        location_id or "",
        home_location_id or "",
        assignee_id or "",
        escaped(f"{first_name} {last_name}") if assignee_id else "",
        "" if catalog in (None, "null") else escaped(catalog),
        created_at,
        updated_at,
    ]


def _other_details(text: str | None) -> str:
    """The `other_details` column's JSON text as answers give the list (presenters.other_details_text).
    A row keeps the text its writer made: an INSERT's is that already (ASCII, `", "` between the
    items), a COPY's is compact UTF-8 (`","`, which the other never holds: a quote inside an item
    is escaped), and only such text is read and written again."""
    if text is None or text == "null":
        return "[]"
    if text.isascii() and '","' not in text:
        return text
    return presenters.other_details_text(json.loads(text))
