"""Flutterwave's v3 API: create a hosted payment (`POST /payments`, answer `data.link`), verify by
reference (`GET /transactions/verify_by_reference?tx_ref=`), and webhooks signed by the `verif-hash`
header, which carries the secret hash set on the Flutterwave dashboard.

As Flutterwave documents its hosted checkout: a payer whose card fails may retry in the same
checkout session, so a `failed` (or `cancelled`) attempt is not final. We read it as pending, and
bound the session by the transaction's time to live (`session_duration`), after which the
transaction expires: no success can come after it. Timeouts and 5xx are retried with backoff; a
verify that finds no transaction for the reference is told apart from every other refusal."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Mapping
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import httpx

from outfitter.models import GatewayPaymentStatus
from outfitter.payments.gateways.base import (
    CheckoutRequest,
    GatewayError,
    GatewayPayment,
    InvalidPayload,
    InvalidSignature,
    WebhookNotice,
    paid_amount,
)

logger = logging.getLogger("outfitter.payments")

# Only a successful charge settles; failed, cancelled or pending attempts may still be followed by
# a successful retry in the same checkout session (see the module docstring).
_SUCCESSFUL = "successful"
ATTEMPTS = 3  # for timeouts, connection errors and 5xx answers
BACKOFF_SECONDS = 0.5  # doubled after each attempt
MAX_RETRY_ATTEMPT = 5  # card retries Flutterwave allows the payer within one checkout session
_NOT_FOUND = ("no transaction", "not found")


class FlutterwaveGateway:
    name = "flutterwave"

    def __init__(
        self,
        base_url: str,
        secret_key: str,
        webhook_hash: str,
        client: httpx.Client | None = None,
        backoff_seconds: float = BACKOFF_SECONDS,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.secret_key = secret_key
        self.webhook_hash = webhook_hash
        self.client = client or httpx.Client(timeout=20.0)
        self.backoff_seconds = backoff_seconds

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret_key}"}

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The request, retried with backoff on timeouts, connection errors and 5xx answers."""
        delay = self.backoff_seconds
        for attempt in range(1, ATTEMPTS + 1):
            try:
                response = self.client.request(
                    method, f"{self.base_url}{path}", headers=self._headers(), **kwargs
                )
            except httpx.HTTPError as exc:
                if attempt == ATTEMPTS:
                    raise GatewayError(f"Flutterwave is unreachable: {type(exc).__name__}") from exc
            else:
                if response.status_code < 500 or attempt == ATTEMPTS:
                    return response
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

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
        # The checkout stops taking payments before the transaction's time to live ends.
        payload["session_duration"] = max(1, min(checkout.session_minutes, 1440))
        payload["max_retry_attempt"] = MAX_RETRY_ATTEMPT
        response = self._send("POST", "/payments", json=payload)
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
            raise InvalidPayload("the body is not JSON") from exc
        if not isinstance(payload, dict):
            raise InvalidPayload("the payload is not a JSON object")
        data: dict[str, Any] = payload["data"] if isinstance(payload.get("data"), dict) else payload
        tx_ref = data.get("tx_ref") or data.get("txRef")
        if data.get("id") is not None:
            event = payload.get("event") or payload.get("event.type") or "event"
            event_key = f"{event}:{data['id']}:{data.get('status')}"
        else:
            event_key = "sha256:" + hashlib.sha256(body).hexdigest()
        charge = data.get("id")
        charge_id = str(charge) if isinstance(charge, int | str) and not isinstance(charge, bool) else None
        return WebhookNotice(
            event_key=event_key,  # over 200 characters it is refused (a 400), never cut
            tx_ref=tx_ref if isinstance(tx_ref, str) else None,
            payload=data,
            charge_id=charge_id,
        )

    def fetch_payment(self, tx_ref: str, charge_id: str | None = None) -> GatewayPayment | None:
        """By the charge's id when a webhook named one (Flutterwave's advice: the id is what was
        charged), else by reference (verify, reconciliation)."""
        if charge_id is not None:
            response = self._send("GET", f"/transactions/{quote(charge_id, safe='')}/verify")
        else:
            response = self._send("GET", "/transactions/verify_by_reference", params={"tx_ref": tx_ref})
        body = self._json(response)
        message = str(body.get("message", ""))
        if response.status_code in (400, 404) and any(words in message.lower() for words in _NOT_FOUND):
            return None  # Flutterwave knows no charge for that reference yet
        data = body.get("data")
        if response.status_code >= 300 or not isinstance(data, dict):
            # A bad key, a refusal, a malformed answer: not "unpaid", an error to retry later.
            raise GatewayError(f"Flutterwave could not verify {tx_ref}: {response.status_code} {message}")
        successful = str(data.get("status", "")).lower() == _SUCCESSFUL
        status = GatewayPaymentStatus.SUCCESSFUL if successful else GatewayPaymentStatus.PENDING
        amount = paid_amount(data.get("amount"), "Flutterwave")
        if charge_id is not None and data.get("tx_ref") != tx_ref:
            logger.warning(
                "Flutterwave charge %s is for %r, not %r: ignored", charge_id, data.get("tx_ref"), tx_ref
            )
            return None
        return GatewayPayment(
            tx_ref=str(data.get("tx_ref", "")),
            status=status,
            amount=amount,
            currency=str(data.get("currency", "")).upper(),
            reference=str(data.get("id")) if data.get("id") is not None else None,
        )
