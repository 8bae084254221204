"""Flutterwave's v3 API: create a hosted payment (`POST /payments`, answer `data.link`), verify by
reference (`GET /transactions/verify_by_reference?tx_ref=`), and webhooks signed by the `verif-hash`
header, which carries the secret hash set on the Flutterwave dashboard."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import httpx

from outfitter.models import GatewayPaymentStatus
from outfitter.payments.gateways import (
    CheckoutRequest,
    GatewayError,
    GatewayPayment,
    InvalidSignature,
    WebhookNotice,
)

# Flutterwave's statuses of a transaction, as ours; any other ("pending"...) is still pending.
_STATUSES = {
    "successful": GatewayPaymentStatus.SUCCESSFUL,
    "failed": GatewayPaymentStatus.DECLINED,
    "cancelled": GatewayPaymentStatus.DECLINED,
    "error": GatewayPaymentStatus.DECLINED,
}


class FlutterwaveGateway:
    name = "flutterwave"

    def __init__(
        self, base_url: str, secret_key: str, webhook_hash: str, client: httpx.Client | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.secret_key = secret_key
        self.webhook_hash = webhook_hash
        self.client = client or httpx.Client(timeout=20.0)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret_key}"}

    def _json(self, response: httpx.Response) -> dict[str, Any]:
        try:
            # Amounts as Decimal: no float ever touches money.
            body = json.loads(response.content, parse_float=Decimal)
        except ValueError as exc:
            raise GatewayError(f"Flutterwave answered {response.status_code} with no JSON") from exc
        if not isinstance(body, dict):
            raise GatewayError("Flutterwave answered an unexpected body")
        return body

    def create_checkout(self, checkout: CheckoutRequest) -> str:
        payload: dict[str, Any] = {
            "tx_ref": checkout.tx_ref,
            "amount": format(checkout.amount, "f"),
            "currency": checkout.currency,
            "customer": {"email": checkout.customer_email, "name": checkout.customer_name},
            "customizations": {"title": "Outfitter", "description": checkout.description},
        }
        if checkout.redirect_url:
            payload["redirect_url"] = checkout.redirect_url
        try:
            response = self.client.post(f"{self.base_url}/payments", json=payload, headers=self._headers())
        except httpx.HTTPError as exc:
            raise GatewayError(f"Flutterwave is unreachable: {type(exc).__name__}") from exc
        body = self._json(response)
        data = body.get("data")
        link = data.get("link") if isinstance(data, dict) else None
        if response.status_code >= 300 or body.get("status") != "success" or not isinstance(link, str):
            raise GatewayError(
                f"Flutterwave refused the payment: {body.get('message', response.status_code)}"
            )
        return link

    def verify_webhook(self, body: bytes, headers: Mapping[str, str]) -> WebhookNotice:
        lowered = {key.lower(): value for key, value in headers.items()}
        given = lowered.get("verif-hash", "")
        if not self.webhook_hash or not hmac.compare_digest(given.encode(), self.webhook_hash.encode()):
            raise InvalidSignature("verif-hash is missing or wrong")
        try:
            payload = json.loads(body, parse_float=Decimal)
        except ValueError as exc:
            raise InvalidSignature("the body is not JSON") from exc
        if not isinstance(payload, dict):
            raise InvalidSignature("the payload is not a JSON object")
        data: dict[str, Any] = payload["data"] if isinstance(payload.get("data"), dict) else payload
        tx_ref = data.get("tx_ref") or data.get("txRef")
        if data.get("id") is not None:
            event = payload.get("event") or payload.get("event.type") or "event"
            event_key = f"{event}:{data['id']}:{data.get('status')}"
        else:
            event_key = "sha256:" + hashlib.sha256(body).hexdigest()
        return WebhookNotice(
            event_key=event_key[:200], tx_ref=tx_ref if isinstance(tx_ref, str) else None, payload=data
        )

    def fetch_payment(self, tx_ref: str) -> GatewayPayment | None:
        try:
            response = self.client.get(
                f"{self.base_url}/transactions/verify_by_reference",
                params={"tx_ref": tx_ref},
                headers=self._headers(),
            )
        except httpx.HTTPError as exc:
            raise GatewayError(f"Flutterwave is unreachable: {type(exc).__name__}") from exc
        if response.status_code in (400, 404):
            return None  # Flutterwave knows no transaction with that reference yet
        body = self._json(response)
        data = body.get("data")
        if response.status_code >= 300 or not isinstance(data, dict):
            raise GatewayError(f"Flutterwave could not verify {tx_ref}: {body.get('message')}")
        status = _STATUSES.get(str(data.get("status", "")).lower(), GatewayPaymentStatus.PENDING)
        try:
            amount = Decimal(str(data.get("amount")))
        except InvalidOperation as exc:
            raise GatewayError("Flutterwave answered an amount that is not a number") from exc
        return GatewayPayment(
            tx_ref=str(data.get("tx_ref", "")),
            status=status,
            amount=amount,
            currency=str(data.get("currency", "")).upper(),
            reference=str(data.get("id")) if data.get("id") is not None else None,
        )
