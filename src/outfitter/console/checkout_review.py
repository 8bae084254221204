"""What a checkout shows before paying: the draft's lines, every fee line and the total, the wallet's
balance for Credit; the same for the three kinds (a purchase, a shipment from storage, a
retrieval). Prices and fees are the draft's, computed by the payments service (payments/fees.py):
nothing here adds or rounds money."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from fastapi import Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from outfitter.catalog.repository import CatalogRepository
from outfitter.console.checkout import KEY_FIELD, new_key
from outfitter.console.pages import render
from outfitter.console.web import ConsoleWork
from outfitter.models import PaymentMethod, RetrievalDestination, TransactionItem, TransactionKind
from outfitter.payments.drafts import Draft, storage_devices
from outfitter.payments.fees import to_minor_units
from outfitter.payments.repository import wallet_balances

# The fee lines each kind charges, in the order the total adds them up (docs/payments.md).
FEE_LINES: dict[TransactionKind, tuple[tuple[str, str], ...]] = {
    TransactionKind.CATALOG: (
        ("amount", "Equipment"),
        ("insurance", "Insurance"),
        ("platform_fee", "Platform fee"),
        ("onboarding_fee", "Onboarding"),
        ("device_config_fee", "Device configuration"),
        ("gateway_fee", "Card gateway fee"),
    ),
    TransactionKind.STORAGE: (
        ("onboarding_fee", "Onboarding"),
        ("device_config_fee", "Device configuration"),
        ("gateway_fee", "Card gateway fee"),
    ),
    TransactionKind.OFFBOARD: (
        ("retrieval_fee", "Retrieval"),
        ("inspection_fee", "Inspection"),
        ("storage_fee", "Storage"),
        ("gateway_fee", "Card gateway fee"),
    ),
}


@dataclass(frozen=True)
class ReviewLine:
    employee: str
    what: str
    quantity: int
    unit_price: str  # "" where the device itself costs nothing
    note: str = ""  # where a retrieved device goes


@dataclass(frozen=True)
class Review:
    kind: TransactionKind
    method: PaymentMethod
    currency: str
    country: str
    lines: list[ReviewLine]
    fees: list[tuple[str, str]]
    total: str
    balance: str | None  # the wallet's, for Credit
    short_by: str | None  # what the wallet lacks, for Credit


def fee_lines(kind: TransactionKind, values: object, currency: str) -> list[tuple[str, str]]:
    """(label, amount) of each fee `kind` charges, from a draft's charges or a transaction."""
    return [(label, str(to_minor_units(getattr(values, name), currency))) for name, label in FEE_LINES[kind]]


def item_names(session: Session, rows: Sequence[TransactionItem]) -> dict[uuid.UUID, str]:
    """What each row is, by its pricing or device id: a catalog item's name and specification, or
    a device's title and serial number."""
    names: dict[uuid.UUID, str] = {}
    pricing_ids = {row.asset_pricing_id for row in rows if row.asset_pricing_id}
    for pricing in CatalogRepository(session).pricings(pricing_ids).values():
        names[pricing.id] = spec_name(pricing.specification.asset.name, pricing.specification.spec)
    device_ids = {row.equipment_id for row in rows if row.equipment_id}
    for equipment_id, equipment in storage_devices(session, device_ids, lock=False).items():
        names[equipment_id] = f"{equipment.title} ({equipment.serial_number or 'no serial number'})"
    return names


def review_lines(session: Session, rows: Sequence[TransactionItem], code: str) -> list[ReviewLine]:
    names = item_names(session, rows)
    return [
        ReviewLine(
            employee=row.employee_name,
            what=names.get(row.asset_pricing_id or row.equipment_id or uuid.UUID(int=0), "(gone)"),
            quantity=row.quantity,
            unit_price=str(to_minor_units(row.unit_price, code)) if row.asset_pricing_id else "",
            note=_destination(row.destination),
        )
        for row in rows
    ]


def spec_name(asset_name: str, spec: dict[str, object]) -> str:
    details = ", ".join(f"{value}" for value in spec.values() if value)
    return f"{asset_name} ({details})" if details else asset_name


def review_of(session: Session, draft: Draft) -> Review:
    code = draft.currency.code
    lines = review_lines(session, draft.rows, code)
    total = draft.charges.total_amount
    balance = short_by = None
    if draft.payment_method == PaymentMethod.CREDIT:
        held = next((w.balance for w in wallet_balances(session) if w.currency_code == code), Decimal(0))
        balance = str(to_minor_units(held, code))
        if held < total:
            short_by = str(to_minor_units(total - held, code))
    return Review(
        kind=draft.kind,
        method=draft.payment_method,
        currency=code,
        country=draft.country.name,
        lines=lines,
        fees=fee_lines(draft.kind, draft.charges, code),
        total=str(to_minor_units(total, code)),
        balance=balance,
        short_by=short_by,
    )


def _destination(destination: RetrievalDestination | None) -> str:
    if destination is None:
        return ""
    return "to Outfitter's storage" if destination == RetrievalDestination.STORAGE else "back to the office"


def render_review(
    request: Request,
    work: ConsoleWork,
    draft: Draft,
    *,
    title: str,
    pay_action: str,
    back: str,
    fields: list[tuple[str, str]],
    status: int = 200,
    error: str = "",
) -> HTMLResponse:
    """The review page with its payment form: the choices as hidden fields and a fresh key."""
    return render(
        request,
        "checkout_review.html",
        status,
        user=work.user,
        nav="buy",
        title=title,
        review=review_of(work.session, draft),
        pay_action=pay_action,
        back=back,
        fields=fields,
        key_field=KEY_FIELD,
        key=new_key(),
        error=error,
    )
