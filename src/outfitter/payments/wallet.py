"""The credit wallet: one balance per company and currency, moved only with a ledger entry. Every
function works for the company its session is bound to.

Every change is one conditional UPDATE (`balance = balance +/- x`, and for debits
`WHERE balance >= x`), so the row lock of the database orders concurrent changes and the balance
never goes below zero; the entry written beside it records the balance that UPDATE returned.
"""

from __future__ import annotations

import uuid
from decimal import Decimal

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from outfitter.catalog.reference import is_money, resolve_currency
from outfitter.core.errors import InsufficientCredit, ValidationFailed
from outfitter.core.money import MAX_AMOUNT, round_money, storable
from outfitter.db.base import new_id, utcnow
from outfitter.db.company_writes import company_insert
from outfitter.db.tenancy import company_of
from outfitter.models import Currency, Wallet, WalletEntry, WalletEntryKind
from outfitter.models.events import EventType
from outfitter.payments.events import record_wallet_event


def _ensure_wallet(session: Session, currency_code: str) -> None:
    now = utcnow()
    wallet = {
        "id": new_id(),
        "company_id": company_of(session),
        "currency_code": currency_code,
        "balance": Decimal(0),
        "created_at": now,
        "updated_at": now,
    }
    company_insert(session, Wallet, [wallet], unique=["company_id", "currency_code"])


def _change(
    session: Session,
    currency_code: str,
    amount: Decimal,
    kind: WalletEntryKind,
    description: str,
    transaction_id: uuid.UUID | None,
) -> WalletEntry | None:
    """Add `amount` (negative to debit) to the wallet; None when a debit would overdraw it or a
    credit would take the balance past what can be stored (core.money.MAX_AMOUNT). The wallet is
    locked before the change is stamped, so its `updated_at` and the entry's `created_at` are one
    time, taken after any wait for a concurrent change: the order of the balance's chain."""
    session.execute(select(Wallet.id).where(Wallet.currency_code == currency_code).with_for_update())
    now = utcnow()
    statement = (
        update(Wallet)
        .where(Wallet.currency_code == currency_code)
        .values(balance=Wallet.balance + amount, updated_at=now)
        .returning(Wallet.id, Wallet.balance)
    )
    if amount < 0:
        statement = statement.where(Wallet.balance >= -amount)
    else:
        statement = statement.where(Wallet.balance < MAX_AMOUNT - amount)
    row = session.execute(statement, execution_options={"synchronize_session": False}).one_or_none()
    if row is None:
        return None
    wallet_id, balance_after = row
    entry = WalletEntry(
        wallet_id=wallet_id,
        amount=amount,
        balance_after=balance_after,
        kind=kind,
        transaction_id=transaction_id,
        description=description[:500],
        created_at=now,
    )
    session.add(entry)
    session.flush()
    return entry


def credit_wallet(
    session: Session, currency_code: str, amount: Decimal, description: str, actor: str | None = None
) -> WalletEntry:
    """Add credit (an operator's top-up or a refund), recording `wallet.credited`. Amounts finer
    than the currency's unit: 422."""
    currency = resolve_currency(session, currency_code, "currency")
    if not is_money(currency.code):  # a database seeded before these were left out holds them
        raise ValidationFailed.field(
            "currency",
            f"{currency.code} is not money a wallet holds: ISO 4217 gives it no minor unit (metals, "
            "the SDR, the testing code, no currency). Give the code of the currency paid in.",
        )
    if not amount.is_finite() or amount <= 0:
        raise ValidationFailed.field("amount", "The amount must be greater than zero.")
    if not storable(amount):
        raise ValidationFailed.field("amount", f"The amount must be below {MAX_AMOUNT:,}.")
    if round_money(amount, currency.minor_units) != amount:
        raise ValidationFailed.field(
            "amount", f"{currency.code} amounts have at most {currency.minor_units} decimal places."
        )
    _ensure_wallet(session, currency.code)
    entry = _change(session, currency.code, amount, WalletEntryKind.CREDIT, description, None)
    if entry is None:
        raise ValidationFailed.field(
            "amount", f"This credit would take the {currency.code} balance to {MAX_AMOUNT:,} or more."
        )
    record_wallet_event(session, EventType.WALLET_CREDITED, entry, actor)
    return entry


def debit_wallet(
    session: Session,
    currency_code: str,
    amount: Decimal,
    description: str,
    transaction_id: uuid.UUID,
    actor: str | None = None,
) -> WalletEntry:
    """Take `amount` (> 0) from the wallet, recording `wallet.debited`, or 402 when it holds less
    (nothing is written then)."""
    entry = _change(session, currency_code, -amount, WalletEntryKind.DEBIT, description, transaction_id)
    if entry is None:
        balance = session.scalar(select(Wallet.balance).where(Wallet.currency_code == currency_code))
        minor_units = session.scalars(
            select(Currency.minor_units).where(Currency.code == currency_code)
        ).one()
        raise InsufficientCredit(
            f"Not enough credit: this costs {round_money(amount, minor_units):f} {currency_code} and the "
            f"wallet holds {round_money(balance or Decimal(0), minor_units):f} {currency_code}."
        )
    record_wallet_event(session, EventType.WALLET_DEBITED, entry, actor)
    return entry
