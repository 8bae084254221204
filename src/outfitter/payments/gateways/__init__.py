"""Payment gateways behind one interface.

A gateway makes a checkout link for a transaction, checks the signature of the webhooks it sends,
and answers what it knows about a payment (`fetch_payment`): the service asks it after every
webhook, on verify and in reconciliation, and never trusts a webhook body for money.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

from sqlalchemy.orm import Session, sessionmaker

from outfitter.config import Settings
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


def build_gateway(name: str, settings: Settings, sessions: sessionmaker[Session]) -> Gateway:
    if name == "sandbox":
        from outfitter.payments.gateways.sandbox import SandboxGateway

        return SandboxGateway(settings, sessions)
    if name == "flutterwave":
        from outfitter.payments.gateways.flutterwave import FlutterwaveGateway

        return FlutterwaveGateway(
            settings.flutterwave_base_url,
            settings.flutterwave_secret_key or "",
            settings.flutterwave_webhook_hash or "",
        )
    raise KeyError(name)


GATEWAY_NAMES = ("sandbox", "flutterwave")


class GatewayRegistry:
    """The gateways of one running app (or CLI command), built on first use; tests put stand-ins in."""

    def __init__(self, settings: Settings, sessions: sessionmaker[Session]) -> None:
        self.settings = settings
        self.sessions = sessions  # the sandbox keeps its book of payments in our database
        self._gateways: dict[str, Gateway] = {}

    @property
    def default_name(self) -> str:
        return self.settings.gateway

    def get(self, name: str) -> Gateway | None:
        """The gateway `name`, or None if there is none such here (the sandbox in production)."""
        if name not in GATEWAY_NAMES or (name == "sandbox" and not self.settings.sandbox_gateway_served):
            return None
        if name not in self._gateways:
            self._gateways[name] = build_gateway(name, self.settings, self.sessions)
        return self._gateways[name]

    def put(self, gateway: Gateway) -> None:
        self._gateways[gateway.name] = gateway


def registry_of(state: Any) -> GatewayRegistry:
    """The registry kept on an app's state (created on first use)."""
    registry = getattr(state, "gateways", None)
    if not isinstance(registry, GatewayRegistry):
        registry = GatewayRegistry(state.settings, state.sessionmaker)
        state.gateways = registry
    return registry
