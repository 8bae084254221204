"""What an operator does, from the operator console or the CLI: the same services, and an event
for every change, under the operator's name (`operator:<email>` from the console, `operator` from
the CLI). Each takes a session working across companies and binds it to the company it changes,
as the CLI does (`cli.common.unit_of_work`).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from outfitter.console import accounts as console_accounts
from outfitter.core.errors import NotFound, ValidationFailed
from outfitter.core.money import round_money
from outfitter.db.base import utcnow
from outfitter.db.tenancy import bind_company, parse_uuid
from outfitter.events.schemas import ApiTokenOut, CompanyOut, PaymentAnomalyOut
from outfitter.models import (
    ApiToken,
    Company,
    CompanySuspension,
    ConsoleRole,
    ConsoleSession,
    Currency,
    EventType,
    Order,
    PaymentAnomaly,
    WalletEntry,
)
from outfitter.outbox import as_event_data, record_event
from outfitter.payments import orders as order_tracking
from outfitter.payments.wallet import credit_wallet
from outfitter.scim.settings import change_settings
from outfitter.tenants import tokens

MAX_REASON = 300


def company(session: Session, company_id: str | uuid.UUID) -> Company:
    """The company, or NotFound."""
    parsed = company_id if isinstance(company_id, uuid.UUID) else parse_uuid(company_id)
    found = session.get(Company, parsed) if parsed else None
    if found is None:
        raise NotFound.record("Company")
    return found


def suspension(session: Session, company_id: uuid.UUID) -> CompanySuspension | None:
    return session.get(CompanySuspension, company_id)


def _company_event(session: Session, type: EventType, found: Company, actor: str) -> None:
    session.flush()
    suspended = suspension(session, found.id)
    data = as_event_data(
        CompanyOut,
        {
            "id": found.id,
            "name": found.name,
            "suspended_at": suspended.suspended_at if suspended else None,
            "created_at": found.created_at,
            "updated_at": found.updated_at,
        },
    )
    record_event(session, type, found.id, data, actor=actor, company_id=found.id)


def create_company(session: Session, name: str, actor: str) -> Company:
    """A new company (ValueError names a bad name), recorded as `company.created`."""
    created = tokens.create_company(session, name)
    _company_event(session, EventType.COMPANY_CREATED, created, actor)
    return created


def update_company(
    session: Session,
    company_id: str,
    name: str,
    offboard_retrieval: bool,
    default_country: str,
    actor: str,
) -> Company:
    """Rename the company and set its SCIM settings (`outfitter company set`); ValueError names a
    bad value. `company.updated`."""
    found = company(session, company_id)
    bind_company(session, found.id)
    found.name = tokens.checked_company_name(name)
    change_settings(session, found.id, offboard_retrieval, default_country)
    found.updated_at = utcnow()
    _company_event(session, EventType.COMPANY_UPDATED, found, actor)
    return found


def suspend_company(session: Session, company_id: str, actor: str) -> Company:
    """Refuse the company's tokens (403) and console sessions from now on: its signed-in console
    users are signed out. `company.suspended`; suspending a suspended company changes nothing."""
    found = company(session, company_id)
    bind_company(session, found.id)
    if suspension(session, found.id) is None:
        session.add(CompanySuspension(company_id=found.id, suspended_at=utcnow(), suspended_by=actor[:200]))
        session.execute(delete(ConsoleSession).where(ConsoleSession.company_id == found.id))
        _company_event(session, EventType.COMPANY_SUSPENDED, found, actor)
    return found


def reinstate_company(session: Session, company_id: str, actor: str) -> Company:
    found = company(session, company_id)
    bind_company(session, found.id)
    suspended = suspension(session, found.id)
    if suspended is not None:
        session.delete(suspended)
        _company_event(session, EventType.COMPANY_REINSTATED, found, actor)
    return found


def _token_event(session: Session, type: EventType, token: ApiToken, actor: str) -> None:
    session.flush()
    data = as_event_data(ApiTokenOut, token)
    record_event(session, type, token.id, data, actor=actor, company_id=token.company_id)


def issue_token(
    session: Session,
    company_id: str | uuid.UUID,
    scopes: list[str] | None,
    expires_in_days: int | None,
    name: str | None,
    actor: str,
) -> tokens.IssuedToken:
    """A new token (ValueError names a bad value), `api_token.created`; the token is shown once."""
    found = company(session, company_id)
    bind_company(session, found.id)
    issued = tokens.issue_token(session, found.id, scopes, expires_in_days, name)
    _token_event(session, EventType.API_TOKEN_CREATED, issued.record, actor)
    return issued


def revoke_token(session: Session, token_id: str | uuid.UUID, actor: str) -> tuple[ApiToken, datetime | None]:
    """Revoke a token, `api_token.revoked`; revoking it again changes nothing and answers when it
    was revoked (None the first time)."""
    parsed = token_id if isinstance(token_id, uuid.UUID) else parse_uuid(token_id)
    token = session.get(ApiToken, parsed) if parsed else None
    if token is None:
        raise NotFound.record("Token")
    bind_company(session, token.company_id)
    revoked_before = tokens.revoke_token(session, token.id)
    if revoked_before is None:
        _token_event(session, EventType.API_TOKEN_REVOKED, token, actor)
    return token, revoked_before


def company_tokens(session: Session, company_id: uuid.UUID) -> list[ApiToken]:
    return list(
        session.scalars(
            select(ApiToken).where(ApiToken.company_id == company_id).order_by(ApiToken.created_at)
        )
    )


def invite_console_user(
    session: Session, company_id: str, email: str, role: str, actor: str
) -> console_accounts.Invite:
    """As `outfitter user invite`: InviteRefused names a bad address, ValueError a bad role."""
    found = company(session, company_id)
    if role not in set(ConsoleRole):
        raise ValueError("Choose a role from the list.")
    bind_company(session, found.id)
    return console_accounts.invite(session, found.id, email, ConsoleRole(role), actor)


def ledger_description(reason: str, actor: str) -> str:
    """What the ledger entry says: who credited, and why."""
    return f"Credit by {actor}: {reason}"


def credit(
    session: Session, company_id: str | uuid.UUID, currency: str, amount: Decimal, reason: str, actor: str
) -> WalletEntry:
    """Credit the company's wallet (`payments.wallet.credit_wallet`), the reason and the operator
    written in the ledger entry; 422 (ValidationFailed) for a bad amount, currency or reason."""
    reason = " ".join(reason.split())
    if not reason:
        raise ValidationFailed.field("reason", "Say why this credit is given: the company's ledger shows it.")
    if len(reason) > MAX_REASON:
        raise ValidationFailed.field("reason", f"Keep the reason to {MAX_REASON} characters.")
    found = company(session, company_id)
    bind_company(session, found.id)
    return credit_wallet(session, currency, amount, ledger_description(reason, actor), actor)


def advance_order(
    session: Session,
    order_id: str | uuid.UUID,
    stage: str,
    item_id: uuid.UUID | None,
    note: str | None,
    actor: str,
) -> Order:
    """Move the order's items forward (`payments.orders.advance`), as its company."""
    parsed = order_id if isinstance(order_id, uuid.UUID) else parse_uuid(order_id)
    company_id = session.scalar(select(Order.company_id).where(Order.id == parsed)) if parsed else None
    if company_id is None:
        raise NotFound.record("Order")
    bind_company(session, company_id)
    assert parsed is not None
    return order_tracking.advance(session, parsed, stage, item_id, note, actor)


def resolve_anomaly(session: Session, anomaly_id: str | uuid.UUID, actor: str) -> PaymentAnomaly:
    """Mark a payment anomaly handled (refunded or fulfilled by hand): `payment_anomaly.resolved`;
    once (resolving it again changes nothing)."""
    parsed = anomaly_id if isinstance(anomaly_id, uuid.UUID) else parse_uuid(anomaly_id)
    anomaly = session.get(PaymentAnomaly, parsed) if parsed else None
    if anomaly is None:
        raise NotFound.record("Payment anomaly")
    bind_company(session, anomaly.company_id)
    if anomaly.resolved_at is None:
        anomaly.resolved_at = utcnow()
        session.flush()
        minor = session.scalar(select(Currency.minor_units).where(Currency.code == anomaly.currency_code))
        data = as_event_data(
            PaymentAnomalyOut,
            {
                "id": anomaly.id,
                "tx_ref": anomaly.tx_ref,
                "kind": str(anomaly.kind),
                "amount": round_money(anomaly.amount, minor if minor is not None else 2),
                "currency_code": anomaly.currency_code,
                "gateway_reference": anomaly.gateway_reference,
                "created_at": anomaly.created_at,
                "resolved_at": anomaly.resolved_at,
            },
        )
        record_event(
            session,
            EventType.PAYMENT_ANOMALY_RESOLVED,
            anomaly.id,
            data,
            actor=actor,
            company_id=anomaly.company_id,
        )
    return anomaly
