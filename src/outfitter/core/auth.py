"""Bearer-token authentication, scopes and per-token rate limiting, as FastAPI dependencies.

An endpoint states what it needs in its signature: `auth: ReadAccess` or `auth: WriteAccess`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from outfitter.core.errors import Forbidden, Unauthorized
from outfitter.core.models import ApiToken, Company
from outfitter.core.ratelimit import RateLimiter
from outfitter.core.tokens import TOKEN_PREFIX, find_token, token_is_live
from outfitter.db.base import utcnow

LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class AuthContext:
    company_id: uuid.UUID
    company_name: str
    token_id: uuid.UUID
    scopes: frozenset[str]
    actor: str  # the name history entries record for changes made with this token


def _bearer_token(request: Request) -> str:
    header = request.headers.get("authorization")
    if not header:
        raise Unauthorized("Authentication required: send the header 'Authorization: Bearer <token>'.")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("Malformed Authorization header: expected 'Bearer <token>'.")
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        raise Unauthorized("Invalid token.")
    return token


def authenticate(request: Request) -> AuthContext:
    token = _bearer_token(request)
    factory: sessionmaker[Session] = request.app.state.sessionmaker
    # Its own short transaction: the lookup and the last-used stamp do not ride on the request's.
    with factory() as session:
        record = find_token(session, token)
        if record is None:
            raise Unauthorized("Invalid token.")
        now = utcnow()
        refusal = token_is_live(record, now)
        if refusal:
            raise Unauthorized(refusal)
        company = session.get(Company, record.company_id)
        assert company is not None  # tokens cascade with their company
        context = AuthContext(
            company_id=company.id,
            company_name=company.name,
            token_id=record.id,
            scopes=frozenset(record.scope_list),
            actor=record.name,
        )
        if record.last_used_at is None or now - record.last_used_at > LAST_USED_RESOLUTION:
            session.execute(update(ApiToken).where(ApiToken.id == record.id).values(last_used_at=now))
            session.commit()
    limiter: RateLimiter = request.app.state.rate_limiter
    limiter.hit(request, str(context.token_id))
    return context


def require_scope(scope: str) -> Callable[[AuthContext], AuthContext]:
    def check(context: Annotated[AuthContext, Depends(authenticate)]) -> AuthContext:
        if scope not in context.scopes:
            raise Forbidden(f"This token lacks the '{scope}' scope needed for this request.")
        return context

    return check


ReadAccess = Annotated[AuthContext, Depends(require_scope("read"))]
WriteAccess = Annotated[AuthContext, Depends(require_scope("write"))]
