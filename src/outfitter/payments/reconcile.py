"""Reconciliation: re-ask the gateway about every Pending transaction, fulfil the paid ones, fail
the declined ones and expire those past their time to live. Each transaction in its own database
transaction, through the same `settle` as the webhook and verify; the gateway is asked between
transactions, never inside one."""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from outfitter.db.base import utcnow
from outfitter.db.tenancy import across_companies, bind_company
from outfitter.models import Transaction, TransactionStatus
from outfitter.payments.fulfilment import settle
from outfitter.payments.gateways import GatewayRegistry
from outfitter.payments.gateways.base import GatewayError
from outfitter.payments.repository import pending_transactions
from outfitter.payments.service import ask_gateway

logger = logging.getLogger("outfitter.payments")


@dataclass(frozen=True)
class ReconcileSummary:
    checked: int
    outcomes: dict[TransactionStatus, int]
    unreachable: int
    failed: int = 0  # could not be settled (logged with the cause), left Pending

    def described(self) -> str:
        """For a log line: "Fulfilled 1, Expired 2, gateway unreachable 1"."""
        parts = [f"{status.value} {count}" for status, count in sorted(self.outcomes.items())]
        parts += [f"gateway unreachable {self.unreachable}"] if self.unreachable else []
        parts += [f"could not be settled {self.failed}"] if self.failed else []
        return ", ".join(parts) or "nothing changed"


def reconcile(
    factory: sessionmaker[Session], gateways: GatewayRegistry, batch: int = 500
) -> ReconcileSummary:
    started = utcnow()
    with across_companies(factory()) as session:
        ids = pending_transactions(session, batch, before=started)
    return settle_with_gateway(factory, gateways, ids, "reconcile")


def settle_with_gateway(
    factory: sessionmaker[Session], gateways: GatewayRegistry, ids: Sequence[uuid.UUID], job: str
) -> ReconcileSummary:
    """Ask each transaction's gateway what it knows, then `settle` on that, one transaction at a
    time: paid ones are fulfilled, declined ones fail, unpaid ones past their time to live expire.
    One whose gateway does not answer is left as it is, for the next run: without the gateway's
    word a transaction is never expired (it may have been paid), as verify does not expire it."""
    outcomes: Counter[TransactionStatus] = Counter()
    unreachable = failed = 0
    for transaction_id in ids:
        with across_companies(factory()) as session:
            transaction = session.get(Transaction, transaction_id)
            if transaction is None or transaction.status != TransactionStatus.PENDING:
                continue
            tx_ref = transaction.tx_ref
            session.commit()  # only read: no transaction stays open while the gateway is asked
            try:
                payment = ask_gateway(transaction, gateways)
            except GatewayError as exc:
                logger.warning("%s %s: the gateway did not answer: %s", job, tx_ref, exc)
                unreachable += 1
                continue
            bind_company(session, transaction.company_id)
            try:
                status = settle(session, transaction_id, payment).status
                session.commit()
            except (OperationalError, InterfaceError):
                raise  # the database is away: the run stops here, the next one starts over
            except Exception:
                # Runs take the oldest first: one transaction that cannot be settled must not hold
                # up every one after it, run after run. Its work is rolled back; it stays Pending.
                logger.exception("%s %s: could not be settled, left Pending", job, tx_ref)
                failed += 1
                continue
            outcomes[status] += 1
    return ReconcileSummary(checked=len(ids), outcomes=dict(outcomes), unreachable=unreachable, failed=failed)
