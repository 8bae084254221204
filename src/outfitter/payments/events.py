"""The events of payments: a transaction's initiation and outcome, an order's creation and every
move of its stages, and every move of a wallet. Each records the subject as the API answers it, in
the caller's session, for the subject's company (so sessions working across companies record them
too).

The wallet's presenter lives in `payments.service`, which imports the modules that record these
events (fulfilment, initiate, wallet): it is imported when called, not at import time.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from outfitter.models import Order, Transaction, TransactionStatus, WalletEntry
from outfitter.models.events import EventType
from outfitter.outbox import as_event_data, record_event
from outfitter.payments.presenters import order_out, transaction_fields, wallet_summary
from outfitter.payments.repository import load_order, order_id_of
from outfitter.payments.schemas import OrderOut, TransactionOut, WalletOut

# A settled transaction's event (Cancelled has none: no path cancels one yet).
OUTCOME_EVENTS = {
    TransactionStatus.FULFILLED: EventType.TRANSACTION_FULFILLED,
    TransactionStatus.FAILED: EventType.TRANSACTION_FAILED,
    TransactionStatus.EXPIRED: EventType.TRANSACTION_EXPIRED,
}


def record_transaction_event(
    session: Session, type: EventType, transaction: Transaction, actor: str | None
) -> None:
    """`data` is the transaction as `GET /client/transactions/{tx_ref}/verify` answers it."""
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


def record_wallet_event(session: Session, type: EventType, entry: WalletEntry, actor: str | None) -> None:
    """`data` is the wallet as `GET /client/wallet` answers it after the move (every balance, and the
    recent entries, this one first); the subject is the wallet of the entry's currency. The
    session is bound to the wallet's company, as every wallet function's is."""
    record_event(
        session, type, entry.wallet_id, as_event_data(WalletOut, wallet_summary(session)), actor=actor
    )
