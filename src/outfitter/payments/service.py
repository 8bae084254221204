"""Payment rules beyond initiating: verify, the gateways' webhooks, and what a company can read
(its transactions, orders and wallet)."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from outfitter.core.errors import BadRequest, DomainError, NotFound
from outfitter.db.base import new_id
from outfitter.db.keyset import ListParams, list_order, list_page
from outfitter.db.session import insert_if_absent
from outfitter.db.tenancy import bind_company
from outfitter.models import (
    Order,
    OrderKind,
    OrderStage,
    OrderStatus,
    Transaction,
    TransactionStatus,
    WebhookEvent,
    WebhookOutcome,
)
from outfitter.payments.drafts import GatewayUnavailable
from outfitter.payments.fulfilment import settle
from outfitter.payments.gateways import GatewayRegistry
from outfitter.payments.gateways.base import (
    GatewayError,
    GatewayPayment,
    InvalidPayload,
    InvalidSignature,
    WebhookNotice,
)
from outfitter.payments.orders import receive
from outfitter.payments.presenters import order_out, transaction_fields
from outfitter.payments.repository import (
    OrderRepository,
    TransactionFilters,
    TransactionRepository,
    find_by_ref,
    load_order,
    lock_transaction,
    order_id_of,
)
from outfitter.payments.schemas import (
    OrderOut,
    TransactionInitiatedOut,
    TransactionOut,
)

logger = logging.getLogger("outfitter.payments")
MAX_EVENT_KEY = 200  # a notice's id, as stored (WebhookEvent.event_key)


class BadSignature(DomainError):
    status_code = 401


def initiated(session: Session, transaction: Transaction) -> TransactionInitiatedOut:
    return TransactionInitiatedOut.model_validate(
        transaction_fields(transaction, order_id_of(session, transaction.id))
    )


def ask_gateway(transaction: Transaction, gateways: GatewayRegistry) -> GatewayPayment | None:
    """What the transaction's gateway knows of its payment; raises GatewayError when unreachable.
    Called with no database transaction open: it may wait on the network."""
    gateway = gateways.get(transaction.gateway) if transaction.gateway else None
    if gateway is None:
        return None
    return gateway.fetch_payment(transaction.tx_ref)


def transaction_out(session: Session, transaction: Transaction) -> TransactionOut:
    return TransactionOut.model_validate(
        transaction_fields(transaction, order_id_of(session, transaction.id))
    )


@dataclass(frozen=True)
class GatewayWord:
    """What a gateway answered about a payment: None when it knows of none."""

    payment: GatewayPayment | None


def gateway_word(transaction: Transaction, gateways: GatewayRegistry) -> GatewayWord | None:
    """Ask the transaction's gateway (verify: no database transaction open); None when it did not
    answer, so that the transaction stays Pending (and is not expired) until someone asks again."""
    try:
        return GatewayWord(ask_gateway(transaction, gateways))
    except GatewayError as exc:
        logger.warning("verify %s: the gateway did not answer: %s", transaction.tx_ref, exc)
        return None


def _record_event(
    session: Session, gateway: str, event_key: str, tx_ref: str | None, payload: dict[str, Any]
) -> uuid.UUID | None:
    """INSERT ... ON CONFLICT DO NOTHING: the id of the new event row, None when seen before."""
    event = {
        "id": new_id(),
        "gateway": gateway,
        "event_key": event_key,  # bounded by receive_webhook, never cut: a cut could make two notices one
        "tx_ref": tx_ref[:64] if tx_ref else None,
        "outcome": WebhookOutcome.RECEIVED,
        "payload": json.loads(json.dumps(payload, default=str)),
    }
    statement = insert_if_absent(session, WebhookEvent, event, ["gateway", "event_key"])
    return session.execute(statement.returning(WebhookEvent.id)).scalar_one_or_none()


def read_notice(
    gateway_name: str, body: bytes, headers: Mapping[str, str], gateways: GatewayRegistry
) -> tuple[WebhookNotice, GatewayPayment | None]:
    """A gateway's notice whose signature holds, and what the gateway says of its payment: asked
    before any database transaction opens, since it waits on the network."""
    gateway = gateways.get(gateway_name)
    if gateway is None:
        raise NotFound.record("Payment gateway")
    try:
        notice = gateway.verify_webhook(body, headers)
    except InvalidSignature as exc:
        logger.warning("webhook from %s refused: %s", gateway_name, exc)
        raise BadSignature("The webhook signature is missing, wrong or too old.") from exc
    except InvalidPayload as exc:  # signed, so the sender is the gateway: say what is wrong
        logger.warning("webhook from %s refused: %s", gateway_name, exc)
        raise BadRequest(f"The webhook is signed, but {exc}: send the notice as a JSON object.") from exc
    if not 0 < len(notice.event_key) <= MAX_EVENT_KEY:  # the key it is recorded once by
        raise BadRequest(f"The notice's id (webhook-id) must have 1 to {MAX_EVENT_KEY} characters.")
    try:
        payment = gateway.fetch_payment(notice.tx_ref, notice.charge_id) if notice.tx_ref else None
    except GatewayError as exc:
        # Nothing is recorded, so the gateway's retry of this notice is processed.
        raise GatewayUnavailable(f"The gateway could not confirm the payment: {exc}") from exc
    return notice, payment


def record_notice(
    session: Session, gateway_name: str, notice: WebhookNotice, payment: GatewayPayment | None
) -> WebhookOutcome:
    """Record the notice once (a repeat is DUPLICATE and changes nothing) and settle its transaction,
    as the company that owns it; returns the outcome."""
    event_id = _record_event(session, gateway_name, notice.event_key, notice.tx_ref, notice.payload)
    if event_id is None:
        return WebhookOutcome.DUPLICATE
    transaction = find_by_ref(session, notice.tx_ref) if notice.tx_ref else None
    if transaction is None or transaction.gateway != gateway_name:
        logger.warning(
            "webhook %s from %s names unknown tx_ref %.200r",  # a tx_ref of any length is signed text
            notice.event_key,
            gateway_name,
            notice.tx_ref,
        )
        outcome = WebhookOutcome.UNKNOWN_TX_REF
    else:
        bind_company(session, transaction.company_id)  # from here on it acts as that company
        # Read under the lock settle takes: of notices racing, only the one that settles it says so.
        was_pending = lock_transaction(session, transaction.id).status == TransactionStatus.PENDING
        # Also when it left Pending: settle records a payment that no order accounts for.
        settled = settle(session, transaction.id, payment)
        outcome = WebhookOutcome.settled_as(settled.status) if was_pending else WebhookOutcome.ALREADY_SETTLED
    session.execute(update(WebhookEvent).where(WebhookEvent.id == event_id).values(outcome=outcome))
    return outcome


def list_transactions(
    session: Session,
    status: TransactionStatus | None,
    params: ListParams,
    filters: TransactionFilters | None = None,
) -> dict[str, Any]:
    order = list_order(session, Transaction, params)
    statement = TransactionRepository(session).listing(status, filters).where(*order.conditions)
    page = list_page(session, statement, order.keyset, params)
    orders = OrderRepository(session).ids_by_transaction([tx.id for tx in page.items])
    records = [TransactionOut.model_validate(transaction_fields(tx, orders.get(tx.id))) for tx in page.items]
    return page.body(records)


def list_orders(
    session: Session,
    params: ListParams,
    kind: OrderKind | None = None,
    status: OrderStatus | None = None,
    stage: OrderStage | None = None,
) -> dict[str, Any]:
    order = list_order(session, Order, params)
    statement = OrderRepository(session).listing(kind, status, stage).where(*order.conditions)
    page = list_page(session, statement, order.keyset, params)
    return page.body([order_out(order) for order in page.items])


def last_months(count: int, now: datetime) -> list[datetime]:
    """The first instant (UTC) of each of the last `count` months, the current one last."""
    now = now.astimezone(UTC)
    index = now.year * 12 + now.month - 1
    return [datetime(i // 12, i % 12 + 1, 1, tzinfo=UTC) for i in range(index - count + 1, index + 1)]


def spend_by_month(session: Session, months: int, now: datetime) -> dict[str, list[tuple[datetime, Decimal]]]:
    """Per currency, the total of the transactions fulfilled in each of the last `months` months
    (by when they were paid), the oldest month first: the sums of `GET /client/transactions`'
    `total_amount`s, exact (Decimal)."""
    starts = last_months(months, now)
    sums: dict[str, dict[datetime, Decimal]] = {}
    for settled_at, currency, total in TransactionRepository(session).fulfilled_since(starts[0]):
        settled = settled_at.astimezone(UTC)
        month = datetime(settled.year, settled.month, 1, tzinfo=UTC)
        per_month = sums.setdefault(currency, {})
        per_month[month] = per_month.get(month, Decimal(0)) + total
    return {
        currency: [(start, per_month.get(start, Decimal(0))) for start in starts]
        for currency, per_month in sorted(sums.items())
    }


def awaiting_retrieval(session: Session) -> int:
    return OrderRepository(session).awaiting_retrieval()


def get_order(session: Session, order_id: str) -> OrderOut:
    return order_out(OrderRepository(session).get_full(order_id))


def receive_order_items(
    session: Session, order_id: str, item_ids: list[uuid.UUID] | None, actor: str
) -> OrderOut:
    """The company's received mark (`orders.receive`) on one of its orders: unknown or another
    company's, 404."""
    found = OrderRepository(session).get(order_id)
    receive(session, found.id, item_ids, actor)
    return order_out(load_order(session, found.id))
