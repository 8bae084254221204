"""Idempotency-Key on POST: the same key and request within 24 hours replays the first answer; the
same key with another request (method, path, query string or body) is a 409.

How a key is kept, so that a crash leaves it retryable and concurrent retries write once:
- `IdempotencyMiddleware` (pure ASGI, so it sees the exact bytes sent) reads the key's record before
  the request runs: a stored answer is replayed, a live claim is a 409 "still being processed".
- The request's unit of work claims the key in its own transaction (`claim`, an INSERT right after
  authenticating) and stores the answer in that same transaction (`settle`, just before the one
  commit): the answer commits with the work, or neither does. A crash or a killed backend leaves
  nothing, and the retry runs afresh. A concurrent request with the same key waits on the unique
  index for the first's outcome, then replays its answer (SQLite runs one write at a time anyway).
- A request that calls another system ends its transaction first (`UnitOfWork.end_reads`), which
  commits its claim: such a claim is in flight for `CLAIM_LEASE`, after which a retry may take it
  over. An answer is stored only while the claim is pending, so of two claimants one commits.
- Answers given outside a unit of work (the body's shape refused, a typed error that rolled the work
  back) wrote nothing; the middleware stores them after, in a transaction of its own.
- Stored answers are encrypted (AES-GCM) with a key derived from the bearer token, which the
  database never holds (only its SHA-256): a retry by that token replays the answer, a webhook
  endpoint's secret included, while a copy of the database holds no answer in the clear.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import math
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.message import Message as MimeHeader

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import ColumnElement, delete, insert, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from outfitter.core.errors import RETRY_AFTER_SECONDS, DomainError, error_body
from outfitter.db.base import new_id, utcnow
from outfitter.http.auth import refuse_unless_allowed
from outfitter.http.handlers import outage_message
from outfitter.http.middleware import header_value, read_body, replaying, send_error
from outfitter.models import IdempotencyRecord
from outfitter.tenants.tokens import hash_token

logger = logging.getLogger("outfitter")

# How long a committed claim without an answer counts as in flight (see the module docstring).
CLAIM_LEASE = timedelta(seconds=60)
# Where the middleware leaves a keyed request for the unit of work: the ASGI scope's state.
IDEMPOTENCY_STATE = "idempotency"
# Answers worth replaying: success and the client's own mistakes; not auth or rate-limit refusals,
# nor server errors, which a retry should get a fresh chance at.
_UNSTORED = {401, 403, 429}
_NONCE_BYTES = 12


def request_fingerprint(
    method: str, path: str, query: bytes, body: bytes, content_type: str | None = None
) -> str:
    """What a key stands for: method, path, query string and body, each length-prefixed; a
    multipart body without its boundary (see `_without_boundary`)."""
    digest = hashlib.sha256()
    for part in (method.encode(), path.encode(), query, _without_boundary(body, content_type)):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def _without_boundary(body: bytes, content_type: str | None) -> bytes:
    """A multipart/form-data body with its boundary written as one marker: clients draw a new
    boundary for every request (curl, httpx, generated clients), so a retry of the same upload
    with its key was another body, and a 409. The boundary occurs in the body only as the
    delimiter between parts, which is what it is chosen for."""
    if content_type is None or "multipart/form-data" not in content_type.lower():
        return body
    header = MimeHeader()
    header["content-type"] = content_type
    boundary = header.get_boundary()
    if not boundary:
        return body
    return body.replace(b"--" + boundary.encode("utf-8", "replace"), b"--boundary")


class AnswerBox:
    """Seals a stored answer with a key derived from the bearer token: only that token's holder can
    have it replayed, and the database (which keeps the token's SHA-256 only) cannot open it."""

    def __init__(self, token: str, token_hash: str, key: str) -> None:
        self._aead = AESGCM(hmac.digest(token.encode(), b"outfitter idempotency answer v1", "sha256"))
        self._record = f"{token_hash}\n{key}".encode()  # a sealed answer opens only in its own record

    def seal(self, body: bytes) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, body, self._record)

    def open(self, sealed: bytes) -> bytes | None:
        try:
            return self._aead.decrypt(sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:], self._record)
        except (InvalidTag, ValueError):
            return None


@dataclass
class KeyedRequest:
    """A POST sent with an Idempotency-Key: made by the middleware, claimed by the unit of work."""

    token_hash: str
    key: str
    fingerprint: str
    box: AnswerBox
    ttl: timedelta
    claim_id: uuid.UUID | None = None  # the record this request claimed
    claimed_at: datetime | None = None
    done: bool = False  # nothing left for the middleware to store

    def where(self) -> tuple[ColumnElement[bool], ...]:
        return (IdempotencyRecord.token_hash == self.token_hash, IdempotencyRecord.key == self.key)


class Answered(Exception):
    """The key already has its answer (or is in flight elsewhere): answer `response`, run nothing.
    The key's record stays as it is: nothing for the middleware to store after."""

    def __init__(self, request: KeyedRequest, response: Response) -> None:
        super().__init__(response.status_code)
        request.done = True
        self.response = response


def _conflict(message: str, retry_after: int | None = None) -> Response:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse(error_body(message), status_code=409, headers=headers)


def _in_flight(record: IdempotencyRecord | None, now: datetime) -> Response:
    """409 "still being processed". Most requests end within milliseconds, so the retry is asked for
    in RETRY_AFTER_SECONDS, or when the claim's lease ends if that is sooner."""
    remaining = (record.created_at + CLAIM_LEASE - now).total_seconds() if record else RETRY_AFTER_SECONDS
    return _conflict(
        "A request with this Idempotency-Key is still being processed; retry shortly.",
        max(1, min(RETRY_AFTER_SECONDS, math.ceil(remaining))),
    )


def answer_for(record: IdempotencyRecord, request: KeyedRequest, now: datetime) -> Response | None:
    """What a request meets when its key has a live record: the stored answer, a 409, or None when
    the record is a claim whose lease is over, which the request may take over."""
    if record.request_hash != request.fingerprint:
        return _conflict(
            "This Idempotency-Key was already used with a different request (method, path, query "
            "string or body); send a new key with a new request."
        )
    if record.status_code is None or record.response_body is None:
        return _in_flight(record, now) if record.created_at > now - CLAIM_LEASE else None
    body = request.box.open(record.response_body)
    if body is None:  # stored before answers were sealed
        return _conflict("The answer stored for this Idempotency-Key cannot be replayed; send a new key.")
    headers = {"Idempotent-Replayed": "true"}
    return Response(body, status_code=record.status_code, headers=headers, media_type="application/json")


def _live_record(session: Session, request: KeyedRequest, now: datetime) -> IdempotencyRecord | None:
    """The key's record, once records older than the key's lifetime are gone."""
    session.execute(
        delete(IdempotencyRecord).where(*request.where(), IdempotencyRecord.created_at <= now - request.ttl)
    )
    return session.scalars(select(IdempotencyRecord).where(*request.where())).one_or_none()


def claim(session: Session, request: KeyedRequest) -> None:
    """Claim the key in the request's own transaction, or raise `Answered` with what to answer."""
    now = utcnow()
    connection = session.connection()  # the records belong to no company: Core, no tenancy hook
    record = _live_record(session, request, now)
    if record is not None:
        answer = answer_for(record, request, now)
        if answer is not None:
            raise Answered(request, answer)
        # The lease is over: take the claim over. The row stays locked until this request ends.
        taken = connection.execute(
            update(IdempotencyRecord)
            .where(
                IdempotencyRecord.id == record.id,
                IdempotencyRecord.status_code.is_(None),
                IdempotencyRecord.created_at == record.created_at,
            )
            .values(created_at=now)
        ).rowcount
        if not taken:
            raise Answered(request, _in_flight(None, now))
        request.claim_id, request.claimed_at = record.id, now
        return
    claim_id = new_id()
    try:
        connection.execute(
            insert(IdempotencyRecord).values(
                id=claim_id,
                token_hash=request.token_hash,
                key=request.key,
                request_hash=request.fingerprint,
                created_at=now,
            )
        )
    except IntegrityError:
        # A request with this key committed meanwhile (PostgreSQL waited here for its outcome).
        session.rollback()
        record = session.scalars(select(IdempotencyRecord).where(*request.where())).one_or_none()
        now = utcnow()
        answer = answer_for(record, request, now) if record else None
        raise Answered(request, answer or _in_flight(record, now)) from None
    request.claim_id, request.claimed_at = claim_id, now


def settle(session: Session, request: KeyedRequest, response: Response) -> None:
    """Store the answer in the request's transaction, just before it commits; raise `Answered` (409)
    when another claimant of the key stored its answer first (this request's work then rolls back)."""
    if request.claim_id is None:
        return
    stored = (
        session.connection()
        .execute(
            update(IdempotencyRecord)
            .where(IdempotencyRecord.id == request.claim_id, IdempotencyRecord.status_code.is_(None))
            .values(status_code=response.status_code, response_body=request.box.seal(bytes(response.body)))
        )
        .rowcount
    )
    if not stored:
        raise Answered(
            request,
            _conflict(
                "A request with this Idempotency-Key was answered meanwhile; retry to receive its answer."
            ),
        )


def release(session: Session, request: KeyedRequest) -> None:
    """Give up a claim that has no answer (its request failed after committing the claim, as a Card
    payment does before it calls the gateway): a retry with the key then runs afresh at once,
    instead of waiting out CLAIM_LEASE. A stored answer is never released."""
    if request.claim_id is None:
        return
    session.connection().execute(
        delete(IdempotencyRecord).where(
            IdempotencyRecord.id == request.claim_id, IdempotencyRecord.status_code.is_(None)
        )
    )
    request.claim_id = None


class IdempotencyMiddleware:
    def __init__(self, app: ASGIApp, sessions: sessionmaker[Session], ttl: timedelta, prefix: str) -> None:
        self.app = app
        self.sessions = sessions
        self.ttl = ttl
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = header_value(scope, b"idempotency-key") if scope["type"] == "http" else None
        authorization = header_value(scope, b"authorization") if key is not None else None
        if key is None or scope["method"] != "POST" or not scope["path"].startswith(self.prefix):
            await self.app(scope, receive, send)
            return
        if not 1 <= len(key) <= 200:
            await send_error(scope, send, 400, "The Idempotency-Key header must be 1 to 200 characters.", [])
            return
        token = authorization.partition(" ")[2].strip() if authorization else ""
        if not token:
            await self.app(scope, receive, send)  # the app answers 401
            return

        body = await read_body(receive)
        if body is None:
            return  # the client went away before its request was whole: nothing to run or store
        token_hash = hash_token(token)
        request = KeyedRequest(
            token_hash=token_hash,
            key=key,
            fingerprint=request_fingerprint(
                scope["method"],
                scope["path"],
                scope["query_string"],
                body,
                header_value(scope, b"content-type"),
            ),
            box=AnswerBox(token, token_hash, key),
            ttl=self.ttl,
        )
        # A stored answer goes only where the request itself would: within the token's rate limit,
        # to a token still live (revoked or expired, it gets the 401 any request gets).
        allowed = functools.partial(
            refuse_unless_allowed, scope["app"].state, scope.setdefault("state", {}), token, "write"
        )
        try:
            answer = await run_in_threadpool(self._answer_before, request, allowed)
        except DomainError as refusal:
            answer = JSONResponse(
                error_body(refusal.message), status_code=refusal.status_code, headers=refusal.headers
            )
        except SQLAlchemyError as exc:
            outage = outage_message(exc)
            if outage is None:
                raise
            logger.warning("idempotency key not read, database unavailable: %s", type(exc).__name__)
            await send_error(scope, send, 503, outage, [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())])
            return
        if answer is not None:
            await answer(scope, receive, send)
            return
        scope.setdefault("state", {})[IDEMPOTENCY_STATE] = request

        status = 500
        chunks: list[bytes] = []

        async def capturing_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, replaying(body, receive), capturing_send)
        finally:
            if not request.done:
                keep = status < 500 and status not in _UNSTORED
                await run_in_threadpool(
                    self._store_after, request, status if keep else None, b"".join(chunks)
                )

    def _answer_before(self, request: KeyedRequest, allowed: Callable[[], None]) -> Response | None:
        """The key's answer if it has one, once `allowed` has not raised (a DomainError)."""
        with self.sessions() as session:
            now = utcnow()
            record = _live_record(session, request, now)
            session.commit()
            answer = answer_for(record, request, now) if record is not None else None
        if answer is not None:
            allowed()
        return answer

    def _store_after(self, request: KeyedRequest, status: int | None, body: bytes) -> None:
        """Store (or, for `status` None, release) an answer the unit of work did not store: one that
        wrote nothing, so a crash before this costs the retry nothing but running again."""
        with self.sessions() as session:
            changed = 0
            if request.claim_id is not None:  # committed by end_reads, perhaps
                pending = (
                    IdempotencyRecord.id == request.claim_id,
                    IdempotencyRecord.status_code.is_(None),
                    IdempotencyRecord.created_at == request.claimed_at,
                )
                if status is None:
                    session.execute(delete(IdempotencyRecord).where(*pending))
                else:
                    sealed = request.box.seal(body)
                    changed = session.execute(
                        update(IdempotencyRecord)
                        .where(*pending)
                        .values(status_code=status, response_body=sealed)
                    ).rowcount  # type: ignore[attr-defined]
            if status is not None and not changed:
                _live_record(session, request, utcnow())  # an expired record leaves room
                session.add(
                    IdempotencyRecord(
                        token_hash=request.token_hash,
                        key=request.key,
                        request_hash=request.fingerprint,
                        status_code=status,
                        response_body=request.box.seal(body),
                    )
                )
            try:
                session.commit()
            except IntegrityError:
                session.rollback()  # the key is another request's now: its answer stands
