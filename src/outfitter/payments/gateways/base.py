"""What every payment gateway shares: the checkout it is asked for, what it answers about a
payment, the notices it sends, its errors, and the `Gateway` protocol itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

from outfitter.core.money import storable
from outfitter.models import GatewayPaymentStatus


@dataclass(frozen=True)
class CheckoutRequest:
    tx_ref: str
    amount: Decimal  # the total to charge
    currency: str
    redirect_url: str | None
    customer_name: str
    customer_email: str
    description: str
    session_minutes: int  # how long the checkout may take payments: no longer than the time to live


@dataclass(frozen=True)
class GatewayPayment:
    """What the gateway says about the payment of one tx_ref."""

    tx_ref: str
    status: GatewayPaymentStatus
    amount: Decimal
    currency: str
    reference: str | None = None


@dataclass(frozen=True)
class WebhookNotice:
    """A webhook whose signature was checked: its unique key and the tx_ref it is about."""

    event_key: str
    tx_ref: str | None
    payload: dict[str, Any]
    charge_id: str | None = None  # the gateway's id of the charge, when the notice names one


class GatewayError(Exception):
    """The gateway could not be reached or answered something unexpected."""


def paid_amount(value: object, gateway: str) -> Decimal:
    """The amount a gateway says was paid, as an exact Decimal (a JSON number is read from its
    text, so 41.75 stays 41.75). Anything but a finite amount from 0 to what an amount may be
    (core.money.MAX_AMOUNT) is a malformed answer (GatewayError: the transaction stays Pending for
    the next verify, webhook or reconciliation): `"abc"`, `true`, `NaN`, `Infinity`, `1e400`."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise GatewayError(f"{gateway} answered an amount that is not a number")
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation as exc:
        raise GatewayError(f"{gateway} answered an amount that is not a number") from exc
    if not storable(amount) or amount < 0:
        raise GatewayError(f"{gateway} answered an amount no payment can have: {str(value)[:40]}")
    return amount


class Gateway(Protocol):
    name: str

    def create_checkout(self, checkout: CheckoutRequest) -> str:
        """Register the payment with the gateway; returns the checkout link."""
        ...

    def verify_webhook(self, body: bytes, headers: Mapping[str, str]) -> WebhookNotice:
        """Check the signature (raises InvalidSignature) and read the notice."""
        ...

    def fetch_payment(self, tx_ref: str, charge_id: str | None = None) -> GatewayPayment | None:
        """Ask the gateway about the payment of `tx_ref` (by the charge a webhook named, when it
        named one); None when it knows of none. Never called inside a database transaction of
        ours: it may wait on the network."""
        ...


class InvalidSignature(Exception):
    pass


class InvalidPayload(Exception):
    """A notice whose signature holds but whose body is no notice (not a JSON object)."""
