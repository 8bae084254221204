"""Bearer-token authentication and scopes.

`bearer_token` reads the header before anything else runs (401 for a missing or malformed one);
`authenticate` then checks the token inside the request's own transaction, in one statement, and
stamps `last_used_at` at most once a minute. The request pipeline (`http.unit_of_work`) calls both.
"""

from __future__ import annotations

import hmac
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import Executable, bindparam, select, update
from sqlalchemy.orm import Session

from outfitter.core.errors import Forbidden, Unauthorized
from outfitter.db.base import utcnow
from outfitter.models import ApiToken, Company, CompanySuspension
from outfitter.tenants.actor import Actor
from outfitter.tenants.tokens import TOKEN_PREFIX, hash_token, token_is_live

LAST_USED_RESOLUTION = timedelta(minutes=1)


def token_actor(name: str, token_id: uuid.UUID) -> str:
    """How history entries and events name a change made with a token: `token:<name> (<id>)`, the
    name for a reader, the id to find the token by (`outfitter token list`) when names repeat. The
    name is shortened to fit the actor columns (200 characters); the id is always whole."""
    suffix = f" ({token_id})"
    return f"token:{name[: 200 - len('token:') - len(suffix)]}{suffix}"


def bearer_token(authorization: str | None) -> str:
    if not authorization:
        raise Unauthorized("Authentication required: send the header 'Authorization: Bearer <token>'.")
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("Malformed Authorization header: expected 'Bearer <token>'.")
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        raise Unauthorized("Invalid token.")
    return token


# Built once, so it is compiled once.
_TOKEN_WITH_COMPANY = (
    select(
        ApiToken.id,
        ApiToken.token_hash,
        ApiToken.name,
        ApiToken.scopes,
        ApiToken.expires_at,
        ApiToken.revoked_at,
        ApiToken.last_used_at,
        Company.id.label("company_id"),
        Company.name.label("company_name"),
        CompanySuspension.suspended_at,
    )
    .join(Company, Company.id == ApiToken.company_id)
    .outerjoin(CompanySuspension, CompanySuspension.company_id == ApiToken.company_id)
    .where(ApiToken.token_hash == bindparam("digest"))
)


# Both times given: a statement compiled once for asyncpg (db.reads) runs no Python-side onupdate.
# The stamp is best effort, so it never waits: a token row that another request in flight is
# stamping (its lock held until that request commits: a CSV import's second, say) is skipped on
# PostgreSQL, instead of holding every request of the token until then. SQLite has one writer.
STAMP_LAST_USED = (
    update(ApiToken)
    .where(
        ApiToken.id
        == select(ApiToken.id)
        .where(ApiToken.id == bindparam("token_id"))
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    .values(last_used_at=bindparam("now"), updated_at=bindparam("now"))
)


def authenticate(session: Session, token: str, scope: str) -> Actor:
    """The token's company and rights, or 401 (unknown, revoked, expired) / 403 (scope, or the
    company suspended)."""
    context, stamp = _looked_up(session, token, scope)
    if stamp is not None:
        session.execute(STAMP_LAST_USED, stamp)
    return context


def check_access(sessions: Callable[[], Session], token: str, scope: str) -> None:
    """401 or 403 as `authenticate` decides them, in a session of its own that writes nothing (no
    last-used stamp): for a request refused before its unit of work opens (its input)."""
    with sessions() as session:
        _looked_up(session, token, scope)


def refuse_unless_allowed(state: Any, request_state: dict[str, Any], token: str, scope: str) -> None:
    """What ClientWork.open checks before any work, for a request answered without one (refused for
    its input, or an Idempotency-Key's stored answer replayed): the token's rate limit (such a
    request counts, as any other of the token does), then its validity and scope. `state` is the
    app's (its `rate_limiter` and `sessionmaker`)."""
    state.rate_limiter.hit(request_state, hash_token(token))
    check_access(state.sessionmaker, token, scope)


def _looked_up(session: Session, token: str, scope: str) -> tuple[Actor, dict[str, Any] | None]:
    """`check_token` on the token's row, read in `session`."""
    statement, parameters, digest = token_lookup(token)
    row = session.connection().execute(statement, parameters).first()
    return check_token(row, digest, scope)


def token_lookup(token: str) -> tuple[Executable, dict[str, str], str]:
    """The statement that finds a token's row, its parameters, and the digest to check it against.
    Tokens belong to no tenant yet (this finds the tenant): a Core statement, without the ORM."""
    digest = hash_token(token)
    return _TOKEN_WITH_COMPANY, {"digest": digest}, digest


def check_token(row: Any, digest: str, scope: str) -> tuple[Actor, dict[str, Any] | None]:
    """Decide on a token's row (None when no row matched): its context, and the parameters of the
    `last_used_at` stamp when it is due (at most once a minute), else None. 401 / 403 otherwise."""
    # The index found the row; the comparison that decides is constant-time.
    if row is None or not hmac.compare_digest(row.token_hash, digest):
        raise Unauthorized("Invalid token.")
    now = utcnow()
    refusal = token_is_live(row, now)
    if refusal:
        raise Unauthorized(refusal)
    if row.suspended_at is not None:
        raise Forbidden(
            "This company is suspended by Outfitter: its tokens are refused until it is reinstated. "
            "Contact Outfitter's support."
        )
    scopes = frozenset(row.scopes.split())
    if scope not in scopes:
        raise Forbidden(f"This token lacks the '{scope}' scope needed for this request.")
    stale = row.last_used_at is None or now - row.last_used_at > LAST_USED_RESOLUTION
    context = Actor(
        company_id=row.company_id,
        company_name=row.company_name,
        token_id=row.id,
        scopes=scopes,
        name=token_actor(row.name, row.id),
    )
    return context, ({"token_id": row.id, "now": now} if stale else None)
