"""Idempotency-Key on POST: the same key and body within 24 hours replays the first answer; the
same key with another body is a 409. Pure ASGI middleware, so it sees the exact bytes sent."""

from __future__ import annotations

import hashlib
import logging
from datetime import timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from outfitter.core.errors import RETRY_AFTER_SECONDS
from outfitter.core.handlers import outage_message
from outfitter.core.middleware import header_value, send_error
from outfitter.core.tokens import hash_token
from outfitter.db.base import utcnow
from outfitter.models import IdempotencyRecord

logger = logging.getLogger("outfitter")

# Answers worth replaying: success and the client's own mistakes; not auth or rate-limit refusals,
# nor server errors, which a retry should get a fresh chance at.
_UNSTORED = {401, 403, 429}


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
            await send_error(send, 400, "The Idempotency-Key header must be 1 to 200 characters.", [])
            return
        if not authorization:
            await self.app(scope, receive, send)  # the app answers 401
            return

        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        token_hash = hash_token(authorization.partition(" ")[2].strip())
        request_hash = hashlib.sha256(
            scope["method"].encode() + b" " + scope["path"].encode() + b"\n" + body
        ).hexdigest()

        try:
            claim = await run_in_threadpool(self._claim, token_hash, key, request_hash)
        except SQLAlchemyError as exc:
            outage = outage_message(exc)
            if outage is None:
                raise
            logger.warning("idempotency key not claimed, database unavailable: %s", type(exc).__name__)
            await send_error(send, 503, outage, [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())])
            return
        if isinstance(claim, IdempotencyRecord):
            await self._replay(send, claim, request_hash)
            return

        sent_body = False

        async def replay_receive() -> Message:
            nonlocal sent_body
            if sent_body:
                return {"type": "http.disconnect"}
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}

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
            await self.app(scope, replay_receive, capturing_send)
        finally:
            keep = status < 500 and status not in _UNSTORED
            await run_in_threadpool(self._settle, token_hash, key, status if keep else None, b"".join(chunks))

    def _claim(self, token_hash: str, key: str, request_hash: str) -> IdempotencyRecord | None:
        """Insert a pending record for this key, or return the live record that already holds it."""
        with self.sessions() as session:
            cutoff = utcnow() - self.ttl
            session.execute(
                delete(IdempotencyRecord).where(
                    IdempotencyRecord.token_hash == token_hash,
                    IdempotencyRecord.key == key,
                    IdempotencyRecord.created_at < cutoff,
                )
            )
            session.add(IdempotencyRecord(token_hash=token_hash, key=key, request_hash=request_hash))
            try:
                session.commit()
                return None
            except IntegrityError:
                session.rollback()
            return session.scalars(
                select(IdempotencyRecord).where(
                    IdempotencyRecord.token_hash == token_hash, IdempotencyRecord.key == key
                )
            ).one()

    def _settle(self, token_hash: str, key: str, status: int | None, body: bytes) -> None:
        where = (IdempotencyRecord.token_hash == token_hash, IdempotencyRecord.key == key)
        with self.sessions() as session:
            if status is None:
                session.execute(delete(IdempotencyRecord).where(*where))
            else:
                session.execute(
                    update(IdempotencyRecord).where(*where).values(status_code=status, response_body=body)
                )
            session.commit()

    async def _replay(self, send: Send, record: IdempotencyRecord, request_hash: str) -> None:
        if record.request_hash != request_hash:
            await send_error(
                send, 409, "This Idempotency-Key was already used with a different request body.", []
            )
            return
        if record.status_code is None or record.response_body is None:
            await send_error(
                send, 409, "A request with this Idempotency-Key is still being processed; retry shortly.", []
            )
            return
        headers: list[tuple[bytes, bytes]] = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(record.response_body)).encode()),
            (b"idempotent-replayed", b"true"),
        ]
        await send({"type": "http.response.start", "status": record.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": record.response_body})
