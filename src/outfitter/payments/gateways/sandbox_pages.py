"""The sandbox gateway's checkout page, as a payer's browser sees it. The sandbox stands for a
gateway outside the service, so it reads any company's transaction (`across_companies`).

Pay and Decline record the payer's choice in the sandbox's own book, commit, and redirect (303) to
the transaction's redirect_url with `status` and `tx_ref`; the signed webhook to the service
(unless OUTFITTER_SANDBOX_WEBHOOKS=off) leaves in the background once the redirect is sent, as a
real gateway's notice arrives on its own time, so the page the payer lands on verifies.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import idna
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker
from starlette.background import BackgroundTask

from outfitter.core.money import round_money
from outfitter.db.base import utcnow
from outfitter.db.tenancy import across_companies
from outfitter.models import (
    Asset,
    AssetPricing,
    AssetSpecification,
    Currency,
    Equipment,
    GatewayPaymentStatus,
    SandboxPayment,
    Transaction,
    TransactionItem,
    TransactionKind,
    TransactionStatus,
)
from outfitter.payments.gateways import registry_of
from outfitter.payments.gateways.sandbox import SandboxGateway, new_sandbox_payment

router = APIRouter(prefix="/sandbox/checkout")
templates = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"), autoescape=select_autoescape(["html"])
)


def _money_of(minor_units: int) -> Callable[[Decimal], str]:
    """How the pages write an amount of a currency: grouped, at its minor unit (JPY 15,227; KWD 35.400)."""
    return lambda value: f"{round_money(value, minor_units):,}"


# A page with a Pay button is shown only as itself: another site cannot frame it and trick a click
# onto the button, nor a browser read it as anything but HTML.
PAGE_HEADERS = {"Content-Security-Policy": "frame-ancestors 'none'", "X-Content-Type-Options": "nosniff"}


def _html(template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    body = templates.get_template(template).render(**context)
    return HTMLResponse(body, status_code=status_code, headers=PAGE_HEADERS)


def _not_found() -> HTMLResponse:
    return _html(
        "message.html", 404, title="Unknown checkout", message="This checkout link names no payment."
    )


def _sandbox(request: Request) -> SandboxGateway:
    gateway = registry_of(request.app.state).get(SandboxGateway.name)
    assert isinstance(gateway, SandboxGateway)
    return gateway


def _transaction(session: Session, tx_ref: str) -> Transaction | None:
    transaction = session.scalars(select(Transaction).where(Transaction.tx_ref == tx_ref)).one_or_none()
    return transaction if transaction is not None and transaction.gateway == SandboxGateway.name else None


# The page's fee lines, in order; each shown when the transaction has an amount there, so that the
# lines always add up to the total, whatever the kind (an offboarding has none of a purchase's).
FEE_LINES = (
    ("Equipment", "amount"),
    ("Insurance", "insurance"),
    ("Platform fee", "platform_fee"),
    ("Onboarding fee", "onboarding_fee"),
    ("Device configuration fee", "device_config_fee"),
    ("Retrieval fee", "retrieval_fee"),
    ("Inspection fee", "inspection_fee"),
    ("Storage fee", "storage_fee"),
    ("Gateway fee", "gateway_fee"),
)
# What a line of a device already owned does to it, by the transaction's kind.
DEVICE_LINE = {TransactionKind.STORAGE: "Onboarding of", TransactionKind.OFFBOARD: "Retrieval of"}


def _fees(transaction: Transaction) -> list[tuple[str, Decimal]]:
    return [(label, getattr(transaction, field)) for label, field in FEE_LINES if getattr(transaction, field)]


def _lines(session: Session, transaction: Transaction) -> list[dict[str, Any]]:
    rows = session.execute(
        select(TransactionItem, Asset.name, Equipment.title)
        .outerjoin(AssetPricing, AssetPricing.id == TransactionItem.asset_pricing_id)
        .outerjoin(AssetSpecification, AssetSpecification.id == AssetPricing.specification_id)
        .outerjoin(Asset, Asset.id == AssetSpecification.asset_id)
        .outerjoin(Equipment, Equipment.id == TransactionItem.equipment_id)
        .where(TransactionItem.transaction_id == transaction.id)
        .order_by(TransactionItem.employee_name, TransactionItem.id)
    ).all()
    return [
        {
            "employee": item.employee_name,
            "name": asset_name
            or (f"{DEVICE_LINE.get(transaction.kind, 'Onboarding of')} {title}" if title else "Item"),
            "quantity": item.quantity,
            "price": item.unit_price,
        }
        for item, asset_name, title in rows
    ]


def _refusal(transaction: Transaction) -> str | None:
    if transaction.status != TransactionStatus.PENDING:
        return f"This payment is {transaction.status}: there is nothing to pay."
    if utcnow() >= transaction.expires_at:
        return "This payment link has expired."
    return None


@router.get("/{tx_ref}", response_class=HTMLResponse)
def checkout_page(tx_ref: str, request: Request) -> Response:
    factory: sessionmaker[Session] = request.app.state.sessionmaker
    with across_companies(factory()) as session:
        transaction = _transaction(session, tx_ref)
        if transaction is None:
            return _not_found()
        paid = session.scalars(select(SandboxPayment).where(SandboxPayment.tx_ref == tx_ref)).one_or_none()
        reason = _refusal(transaction) or (f"Already {paid.status}." if paid else None)
        return _html(
            "checkout.html",
            tx=transaction,
            money=_money_of(
                session.scalars(
                    select(Currency.minor_units).where(Currency.code == transaction.currency_code)
                ).one()
            ),
            items=_lines(session, transaction),
            fees=_fees(transaction),
            payable=reason is None,
            reason=reason,
            base=f"/sandbox/checkout/{tx_ref}",
        )


def _act(request: Request, tx_ref: str, outcome: GatewayPaymentStatus) -> Response:
    """Record the payer's choice once; a settled or expired transaction is a 409 page. The
    webhook leaves in the background after the redirect is sent, once per click, never inside it."""
    factory: sessionmaker[Session] = request.app.state.sessionmaker
    gateway = _sandbox(request)
    try:
        with across_companies(factory()) as session, session.begin():
            transaction = _transaction(session, tx_ref)
            if transaction is None:
                return _not_found()
            refusal = _refusal(transaction)
            if refusal:
                return _html("message.html", 409, title="Cannot pay", message=refusal)
            payment = session.scalars(
                select(SandboxPayment).where(SandboxPayment.tx_ref == tx_ref)
            ).one_or_none()
            if payment is None:  # otherwise an earlier click's notice has not arrived: send it again
                payment = new_sandbox_payment(
                    tx_ref, outcome, transaction.total_amount, transaction.currency_code
                )
                session.add(payment)
            redirect_url = transaction.redirect_url
    except IntegrityError:  # a second click raced the first: that one's record stands
        with across_companies(factory()) as session:
            payment = session.scalars(select(SandboxPayment).where(SandboxPayment.tx_ref == tx_ref)).one()
            redirect_url = session.scalars(
                select(Transaction.redirect_url).where(Transaction.tx_ref == tx_ref)
            ).one()
    return RedirectResponse(
        _redirect_target(redirect_url, tx_ref, payment.status),
        status_code=303,
        background=BackgroundTask(gateway.send_webhook_soon, payment),
    )


def _redirect_target(redirect_url: str | None, tx_ref: str, status: GatewayPaymentStatus) -> str:
    if not redirect_url:
        return f"/sandbox/checkout/{tx_ref}/done?" + urlencode({"status": status, "tx_ref": tx_ref})
    parts = urlsplit(redirect_url)
    query = [(key, value) for key, value in parse_qsl(parts.query) if key not in ("status", "tx_ref")]
    query += [("status", status), ("tx_ref", tx_ref)]
    return urlunsplit(parts._replace(netloc=_ascii_netloc(parts.netloc), query=urlencode(query)))


def _ascii_netloc(netloc: str) -> str:
    """The host of `netloc` as IDNA (`exämple.com` as `xn--exmple-cua.com`): the Location header
    percent-encodes what is not ASCII, and no browser follows a host written so. A host IDNA
    cannot write (an initiate accepted it) is left as it was."""
    userinfo, at, hostport = netloc.rpartition("@")
    if hostport.isascii():
        return netloc
    host, colon, port = hostport.rpartition(":") if not hostport.endswith("]") else ("", "", "")
    if not (colon and port.isdigit()):
        host, colon, port = hostport, "", ""
    try:
        encoded = idna.encode(host, uts46=True).decode("ascii")
    except idna.IDNAError:
        return netloc
    return f"{userinfo}{at}{encoded}{colon}{port}"


@router.post("/{tx_ref}/pay")
def pay(tx_ref: str, request: Request) -> Response:
    return _act(request, tx_ref, GatewayPaymentStatus.SUCCESSFUL)


@router.post("/{tx_ref}/decline")
def decline(tx_ref: str, request: Request) -> Response:
    return _act(request, tx_ref, GatewayPaymentStatus.DECLINED)


@router.get("/{tx_ref}/done", response_class=HTMLResponse)
def done(tx_ref: str, request: Request) -> Response:
    """What the sandbox's own book says of the payment; the query string is only where the
    browser came from, and proves nothing."""
    factory: sessionmaker[Session] = request.app.state.sessionmaker
    with across_companies(factory()) as session:
        if _transaction(session, tx_ref) is None:
            return _not_found()
        status = session.scalar(select(SandboxPayment.status).where(SandboxPayment.tx_ref == tx_ref))
    title = {
        GatewayPaymentStatus.SUCCESSFUL: "Payment successful",
        GatewayPaymentStatus.DECLINED: "Payment declined",
    }.get(status, "Not paid")  # type: ignore[arg-type]
    return _html("message.html", title=title, message=f"Transaction {tx_ref}: you may close this page.")
