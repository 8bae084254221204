"""The equipment list as a CSV file: the list's fields, nested ones flattened (`specs.memory`,
`assignee.name`, `currency.code`), one row per device. A device's history is not a column: the
single retrieve shows it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from outfitter.core.csv_export import CHUNK_ROWS, stream_chunks
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
    "assignee.id",
    "assignee.name",
    "catalog",
    "created_at",
    "updated_at",
)
Keyset = tuple[datetime, uuid.UUID]


def equipment_chunks(
    open_session: Callable[[], Session], filters: EquipmentFilters
) -> Iterator[list[Mapping[str, Any]]]:
    """The filtered list, newest first, chunk by chunk (each its own short read)."""

    def read(session: Session, after: Keyset | None) -> tuple[list[Mapping[str, Any]], Keyset | None]:
        rows = EquipmentRepository(session).chunk(filters, after, CHUNK_ROWS)
        records: list[Mapping[str, Any]] = [presenters.list_item(row, []) for row in rows]
        last = (rows[-1].created_at, rows[-1].id) if len(rows) == CHUNK_ROWS else None
        return records, last

    return stream_chunks(open_session, read)
