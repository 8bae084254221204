"""The transaction list as a CSV file: the fields `GET /client/transactions` answers (every fee line,
amounts as the currency writes them), one row per transaction, newest first, plus why one failed."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from outfitter.csvio.writer import CHUNK_ROWS, csv_text, record_cells, stream_chunks
from outfitter.models import TransactionStatus
from outfitter.payments.presenters import transaction_fields
from outfitter.payments.repository import OrderRepository, TransactionFilters, TransactionRepository

COLUMNS = (
    "tx_ref",
    "kind",
    "payment_method",
    "status",
    "currency",
    "amount",
    "insurance",
    "gateway_fee",
    "onboarding_fee",
    "device_config_fee",
    "platform_fee",
    "retrieval_fee",
    "inspection_fee",
    "storage_fee",
    "total_amount",
    "order_id",
    "failure_reason",
    "created_at",
    "updated_at",
    "expires_at",
)
Keyset = tuple[datetime, uuid.UUID]


def transaction_chunks(
    open_session: Callable[[], Session], status: TransactionStatus | None, filters: TransactionFilters
) -> Iterator[str]:
    """The filtered list, newest first, chunk by chunk (each its own short read), as CSV text."""

    def read(session: Session, after: Keyset | None) -> tuple[list[Mapping[str, Any]], Keyset | None]:
        repository = TransactionRepository(session)
        transactions = repository.chunk(repository.listing(status, filters), after, CHUNK_ROWS)
        orders = OrderRepository(session).ids_by_transaction([tx.id for tx in transactions])
        records: list[Mapping[str, Any]] = [
            {**transaction_fields(tx, orders.get(tx.id)), "failure_reason": tx.failure_reason}
            for tx in transactions
        ]
        last = (transactions[-1].created_at, transactions[-1].id) if len(transactions) == CHUNK_ROWS else None
        return records, last

    def render(records: Sequence[Mapping[str, Any]]) -> str:
        return csv_text(record_cells(COLUMNS, records))

    return stream_chunks(open_session, read, render)
