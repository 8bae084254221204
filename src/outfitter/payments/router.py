"""Payment endpoints. HTTP only: parse, call the service, wrap the answer."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from outfitter.core.schemas import Envelope, ErrorEnvelope, error_responses, list_envelope, ok
from outfitter.http.openapi import id_path
from outfitter.http.pagination import SyncListing
from outfitter.http.unit_of_work import AcrossCompanies, ClientWork, ReadAccess, UnitOfWorkRoute, WriteAccess
from outfitter.models import OrderKind, OrderStage, OrderStatus, TransactionStatus, WebhookOutcome
from outfitter.payments import initiate, offboard, service
from outfitter.payments.drafts import Complete, Draft, open_checkout
from outfitter.payments.fulfilment import settle
from outfitter.payments.gateways import GatewayRegistry, registry_of
from outfitter.payments.gateways.sandbox_pages import router as sandbox_pages
from outfitter.payments.presenters import wallet_summary
from outfitter.payments.repository import TransactionRepository
from outfitter.payments.schemas import (
    InitiateRequest,
    OffboardInitiateRequest,
    OrderOut,
    OrderReceivedRequest,
    StorageInitiateRequest,
    TransactionInitiatedOut,
    TransactionOut,
    WalletOut,
    WebhookOut,
)

# Under /api/v2: the client endpoints and the gateways' webhooks.
router = APIRouter(tags=["payments"], route_class=UnitOfWorkRoute)
# At the root, outside the API: the sandbox gateway's checkout pages.
sandbox_router = APIRouter(tags=["sandbox gateway"], include_in_schema=False)
sandbox_router.include_router(sandbox_pages)

INITIATED = "Transaction initiated successfully."


async def raw_body(request: Request) -> bytes:
    """The exact bytes a gateway signed."""
    return await request.body()


RawBody = Annotated[bytes, Depends(raw_body)]


_GATEWAY_DOWN: dict[int | str, dict[str, Any]] = {
    502: {"model": ErrorEnvelope, "description": "The payment gateway did not answer"}
}
_WEBHOOK_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorEnvelope, "description": "Signature missing, wrong or too old"},
    404: {"model": ErrorEnvelope, "description": "Unknown gateway"},
    **_GATEWAY_DOWN,
}
# The two older paths of the catalog initiate, kept so that existing clients keep working.
_DEPRECATED_INITIATE = (
    "Deprecated: send this request to POST /api/v2/client/transactions/initiate instead. This path "
    "takes the same body and gives the same answer, and will be removed in a future version."
)
StatusFilter = Annotated[TransactionStatus | None, Query(description="Only transactions in this status")]
OrderKindFilter = Annotated[OrderKind | None, Query(description="Only orders of this kind")]
OrderStatusFilter = Annotated[OrderStatus | None, Query(description="Only orders in this status")]
OrderStageFilter = Annotated[
    OrderStage | None, Query(description="Only orders whose least advanced item is at this stage")
]


def _initiated(
    work: ClientWork, draft: Draft, gateways: GatewayRegistry, complete: Complete
) -> dict[str, object]:
    """The phases of an initiate after its reads (payments/drafts.py): a Card payment is registered
    with the gateway once the reads have ended, so that no connection or lock waits on the network;
    then `complete` writes."""
    if draft.needs_checkout:
        work.end_reads()
        open_checkout(draft, gateways, work.actor)
    transaction = complete(work.session, work.actor, draft, gateways)
    return ok(service.initiated(work.session, transaction), INITIATED)


@router.post(
    "/client/transactions/initiate",
    response_model=Envelope[TransactionInitiatedOut],
    responses={**error_responses(402, 409, 422), **_GATEWAY_DOWN},
    summary="Start a transaction for catalog assets (Card: checkout link; Credit: paid and fulfilled)",
)
@router.post(
    "/clients/transactions/initiate",
    response_model=Envelope[TransactionInitiatedOut],
    responses={**error_responses(402, 409, 422), **_GATEWAY_DOWN},
    summary="Deprecated: use POST /api/v2/client/transactions/initiate",
    description=_DEPRECATED_INITIATE,
    deprecated=True,
    operation_id="initiate_transaction_clients_path",  # one function, three paths: three ids
)
@router.post(
    "/transactions/initiate",
    response_model=Envelope[TransactionInitiatedOut],
    responses={**error_responses(402, 409, 422), **_GATEWAY_DOWN},
    summary="Deprecated: use POST /api/v2/client/transactions/initiate",
    description=_DEPRECATED_INITIATE,
    deprecated=True,
    operation_id="initiate_transaction_root_path",
)
def initiate_transaction(body: InitiateRequest, request: Request, client: WriteAccess) -> dict[str, object]:
    """Start a transaction buying catalog assets for employees of one country. Card: answers the checkout
    `link`, and the order is made once the payer pays (webhook or verify). Credit: the wallet pays at once
    and the transaction is Fulfilled. Unknown employees or prices are 422 naming them; not enough credit
    is 402."""
    draft = initiate.draft_catalog(client.session, body)
    return _initiated(client, draft, registry_of(request.app.state), initiate.complete_catalog)


@router.post(
    "/client/transactions/onboard-from-storage/initiate",
    response_model=Envelope[TransactionInitiatedOut],
    responses={**error_responses(402, 409, 422), **_GATEWAY_DOWN},
    summary="Start a transaction assigning storage equipment to employees (fees only)",
)
def initiate_onboard_from_storage(
    body: StorageInitiateRequest, request: Request, client: WriteAccess
) -> dict[str, object]:
    """Start a transaction assigning devices held in storage to employees; only per-device fees are charged.
    The devices are reserved while the transaction is Pending: they cannot move (409) until it is paid,
    fails or expires."""
    draft = initiate.draft_storage(client.session, body)
    return _initiated(client, draft, registry_of(request.app.state), initiate.complete_storage)


@router.post(
    "/client/transactions/offboard/initiate",
    response_model=Envelope[TransactionInitiatedOut],
    responses={**error_responses(402, 409, 422), **_GATEWAY_DOWN},
    summary="Start a transaction retrieving devices from employees (offboarding; fees only)",
)
def initiate_offboard(
    body: OffboardInitiateRequest, request: Request, client: WriteAccess
) -> dict[str, object]:
    """Start a transaction retrieving devices from the employees who hold them (to storage or to the office);
    fees only. The devices are reserved while the transaction is Pending: they cannot move (409) until it
    is paid, fails or expires."""
    draft = offboard.draft_offboard(client.session, body)
    return _initiated(client, draft, registry_of(request.app.state), offboard.complete_offboard)


@router.get(
    "/client/transactions",
    response_model=list_envelope(TransactionOut),
    responses=error_responses(422),
    summary="List the company's transactions, newest first (or the changes since `updated_since`)",
)
def list_transactions(
    client: ReadAccess, pagination: SyncListing, status: StatusFilter = None
) -> dict[str, object]:
    """A page of the company's transactions, newest first, optionally only those in one status."""
    return ok(
        service.list_transactions(client.session, status, pagination), "Transactions fetched successfully."
    )


@router.get(
    "/client/transactions/{tx_ref}/verify",
    response_model=Envelope[TransactionOut],
    responses=error_responses(404),
    summary="Verify a transaction: asks the gateway and completes the order when it was paid",
)
def verify_transaction(tx_ref: str, request: Request, client: ReadAccess) -> dict[str, object]:
    """The transaction of `tx_ref`: while Pending, the gateway is asked, and a paid transaction is fulfilled
    (its order made) before the answer."""
    session = client.session
    transaction = TransactionRepository(session).get_by_ref(tx_ref)
    if transaction.status == TransactionStatus.PENDING:
        client.end_reads()  # the gateway is asked with no database transaction open
        word = service.gateway_word(transaction, registry_of(request.app.state))
        if word is not None:
            transaction = settle(session, transaction.id, word.payment, actor=client.actor.name)
    return ok(service.transaction_out(session, transaction), "Transaction verified successfully.")


@router.get(
    "/client/orders",
    response_model=list_envelope(OrderOut),
    responses=error_responses(422),
    summary="List the company's orders, newest first (or the changes since `updated_since`)",
)
def list_orders(
    client: ReadAccess,
    pagination: SyncListing,
    kind: OrderKindFilter = None,
    status: OrderStatusFilter = None,
    stage: OrderStageFilter = None,
) -> dict[str, object]:
    """A page of the company's orders, newest first, filtered by kind, status and stage."""
    return ok(
        service.list_orders(client.session, pagination, kind, status, stage), "Orders fetched successfully."
    )


@router.get(
    "/client/orders/{orderId}",
    response_model=Envelope[OrderOut],
    responses=error_responses(404),
    summary="Retrieve one order with its items, their stages and the equipment made or moved",
)
def get_order(orderId: Annotated[str, id_path("The order's id")], client: ReadAccess) -> dict[str, object]:
    """One order with its items, each item's stages and the equipment it made or moved."""
    return ok(service.get_order(client.session, orderId), "Order fetched successfully.")


@router.post(
    "/client/orders/{orderId}/received",
    response_model=Envelope[OrderOut],
    responses=error_responses(404, 409, 422),
    summary="Mark the devices of a retrieval coming back to the office received",
)
def receive_order_items(
    orderId: Annotated[str, id_path("The order's id")],
    client: WriteAccess,
    body: OrderReceivedRequest | None = None,
) -> dict[str, object]:
    """The company received devices a retrieval brought back to its office (`destination: office`):
    each item named (every such item not yet received, without `item_ids`) reaches `received`, its
    last stage; its device leaves the employee (Unassigned, history `unassigned`). The order is
    `completed` once every item is at its last stage. Items going to storage are Outfitter's to
    receive (409)."""
    order = service.receive_order_items(
        client.session, orderId, body.item_ids if body else None, client.actor.name
    )
    return ok(order, "Order items received successfully.")


@router.get(
    "/client/wallet",
    response_model=Envelope[WalletOut],
    responses=error_responses(),
    summary="The company's credit balances per currency and its recent ledger entries",
)
def get_wallet(client: ReadAccess) -> dict[str, object]:
    """The company's credit balance in each currency and its most recent ledger entries."""
    return ok(wallet_summary(client.session), "Wallet fetched successfully.")


@router.post(
    "/webhooks/payments/{gateway}",
    response_model=Envelope[WebhookOut],
    responses=_WEBHOOK_RESPONSES,
    summary="Payment notices from a gateway (no bearer token: the gateway's signature is checked)",
)
def receive_payment_webhook(
    gateway: str, request: Request, body: RawBody, work: AcrossCompanies
) -> dict[str, object]:
    """Where a payment gateway sends its payment notices; no bearer token: the gateway's signature is checked
    (401 when missing or wrong). Repeated notices answer 200 and change nothing."""
    notice, payment = service.read_notice(gateway, body, request.headers, registry_of(request.app.state))
    outcome = service.record_notice(work.session, gateway, notice, payment)
    message = "Webhook already processed." if outcome == WebhookOutcome.DUPLICATE else "Webhook processed."
    return ok({"outcome": outcome}, message)
