"""Sending one delivery over HTTP, signed as the Standard Webhooks specification says. No database
here: the worker awaits `send` (many at once, on one event loop) between the short transaction that
claimed the delivery and the one that records a batch of outcomes, so no transaction or row lock is
held while a receiver takes its time."""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aiohttp
from standardwebhooks import Webhook

from outfitter.config import Settings
from outfitter.core.tracing import traceparent
from outfitter.db.base import utcnow
from outfitter.models import ENDPOINT_CONCURRENCY_DEFAULT
from outfitter.webhooks.urls import Unresolvable, UnsafeUrl, pinned_target

USER_AGENT = "Outfitter-Webhooks/2.0"
ANSWER_BYTES = 64 * 1024
# The longest pause a receiver's Retry-After can ask for; a longer one is cut to this.
MAX_RETRY_AFTER = 300.0


@dataclass(frozen=True)
class Outgoing:
    """A claimed delivery with what sending it needs."""

    delivery_id: uuid.UUID
    company_id: uuid.UUID
    endpoint_id: uuid.UUID
    url: str
    event_id: uuid.UUID
    payload: dict[str, Any]
    secrets: tuple[str, ...]  # the current secret first, then the previous one during a rotation
    # The most sends to its endpoint at once, as its company set it (the worker may send fewer).
    concurrency: int = ENDPOINT_CONCURRENCY_DEFAULT
    # The trace of the request that caused it, sent as `traceparent` (core.tracing).
    trace_id: str | None = None


@dataclass(frozen=True)
class Outcome:
    attempted_at: datetime
    status_code: int | None
    error: str | None
    duration_ms: int
    retry_after: float | None = None  # seconds, from a 429's or 503's Retry-After (bounded)

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300

    @property
    def gone(self) -> bool:
        return self.status_code == 410


def body_of(payload: dict[str, Any]) -> str:
    """The exact text sent and signed (compact, deterministic: every attempt sends the same bytes)."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


@functools.lru_cache(maxsize=1024)
def _signer(secret: str) -> Webhook:
    """The library's signer of a secret, made once (it decodes the secret's base64) for its sends."""
    return Webhook(secret)


def signature_headers(msg_id: str, body: str, secrets: Sequence[str], now: datetime) -> dict[str, str]:
    """`webhook-id`, `webhook-timestamp` and `webhook-signature` (one `v1,...` per secret)."""
    signatures = " ".join(_signer(secret).sign(msg_id, now, body) for secret in secrets)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signatures,
    }


def make_client(settings: Settings, connections: int) -> aiohttp.ClientSession:
    """The worker's HTTP client, made inside its event loop. aiohttp rather than httpx: httpcore's
    pool checks every pooled connection (a getpeername and a poll each) on every request, which
    was a third of the worker's CPU at 64 connections; aiohttp's pool does not."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=connections, limit_per_host=0),
        # The whole attempt's deadline is `send`'s; the client's own is the same figure, a backstop.
        timeout=aiohttp.ClientTimeout(total=settings.webhook_timeout_seconds),
        trust_env=False,  # no proxy from the environment: the address checked is the one connected to
        headers={"user-agent": USER_AGENT},
    )


async def send(client: aiohttp.ClientSession, outgoing: Outgoing, settings: Settings) -> Outcome:
    """One attempt, within `webhook_timeout_seconds` all told (resolving, connecting, sending and
    the answer's status and headers): a receiver trickling its answer a byte at a time cannot hold
    a send longer, and so a send never outlives its lease (dispatch.lease_seconds)."""
    attempted_at = utcnow()
    started = time.perf_counter()

    def outcome(status_code: int | None, error: str | None, wait: float | None = None) -> Outcome:
        elapsed = int((time.perf_counter() - started) * 1000)
        return Outcome(attempted_at, status_code, error[:500] if error else None, elapsed, wait)

    try:
        async with asyncio.timeout(settings.webhook_timeout_seconds):
            return await _attempt(client, outgoing, settings, attempted_at, outcome)
    except TimeoutError:
        return outcome(None, f"No answer within {settings.webhook_timeout_seconds:g} s.")


async def _skim(response: aiohttp.ClientResponse) -> None:
    """Read up to ANSWER_BYTES of the answer's body and drop it; a longer body costs the
    connection (it is closed, not reused), not the memory."""
    read = 0
    async for chunk in response.content.iter_any():
        read += len(chunk)
        if read > ANSWER_BYTES:
            return


async def _attempt(
    client: aiohttp.ClientSession,
    outgoing: Outgoing,
    settings: Settings,
    attempted_at: datetime,
    outcome: Callable[[int | None, str | None, float | None], Outcome],
) -> Outcome:
    try:
        # Resolving blocks (getaddrinfo): in a thread. With private receivers allowed nothing is
        # resolved here, and the hop is skipped.
        target = (
            pinned_target(outgoing.url, settings)
            if settings.webhook_allow_private
            else await asyncio.to_thread(pinned_target, outgoing.url, settings)
        )
    except UnsafeUrl as exc:
        return outcome(None, f"Refused: {exc}.", None)
    except Unresolvable as exc:
        return outcome(None, f"The host does not resolve: {exc}.", None)
    body = body_of(outgoing.payload)
    headers = {
        "content-type": "application/json",
        **signature_headers(str(outgoing.event_id), body, outgoing.secrets, attempted_at),
    }
    if target.host_header:
        headers["host"] = target.host_header
    if outgoing.trace_id:
        headers["traceparent"] = traceparent(outgoing.trace_id)
    try:
        async with client.post(
            target.url,
            data=body.encode(),
            headers=headers,
            # A 3xx is a failure: a receiver registers its final URL, and a redirect could point
            # inside the network.
            allow_redirects=False,
            # The name the certificate must match (and SNI), when the URL holds the checked address.
            server_hostname=target.sni_hostname,
        ) as response:
            code = response.status  # only the status decides; the body is read (a little of
            await _skim(response)  # it) so that the connection can serve the next send
            wait = retry_after(response.headers.get("retry-after"), utcnow()) if code in (429, 503) else None
    except TimeoutError:
        return outcome(None, f"No answer within {settings.webhook_timeout_seconds:g} s.", None)
    except aiohttp.ClientError as exc:
        return outcome(None, failure_of(exc), None)
    return outcome(code, None if 200 <= code < 300 else f"The receiver answered {code}.", wait)


def retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds a Retry-After header asks to wait (delay-seconds or an HTTP date, RFC 9110), at most
    MAX_RETRY_AFTER; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(MAX_RETRY_AFTER, float(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return min(MAX_RETRY_AFTER, max(0.0, (when - now).total_seconds()))


def failure_of(error: aiohttp.ClientError) -> str:
    """What a failed send tells the endpoint's owner (the delivery's `last_error`, the worker's log):
    in our words, never the library's text, which names the address the host resolved to and
    its internals (`Cannot connect to host 10.0.0.5:443 ssl:default [...]`)."""
    if isinstance(error, aiohttp.ClientSSLError):
        return "The TLS handshake with the receiver failed: its certificate is not trusted or not its host's."
    if isinstance(error, aiohttp.ClientConnectorDNSError):
        return "The host does not resolve."
    if isinstance(error, aiohttp.ClientConnectorError):
        reason = os.strerror(error.errno).lower() if error.errno else "the connection failed"
        return f"Could not connect to the receiver: {reason}."
    if isinstance(error, aiohttp.ServerDisconnectedError):
        return "The receiver closed the connection without answering."
    if isinstance(error, aiohttp.ClientResponseError | aiohttp.ClientPayloadError):
        return "The receiver's answer is not valid HTTP."
    return f"The send failed ({type(error).__name__})."
