"""The sandbox gateway: a checkout page served by this process, its own book of payments
(`sandbox_payments`), and webhooks signed with Standard Webhooks, sent over HTTP like a real gateway."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from decimal import Decimal

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from standardwebhooks import Webhook

from outfitter.config import Settings
from outfitter.db.base import new_id
from outfitter.models import GatewayPaymentStatus, SandboxPayment
from outfitter.payments.gateways.base import (
    CheckoutRequest,
    GatewayPayment,
    InvalidPayload,
    InvalidSignature,
    WebhookNotice,
)

logger = logging.getLogger("outfitter.payments")

# (url, body, headers) -> HTTP status. Tests swap in one that posts to their TestClient.
WebhookSender = Callable[[str, bytes, dict[str, str]], int]


def http_sender(url: str, body: bytes, headers: dict[str, str]) -> int:
    response = httpx.post(url, content=body, headers=headers, timeout=15.0)
    return response.status_code


# Notices leave from threads of the sandbox's own. Each waits (up to 15 s) for the service, which
# answers it in one of the app's worker threads, as many as the pool has connections: sent from
# those same threads, a burst of Pay clicks held every one of them waiting on itself, and every
# request of every company waited too.
NOTICE_SENDERS = 4


class SandboxGateway:
    name = "sandbox"

    def __init__(
        self, settings: Settings, sessions: sessionmaker[Session], sender: WebhookSender = http_sender
    ) -> None:
        assert settings.sandbox_webhook_secret, "the settings fill in the development secret"
        self.public_url = settings.public_url.rstrip("/")
        self.webhooks_on = settings.sandbox_webhooks == "on"
        self.webhook = Webhook(settings.sandbox_webhook_secret)
        self.sender = sender
        self.sessions = sessions
        self._notices = ThreadPoolExecutor(NOTICE_SENDERS, thread_name_prefix="sandbox-notice")

    @property
    def webhook_url(self) -> str:
        return f"{self.public_url}/api/v2/webhooks/payments/{self.name}"

    def checkout_link(self, tx_ref: str) -> str:
        return f"{self.public_url}/sandbox/checkout/{tx_ref}"

    def create_checkout(self, checkout: CheckoutRequest) -> str:
        return self.checkout_link(checkout.tx_ref)

    def verify_webhook(self, body: bytes, headers: Mapping[str, str]) -> WebhookNotice:
        try:
            # Checks the signature and refuses timestamps more than 5 minutes off.
            self.webhook.verify(body, dict(headers), json_parse=False)
        except Exception as exc:  # the library raises several kinds for malformed headers
            raise InvalidSignature(str(exc) or type(exc).__name__) from exc
        try:  # read here, not by the library: a signed body that is not JSON is no signature's fault
            payload = json.loads(body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise InvalidPayload("the payload is not a JSON object")
        data = payload.get("data")
        tx_ref = data.get("tx_ref") if isinstance(data, dict) else None
        event_key = {key.lower(): value for key, value in headers.items()}["webhook-id"]
        return WebhookNotice(
            event_key=event_key, tx_ref=tx_ref if isinstance(tx_ref, str) else None, payload=payload
        )

    def fetch_payment(self, tx_ref: str, charge_id: str | None = None) -> GatewayPayment | None:
        # The gateway's own book, read in its own short transaction, as a remote gateway would.
        with self.sessions() as session:
            payment = session.scalars(
                select(SandboxPayment).where(SandboxPayment.tx_ref == tx_ref)
            ).one_or_none()
        if payment is None:
            return None
        return GatewayPayment(
            tx_ref=payment.tx_ref,
            status=payment.status,
            amount=payment.amount,
            currency=payment.currency_code,
            reference=str(payment.id),
        )

    # The gateway's side: what it sends after a payer acted on the checkout page.

    def signed_webhook(self, payment: SandboxPayment) -> tuple[bytes, dict[str, str]]:
        body = json.dumps(
            {
                "type": "charge.completed"
                if payment.status == GatewayPaymentStatus.SUCCESSFUL
                else "charge.failed",
                "timestamp": datetime.now(UTC).isoformat(),
                "data": {
                    "id": str(payment.id),
                    "tx_ref": payment.tx_ref,
                    "status": payment.status,
                    "amount": format(payment.amount, "f"),
                    "currency": payment.currency_code,
                },
            }
        )
        # One id per payment: a re-sent notice is the same event, which the service records once.
        return body.encode(), self.signature_headers(f"msg_{payment.id.hex}", body, datetime.now(UTC))

    def signature_headers(self, message_id: str, body: str, at: datetime) -> dict[str, str]:
        """Standard Webhooks headers for `body`, signed with the shared secret as of `at`."""
        return {
            "content-type": "application/json",
            "webhook-id": message_id,
            "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": self.webhook.sign(message_id, at, body),
        }

    async def send_webhook_soon(self, payment: SandboxPayment) -> None:
        """`send_webhook` in one of the sandbox's own threads, never one of the app's."""
        await asyncio.get_running_loop().run_in_executor(self._notices, self.send_webhook, payment)

    def send_webhook(self, payment: SandboxPayment) -> None:
        """Deliver the notice; a failure is logged, and verify or reconcile complete the order later."""
        if not self.webhooks_on:
            return
        body, headers = self.signed_webhook(payment)
        try:
            status = self.sender(self.webhook_url, body, headers)
        except Exception:
            logger.exception("sandbox webhook for %s could not be delivered", payment.tx_ref)
            return
        if status >= 300:
            logger.warning("sandbox webhook for %s answered %s", payment.tx_ref, status)


def new_sandbox_payment(
    tx_ref: str, status: GatewayPaymentStatus, amount: Decimal, currency: str
) -> SandboxPayment:
    assert status in (GatewayPaymentStatus.SUCCESSFUL, GatewayPaymentStatus.DECLINED)
    return SandboxPayment(id=new_id(), tx_ref=tx_ref, status=status, amount=amount, currency_code=currency)
