"""Operators: invites (with their TOTP secret), sign-in with a password and a code, and sessions.

The machinery is the company console's (`console.accounts` for argon2id passwords, digests and the
password rules; `console.security` for TOTP codes): only the tables differ, `operator_users` and
`operator_sessions`, which no company owns. TOTP is required: the invite makes the secret, and the
password is only set together with a code of it, so every operator who can sign in has one.
"""

from __future__ import annotations

import hmac
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime

import pyotp
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from outfitter.console import accounts, security
from outfitter.db.base import utcnow
from outfitter.models import ConsoleUser, OperatorSession, OperatorUser

ACTOR_PREFIX = "operator:"


class InviteRefused(ValueError):
    """An operator invite that cannot be made; the message says why."""


@dataclass(frozen=True)
class Invite:
    user_id: uuid.UUID
    email: str
    token: str
    expires_at: datetime


def invite(session: Session, email: str) -> Invite:
    """Invite `email` as an operator (or again, while they have not signed up: the earlier link
    stops working and a new secret is made). A company's console user is never an operator."""
    problem = accounts.email_problem(email)
    if problem:
        raise InviteRefused(problem)
    email = accounts.normal_email(email)
    if session.scalar(select(ConsoleUser.id).where(ConsoleUser.email == email)) is not None:
        raise InviteRefused(
            f"{email} is a company's console user: an operator needs an address of their own."
        )
    user = session.scalar(select(OperatorUser).where(OperatorUser.email == email))
    if user is not None and user.password_hash is not None and user.deactivated_at is None:
        raise InviteRefused(f"{email} is an operator already.")
    token = secrets.token_urlsafe(32)
    if user is None:
        user = OperatorUser(email=email)
        session.add(user)
    user.invite_hash = accounts.digest(token)
    user.invite_expires_at = utcnow() + accounts.INVITE_VALID_FOR
    user.deactivated_at = None
    user.password_hash = None  # a deactivated operator invited again starts anew
    user.totp_secret = security.seal_secret(pyotp.random_base32())
    user.totp_enabled_at = None
    user.totp_last_step = None
    session.flush()
    return Invite(user.id, email, token, user.invite_expires_at)


def invite_link(public_url: str, token: str) -> str:
    return f"{public_url.rstrip('/')}/operator/invite/{token}"


def invited(session: Session, token: str) -> OperatorUser | None:
    """The operator a live invite token is for, or None (unknown, used or expired)."""
    user = session.scalar(
        select(OperatorUser).where(OperatorUser.invite_hash == accounts.digest(token[:200]))
    )
    if user is None or user.invite_expires_at is None or user.invite_expires_at <= utcnow():
        return None
    return user


def accept_invite(session: Session, user: OperatorUser, password: str, confirm: str, code: str) -> str | None:
    """Set the password and turn TOTP on, proven by a code of the invite's secret; the problem in
    words, or None when done."""
    problem = accounts.password_problem(password)
    if problem:
        return problem
    if password != confirm:
        return "The two passwords differ: type the same one twice."
    assert user.totp_secret is not None  # made with the invite
    if not security.spend_code(session, user.id, user.totp_secret, code, OperatorUser):
        return security.WRONG_CODE
    user.password_hash = accounts.hash_password(password)
    user.invite_hash = None
    user.invite_expires_at = None
    user.totp_enabled_at = utcnow()
    session.flush()
    return None


def check_password(session: Session, email: str, password: str) -> uuid.UUID | None:
    """The operator's id when `password` is right for the active operator `email`; the same time
    whether the email is unknown or the password wrong."""
    row = session.execute(
        select(OperatorUser.id, OperatorUser.password_hash, OperatorUser.deactivated_at).where(
            OperatorUser.email == accounts.normal_email(email)[: accounts.MAX_EMAIL_LENGTH]
        )
    ).first()
    matched = accounts.password_matches(row.password_hash if row is not None else None, password)
    if not matched or row is None or row.deactivated_at is not None:
        return None
    return row.id  # type: ignore[no-any-return]


def open_session(
    session: Session, user_id: uuid.UUID, user_agent: str | None = None, awaiting_code: bool = False
) -> str:
    """A new session (a new id at every sign-in); the cookie's value. `awaiting_code`: the password
    was right and the code is still to come, for `accounts.CODE_WAIT`."""
    session_id = secrets.token_urlsafe(32)
    now = utcnow()
    wait = accounts.CODE_WAIT if awaiting_code else accounts.IDLE_TIMEOUT
    session.add(
        OperatorSession(
            id_hash=accounts.digest(session_id),
            user_id=user_id,
            csrf_token=secrets.token_urlsafe(32),
            created_at=now,
            last_seen_at=now,
            idle_expires_at=now + wait,
            expires_at=now + (accounts.CODE_WAIT if awaiting_code else accounts.ABSOLUTE_TIMEOUT),
            user_agent=(user_agent or None) and user_agent[: accounts.MAX_USER_AGENT_LENGTH],
            awaiting_code=awaiting_code,
        )
    )
    session.flush()
    return session_id


@dataclass(frozen=True)
class SignedInOperator:
    user_id: uuid.UUID
    email: str
    session_hash: str
    csrf_token: str

    @property
    def actor(self) -> str:
        """The name events record for this operator's changes."""
        return f"{ACTOR_PREFIX}{self.email}"


def _row(
    session: Session, session_id: str | None, awaiting: bool
) -> tuple[OperatorSession, OperatorUser] | None:
    if not session_id or len(session_id) > 100:
        return None
    id_hash = accounts.digest(session_id)
    found = session.execute(
        select(OperatorSession, OperatorUser)
        .join(OperatorUser, OperatorUser.id == OperatorSession.user_id)
        .where(OperatorSession.id_hash == id_hash)
    ).first()
    if found is None:
        return None
    row, user = found
    now = utcnow()
    if not hmac.compare_digest(row.id_hash, id_hash) or row.awaiting_code is not awaiting:
        return None
    if user.deactivated_at is not None or row.idle_expires_at <= now or row.expires_at <= now:
        return None
    return row, user


def resume(session: Session, session_id: str | None) -> SignedInOperator | None:
    """The operator of the cookie's session; None for none, an unknown, expired or still awaiting
    one, or a deactivated operator. The idle expiry moves at most once a minute."""
    found = _row(session, session_id, awaiting=False)
    if found is None:
        return None
    row, user = found
    now = utcnow()
    if now - row.last_seen_at >= accounts.SEEN_RESOLUTION:
        row.last_seen_at = now
        row.idle_expires_at = min(now + accounts.IDLE_TIMEOUT, row.expires_at)
    return SignedInOperator(user.id, user.email, row.id_hash, row.csrf_token)


def awaiting_code(session: Session, session_id: str | None) -> OperatorSession | None:
    found = _row(session, session_id, awaiting=True)
    return found[0] if found else None


def complete_sign_in(
    session: Session, pending: OperatorSession, code: str, user_agent: str | None
) -> str | None:
    """The new session's cookie value when `code` is right (the pending session ends), else None."""
    secret = session.scalar(select(OperatorUser.totp_secret).where(OperatorUser.id == pending.user_id))
    if secret is None or not security.spend_code(session, pending.user_id, secret, code, OperatorUser):
        return None
    user_id = pending.user_id
    session.execute(delete(OperatorSession).where(OperatorSession.id_hash == pending.id_hash))
    return open_session(session, user_id, user_agent)


def end_session(session: Session, signed: SignedInOperator) -> None:
    session.execute(delete(OperatorSession).where(OperatorSession.id_hash == signed.session_hash))


def deactivate(session: Session, email: str) -> OperatorUser:
    """The operator can no longer sign in, and their sessions end (a lost device: deactivate, then
    invite again). InviteRefused for an unknown address."""
    user = session.scalar(select(OperatorUser).where(OperatorUser.email == accounts.normal_email(email)))
    if user is None:
        raise InviteRefused(f"no operator has the address {accounts.normal_email(email)}")
    if user.deactivated_at is None:
        user.deactivated_at = utcnow()
    user.invite_hash = None
    user.invite_expires_at = None
    session.execute(delete(OperatorSession).where(OperatorSession.user_id == user.id))
    session.flush()
    return user


def operators(session: Session) -> list[OperatorUser]:
    return list(session.scalars(select(OperatorUser).order_by(OperatorUser.created_at)))
