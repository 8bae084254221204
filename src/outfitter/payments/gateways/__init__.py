"""Payment gateways behind one interface (`gateways.base`), and the registry of an app's gateways.

A gateway makes a checkout link for a transaction, checks the signature of the webhooks it sends,
and answers what it knows about a payment (`fetch_payment`): the service asks it after every
webhook, on verify and in reconciliation, and never trusts a webhook body for money.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from outfitter.config import Settings
from outfitter.payments.gateways.base import Gateway
from outfitter.payments.gateways.flutterwave import FlutterwaveGateway
from outfitter.payments.gateways.sandbox import SandboxGateway


def build_gateway(name: str, settings: Settings, sessions: sessionmaker[Session]) -> Gateway:
    if name == "sandbox":
        return SandboxGateway(settings, sessions)
    if name == "flutterwave":
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
