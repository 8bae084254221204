"""Events of transactions.

PLACEHOLDER for the webhooks branch (issue 10 parts 3-8): the worker's expiry job needs
`record_transaction_event`, which the events branch (parts 1-2) writes in full. This minimal
version has exactly that signature; at merge the events branch's module replaces it.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from outfitter.core.events import as_event_data, record_event
from outfitter.models import EventType, Transaction
from outfitter.payments.repository import order_id_of
from outfitter.payments.schemas import TransactionOut
from outfitter.payments.service import transaction_fields


def record_transaction_event(session: Session, type: EventType, transaction: Transaction, actor: str) -> None:
    """Record `type` for `transaction`, its data the transaction as verify answers it."""
    data = as_event_data(
        TransactionOut, transaction_fields(transaction, order_id_of(session, transaction.id))
    )
    record_event(session, type, transaction.id, data, actor=actor, company_id=transaction.company_id)
