"""Paying from the console, as the API's initiate routes pay (payments/drafts.py's phases): check
and price a draft, end the reads before a Card payment is registered with the gateway, then write
through the same `complete_*` function, as the signed-in user (actor `console:<email>`).

A double click or a reload makes one transaction: each payment form carries a key drawn when the
form was rendered, and the payment runs through the API's Idempotency-Key mechanism
(`http.idempotency`: `claim` in the request's transaction, `settle` with the answer just before
it commits). The console's answer is where the browser goes next (the gateway's page, or the
transaction's), so a repeat with the same key is sent there too. A repeat that arrives while the
first is still at the gateway waits for its answer. A refused payment leaves nothing, its key
included, and the page it shows carries a fresh key.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Annotated
from urllib.parse import urlencode

from fastapi import Depends, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from outfitter.console.web import MOUNT_PATH, ConsoleWork, console_work, error_page, redirect
from outfitter.core.errors import DomainError, ValidationFailed
from outfitter.http import idempotency
from outfitter.http.idempotency import AnswerBox, KeyedRequest, request_fingerprint
from outfitter.models import TransactionStatus
from outfitter.payments.drafts import Complete, Draft, open_checkout
from outfitter.payments.gateways import registry_of
from outfitter.tenants.tokens import hash_token

KEY_FIELD = "idempotency_key"
MAX_FORM_FIELDS = 400  # a checkout's lines: up to 100, three fields each
# How long a repeat waits for the first request with its key (at the gateway): then it says so.
WAIT_STEP_SECONDS = 0.25
WAIT_STEPS = 60
_UNSIGNED = ("csrf_token", KEY_FIELD)


def new_key() -> str:
    """The key of one rendering of a payment form."""
    return secrets.token_urlsafe(24)


async def payment_form(request: Request) -> dict[str, str]:
    """A payment form's text fields, trimmed (no files)."""
    async with request.form(max_files=0, max_fields=MAX_FORM_FIELDS) as form:
        return {name: value.strip() for name, value in form.items() if isinstance(value, str)}


PaymentForm = Annotated[dict[str, str], Depends(payment_form)]


def transaction_url(tx_ref: str) -> str:
    return f"{MOUNT_PATH}/transactions/{tx_ref}"


def return_url(request: Request) -> str:
    """Where the gateway sends the payer back (it adds `status` and `tx_ref`)."""
    return f"{request.app.state.settings.public_url.rstrip('/')}{MOUNT_PATH}/transactions/return"


def _keyed(request: Request, work: ConsoleWork, form: dict[str, str]) -> KeyedRequest:
    """The form's key as the API keeps an Idempotency-Key: the session's secret stands for the
    bearer token (the answer opens only for this session), the form's fields for the body."""
    key = form.get(KEY_FIELD, "")
    if not 1 <= len(key) <= 200:
        raise ValidationFailed("This form has no payment key: reload the page and try again.")
    secret = work.user.csrf_token
    token_hash = hash_token(f"console-session:{secret}")
    body = urlencode(sorted((name, value) for name, value in form.items() if name not in _UNSIGNED))
    fingerprint = request_fingerprint("POST", request.url.path, b"", body.encode())
    ttl = timedelta(hours=request.app.state.settings.idempotency_ttl_hours)
    return KeyedRequest(token_hash, key, fingerprint, AnswerBox(secret, token_hash, key), ttl)


def pay(
    request: Request,
    work: ConsoleWork,
    form: dict[str, str],
    draft_of: Callable[[Session], Draft],
    complete: Complete,
) -> str:
    """Run one payment for the form's key and answer where the browser goes: the gateway's page
    (Card) or the transaction's. Raises `idempotency.Answered` when the key has an answer (or is
    in flight), and the DomainError that refused it, with nothing written, key included."""
    keyed = _keyed(request, work, form)
    session = work.session
    idempotency.claim(session, keyed)
    try:
        draft = draft_of(session)
        gateways = registry_of(request.app.state)
        if draft.needs_checkout:
            session.commit()  # the reads (and the claim) end before the gateway is asked
            open_checkout(draft, gateways, work.actor)
        transaction = complete(session, work.actor, draft, gateways)
        waiting = transaction.status == TransactionStatus.PENDING and transaction.link
        target = transaction.link if waiting and transaction.link else transaction_url(transaction.tx_ref)
        idempotency.settle(session, keyed, Response(target.encode(), status_code=303))
        return target
    except DomainError:
        session.rollback()
        idempotency.release(session, keyed)  # a claim committed before the gateway call
        session.commit()  # released for good, whatever the page shown next does
        raise


def run_payment(
    request: Request, form: dict[str, str], attempt: Callable[[ConsoleWork], Response]
) -> Response:
    """`attempt` (which calls `pay`) in the user's unit of work; a key already answered sends the
    browser where the first request did, after waiting for it if it is still under way."""
    message = ""
    for _ in range(WAIT_STEPS):
        try:
            with console_work(request, form) as work:
                return attempt(work)
        except idempotency.Answered as answered:
            body = bytes(answered.response.body).decode(errors="replace")
            if answered.response.status_code == 303:
                return redirect(body)
            message = _message_of(body)
            if "still being processed" not in message:
                break
            time.sleep(WAIT_STEP_SECONDS)
    return error_page(
        request,
        409,
        message.replace("Idempotency-Key", "payment form")
        or "This payment is still being started: reload the page in a moment.",
    )


def _message_of(body: str) -> str:
    try:
        found = json.loads(body).get("message", "")
    except (ValueError, AttributeError):
        return ""
    return str(found)
