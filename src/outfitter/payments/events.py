"""Transaction and order events, rendered as the API answers them.

A minimal version for the returns work (issue 11); the events work brings its own
`record_transaction_event` of the same signature at merge (keep one)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from outfitter.core.events import as_event_data, record_event
from outfitter.models import EventType, Order, Transaction
from outfitter.payments.presenters import order_out, transaction_fields
from outfitter.payments.repository import load_order, order_id_of
from outfitter.payments.schemas import OrderOut, TransactionOut


def record_transaction_event(
    session: Session, type: EventType, transaction: Transaction, actor: str | None
) -> None:
    """`data` is the transaction as verify and the list answer it."""
    session.flush()
    data = as_event_data(
        TransactionOut, transaction_fields(transaction, order_id_of(session, transaction.id))
    )
    record_event(session, type, transaction.id, data, actor=actor, company_id=transaction.company_id)


def record_order_event(session: Session, type: EventType, order: Order, actor: str | None) -> None:
    """`data` is the order as `GET /client/orders/{orderId}` answers it, items and stages included
    (read again, so it shows what this transaction has just written)."""
    session.flush()
    data = as_event_data(OrderOut, order_out(load_order(session, order.id)))
    record_event(session, type, order.id, data, actor=actor, company_id=order.company_id)
