"""How transactions and orders are answered: one shape each, shared by the endpoints, the CLI
and the events that carry them (`as_event_data`)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from outfitter.models import Order, OrderItem, Transaction
from outfitter.payments.fees import to_minor_units
from outfitter.payments.repository import recent_wallet_entries, wallet_balances
from outfitter.payments.schemas import (
    EmployeeRef,
    OrderItemOut,
    OrderOut,
    StageOut,
    WalletBalanceOut,
    WalletEntryOut,
    WalletOut,
)

MONEY_FIELDS = (
    "amount",
    "insurance",
    "gateway_fee",
    "onboarding_fee",
    "device_config_fee",
    "platform_fee",
    "retrieval_fee",
    "inspection_fee",
    "storage_fee",
)


def transaction_fields(transaction: Transaction, order_id: uuid.UUID | None) -> dict[str, Any]:
    code = transaction.currency_code
    return {
        "tx_ref": transaction.tx_ref,
        "kind": transaction.kind,
        "payment_method": transaction.payment_method,
        **{name: to_minor_units(getattr(transaction, name), code) for name in MONEY_FIELDS},
        "total_amount": to_minor_units(transaction.total_amount, code),
        "currency": transaction.currency_code,
        "status": transaction.status,
        "link": transaction.link,
        "order_id": order_id,
        "created_at": transaction.created_at,
        "updated_at": transaction.updated_at,
        "expires_at": transaction.expires_at,
    }


def stage_entry(stage: str, at: datetime, note: str | None) -> dict[str, Any]:
    """One entry of an item's `stages` as the JSON column keeps it."""
    return {"stage": stage, "at": at.isoformat(), "note": note}


def _item_out(item: OrderItem, currency_code: str) -> OrderItemOut:
    return OrderItemOut(
        id=item.id,
        employee=EmployeeRef(id=item.employee_id, name=item.employee_name),
        asset_spec_id=item.asset_spec_id,
        asset_pricing_id=item.asset_pricing_id,
        price=to_minor_units(item.price, currency_code),
        equipment_id=item.equipment_id,
        destination=item.destination,
        stage=item.stage,
        stages=[StageOut.model_validate(entry) for entry in item.stages or []],
    )


def order_out(order: Order) -> OrderOut:
    """Needs `order.country` and `order.items` loaded."""
    return OrderOut(
        id=order.id,
        tx_ref=order.tx_ref,
        kind=order.kind,
        status=order.status,
        payment_method=order.payment_method,
        country=order.country.name,
        country_code=order.country.code,
        currency=order.currency_code,
        total_amount=to_minor_units(order.total_amount, order.currency_code),
        items=[
            _item_out(item, order.currency_code)
            for item in sorted(order.items, key=lambda item: (item.employee_name, str(item.id)))
        ],
        created_at=order.created_at,
        updated_at=order.updated_at,
    )


def wallet_summary(
    session: Session, limit: int = 20, currency: str | None = None, offset: int = 0
) -> WalletOut:
    """The balances, and the newest `limit` ledger entries after `offset` (of one currency's
    wallet, if given)."""
    return WalletOut(
        balances=[
            WalletBalanceOut(
                currency=record.currency_code,
                balance=to_minor_units(record.balance, record.currency_code),
                updated_at=record.updated_at,
            )
            for record in wallet_balances(session)
        ],
        entries=[
            WalletEntryOut(
                id=entry.id,
                currency=code,
                kind=entry.kind,
                amount=to_minor_units(entry.amount, code),
                balance_after=to_minor_units(entry.balance_after, code),
                description=entry.description,
                transaction_id=entry.transaction_id,
                tx_ref=tx_ref,
                created_at=entry.created_at,
            )
            for entry, code, tx_ref in recent_wallet_entries(session, limit, currency, offset)
        ],
    )
