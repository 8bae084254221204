"""Transactions and the wallet: the list with its filters (in the URL) and its CSV export, a page
per transaction with its fee lines, items and verify outcome, the payer's return from the gateway,
and the wallet's balances and ledger. Reads go through the payments service the API calls; a
Pending transaction's page asks the gateway as `GET /client/transactions/{tx_ref}/verify` does, and
settles it the same way (`fulfilment.settle`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session
from starlette.datastructures import QueryParams

from outfitter.console.checkout import transaction_url
from outfitter.console.checkout_review import fee_lines, review_lines
from outfitter.console.pages import page, render
from outfitter.console.web import ConsoleWork, console_work, error_page, redirect
from outfitter.csvio.writer import csv_response
from outfitter.db.keyset import PageParams
from outfitter.db.tenancy import bind_company, reads_only
from outfitter.models import PaymentMethod, Transaction, TransactionKind, TransactionStatus
from outfitter.payments import export
from outfitter.payments import service as payments_service
from outfitter.payments.fees import to_minor_units
from outfitter.payments.fulfilment import settle
from outfitter.payments.gateways import registry_of
from outfitter.payments.presenters import wallet_summary
from outfitter.payments.repository import (
    TransactionFilters,
    TransactionRepository,
    items_of,
    order_id_of,
    wallet_balances,
)

router = APIRouter(include_in_schema=False)
PER_PAGE = 25
LEDGER_PAGE = 50
TX_REF = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
CURRENCY = re.compile(r"^[A-Z]{3}$")


@dataclass(frozen=True)
class TransactionQuery:
    """The list's view; `errors` says which values were set aside and why."""

    status: TransactionStatus | None = None
    kind: TransactionKind | None = None
    method: PaymentMethod | None = None
    currency: str = ""
    page: int = 1
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, params: QueryParams) -> TransactionQuery:
        errors: dict[str, str] = {}
        found: dict[str, Any] = {}
        for name, enum in (
            ("status", TransactionStatus),
            ("kind", TransactionKind),
            ("method", PaymentMethod),
        ):
            value = params.get(name) or None
            if value is not None and value not in set(enum):
                errors[name] = f"Choose a {name} from the list."
                value = None
            found[name] = enum(value) if value else None
        currency = (params.get("currency") or "").strip().upper()
        if currency and not CURRENCY.match(currency):
            errors["currency"] = "A currency is three letters, such as NGN."
            currency = ""
        page_text = params.get("page") or "1"
        number = int(page_text) if page_text.isdigit() and len(page_text) < 7 else 1
        return cls(**found, currency=currency, page=max(1, number), errors=errors)

    @property
    def filters(self) -> TransactionFilters:
        return TransactionFilters(self.kind, self.method, self.currency or None)

    def params(self, **changes: Any) -> dict[str, str]:
        view = replace(self, **changes)
        values = {
            "status": view.status.value if view.status else "",
            "kind": view.kind.value if view.kind else "",
            "method": view.method.value if view.method else "",
            "currency": view.currency,
            "page": "" if view.page == 1 else str(view.page),
        }
        return {name: value for name, value in values.items() if value}


@router.get("/transactions")
@page
def transactions_page(request: Request) -> Response:
    query = TransactionQuery.parse(request.query_params)
    with console_work(request) as work:
        body = payments_service.list_transactions(
            work.session, query.status, PageParams(query.page, PER_PAGE), query.filters
        )
        return render(
            request,
            "transactions.html",
            user=work.user,
            nav="transactions",
            query=query,
            rows=body["data"],
            total=body["total"],
            last_page=body["last_page"],
            statuses=list(TransactionStatus),
            kinds=list(TransactionKind),
            methods=list(PaymentMethod),
            urlencode=urlencode,
            fees_of=lambda tx: fee_lines(tx.kind, tx, tx.currency),
        )


@router.get("/transactions/export")
@page
def export_transactions(request: Request) -> Response:
    """The list's filter as CSV, streamed: each chunk read in a session of its own, bound to the
    user's company."""
    query = TransactionQuery.parse(request.query_params)
    with console_work(request) as work:
        company_id, sessions = work.user.company_id, request.app.state.sessionmaker

    def open_session() -> Session:
        session = reads_only(sessions())
        bind_company(session, company_id)
        return session

    chunks = export.transaction_chunks(open_session, query.status, query.filters)
    return csv_response(f"transactions-{datetime.now(UTC):%Y-%m-%d}.csv", export.COLUMNS, chunks)


@router.get("/transactions/return")
@page
def payer_returns(request: Request) -> Response:
    """Where the gateway sends the payer back (`?status=...&tx_ref=...`): the transaction's page,
    which asks the gateway itself (the query string is the payer's browser's word, not the
    gateway's)."""
    tx_ref = request.query_params.get("tx_ref") or ""
    if not TX_REF.match(tx_ref):
        return error_page(request, 404, "This return link names no transaction.")
    return redirect(f"{transaction_url(quote(tx_ref))}?returned=1")


def verified(request: Request, work: ConsoleWork, tx_ref: str) -> Transaction:
    """The transaction, asked of its gateway while Pending, and settled as verify settles it."""
    session = work.session
    transaction = TransactionRepository(session).get_by_ref(tx_ref)
    if transaction.status == TransactionStatus.PENDING and transaction.gateway:
        session.commit()  # the gateway is asked with no database transaction open
        word = payments_service.gateway_word(transaction, registry_of(request.app.state))
        if word is not None:
            settle(session, transaction.id, word.payment, actor=work.user.actor)
            transaction = TransactionRepository(session).get_by_ref(tx_ref)  # with its country
    return transaction


def _outcome(session: Session, transaction: Transaction) -> dict[str, Any]:
    return {"transaction": transaction, "order_id": order_id_of(session, transaction.id)}


@router.get("/transactions/{tx_ref}")
@page
def transaction_page(request: Request, tx_ref: str) -> Response:
    with console_work(request) as work:
        transaction = verified(request, work, tx_ref)
        code = transaction.currency_code
        return render(
            request,
            "transaction.html",
            user=work.user,
            nav="transactions",
            fees=fee_lines(transaction.kind, transaction, code),
            total=to_minor_units(transaction.total_amount, code),
            lines=review_lines(work.session, items_of(work.session, transaction.id), code),
            returned=request.query_params.get("returned") == "1",
            **_outcome(work.session, transaction),
        )


@router.get("/transactions/{tx_ref}/outcome")
@page
def transaction_outcome(request: Request, tx_ref: str) -> Response:
    """The outcome alone, which a Pending transaction's page asks for every few seconds: it
    changes when the webhook (or this question) settles the transaction."""
    with console_work(request) as work:
        transaction = verified(request, work, tx_ref)
        return render(request, "transaction_outcome.html", **_outcome(work.session, transaction))


@router.get("/wallet")
@page
def wallet_page(request: Request) -> Response:
    params = request.query_params
    currency = (params.get("currency") or "").upper()
    page_text = params.get("page") or "1"
    number = max(1, int(page_text)) if page_text.isdigit() and len(page_text) < 7 else 1
    with console_work(request) as work:
        known = {wallet.currency_code for wallet in wallet_balances(work.session)}
        chosen = currency if currency in known else None
        summary = wallet_summary(work.session, LEDGER_PAGE + 1, chosen, (number - 1) * LEDGER_PAGE)
        return render(
            request,
            "wallet.html",
            user=work.user,
            nav="wallet",
            balances=summary.balances,
            entries=summary.entries[:LEDGER_PAGE],
            more=len(summary.entries) > LEDGER_PAGE,
            currency=chosen or "",
            page_number=number,
            unknown_currency=bool(currency) and chosen is None,
            urlencode=urlencode,
        )
