"""Console users: invites, passwords (argon2id), sign-in and server-side sessions.

A session's id (256 random bits) is the cookie; only its SHA-256 is stored. The sign-in and the
session lookup find the company (as an API token does), so they read with Core statements on the
session's connection before the session is bound to it; everything after goes through the bound
session like any request of the API.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from importlib import resources

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.orm import Session

from outfitter.core.errors import Conflict, NotFound
from outfitter.db.base import utcnow
from outfitter.db.tenancy import bind_company, parse_uuid
from outfitter.events.schemas import ConsoleUserOut
from outfitter.models import (
    Company,
    CompanySuspension,
    ConsoleRole,
    ConsoleSession,
    ConsoleSettings,
    ConsoleUser,
    EventType,
    OperatorUser,
)
from outfitter.outbox import as_event_data, record_event

INVITE_VALID_FOR = timedelta(hours=72)
IDLE_TIMEOUT = timedelta(hours=2)
ABSOLUTE_TIMEOUT = timedelta(hours=12)
# last_seen_at is written at most this often: a page view is not a write every time.
SEEN_RESOLUTION = timedelta(minutes=1)
MIN_PASSWORD_LENGTH = 12
MAX_PASSWORD_LENGTH = 256
MAX_EMAIL_LENGTH = 320
MAX_USER_AGENT_LENGTH = 300
# The second step of a sign-in (the TOTP code) must come this soon after the password.
CODE_WAIT = timedelta(minutes=5)
OPERATOR_ACTOR = "operator"  # an invite made by the CLI

# argon2-cffi's defaults are RFC 9106's second recommendation (argon2id, 64 MiB, 3 passes).
_hasher = PasswordHasher()
# Verified when no user has the email, so a wrong email costs what a wrong password does.
_UNUSED_HASH = _hasher.hash(secrets.token_urlsafe(16))


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def password_matches(stored: str | None, password: str) -> bool:
    """Whether `password` is the one `stored` hashes; a user without a password is checked against a
    dummy hash, so that the answer takes the same time."""
    try:
        matched: bool = _hasher.verify(stored or _UNUSED_HASH, password[:MAX_PASSWORD_LENGTH])
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False
    return matched and stored is not None


def record_user_event(session: Session, type: EventType, user: ConsoleUser, actor: str) -> None:
    """A `console_user.*` event in the change's own transaction (it reaches webhooks like any):
    the user as `ConsoleUserOut` shows them, which holds no secret."""
    session.flush()
    data = as_event_data(ConsoleUserOut, user)
    record_event(session, type, user.id, data, actor=actor, company_id=user.company_id)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def normal_email(email: str) -> str:
    return email.strip().lower()


@cache
def common_passwords() -> frozenset[str]:
    text = resources.files("outfitter.console").joinpath("common-passwords.txt").read_text("utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def password_problem(password: str) -> str | None:
    """Why a new password is refused, in words a person can act on; None when it is fine."""
    if len(password) < MIN_PASSWORD_LENGTH:
        return f"Use at least {MIN_PASSWORD_LENGTH} characters; a few words together make a good one."
    if len(password) > MAX_PASSWORD_LENGTH:
        return f"Use at most {MAX_PASSWORD_LENGTH} characters."
    if password.lower() in common_passwords():
        return "This password is one of the commonest, which attackers try first: choose another."
    return None


def email_problem(email: str) -> str | None:
    email = normal_email(email)
    local, at, domain = email.partition("@")
    if not at or not local or "." not in domain or len(email) > MAX_EMAIL_LENGTH or " " in email:
        return "Enter an email address such as name@example.com."
    return None


class CompanySuspended(Exception):
    """The password is right but the user's company is suspended by an operator."""


class InviteRefused(ValueError):
    """An invite that cannot be made; the message says why."""


@dataclass(frozen=True)
class Invite:
    user_id: uuid.UUID
    email: str
    role: ConsoleRole
    token: str
    expires_at: datetime


def invite(
    session: Session, company_id: uuid.UUID, email: str, role: ConsoleRole, actor: str = OPERATOR_ACTOR
) -> Invite:
    """Invite `email` to `company_id`'s console (or invite again one who has not signed up: the
    earlier link stops working), recorded as `console_user.invited` by `actor`. `session` is bound
    to the company, or across companies."""
    problem = email_problem(email)
    if problem:
        raise InviteRefused(problem)
    email = normal_email(email)
    if session.connection().execute(select(OperatorUser.id).where(OperatorUser.email == email)).first():
        raise InviteRefused(
            f"{email} is an Outfitter operator: a console user needs an address of their own."
        )
    existing = (
        session.connection()
        .execute(
            select(ConsoleUser.id, ConsoleUser.company_id, ConsoleUser.password_hash).where(
                ConsoleUser.email == email
            )
        )
        .first()
    )
    # An address of another company's user is refused with the words a taken address in this
    # company gets: an admin learns nothing of other companies.
    if existing is not None and (existing.company_id != company_id or existing.password_hash is not None):
        raise InviteRefused(f"{email} already has a console account.")
    token = secrets.token_urlsafe(32)
    expires_at = utcnow() + INVITE_VALID_FOR
    if existing is None:
        user = ConsoleUser(
            company_id=company_id,
            email=email,
            role=role,
            invite_hash=digest(token),
            invite_expires_at=expires_at,
        )
        session.add(user)
        session.flush()
        user_id = user.id
    else:
        user_id = existing.id
        session.execute(
            update(ConsoleUser)
            .where(ConsoleUser.id == user_id)
            .values(role=role, invite_hash=digest(token), invite_expires_at=expires_at, deactivated_at=None)
        )
    invited_user = session.get(ConsoleUser, user_id, populate_existing=True)
    assert invited_user is not None
    record_user_event(session, EventType.CONSOLE_USER_INVITED, invited_user, actor)
    return Invite(user_id, email, role, token, expires_at)


@dataclass(frozen=True)
class Invited:
    user_id: uuid.UUID
    company_id: uuid.UUID
    company_name: str
    email: str


def invited(session: Session, token: str) -> Invited | None:
    """Whom a live invite token is for, or None (unknown, used or expired)."""
    row = (
        session.connection()
        .execute(
            select(
                ConsoleUser.id,
                ConsoleUser.company_id,
                ConsoleUser.email,
                ConsoleUser.invite_hash,
                ConsoleUser.invite_expires_at,
                Company.name,
            )
            .join(Company, Company.id == ConsoleUser.company_id)
            .where(ConsoleUser.invite_hash == digest(token[:200]))
        )
        .first()
    )
    if row is None or row.invite_expires_at is None or row.invite_expires_at <= utcnow():
        return None
    return Invited(row.id, row.company_id, row.name, row.email)


def accept_invite(session: Session, who: Invited, password: str) -> None:
    """Set the invited user's password and spend the invite; binds `session` to their company."""
    bind_company(session, who.company_id)
    session.execute(
        update(ConsoleUser)
        .where(ConsoleUser.id == who.user_id)
        .values(password_hash=hash_password(password), invite_hash=None, invite_expires_at=None)
    )


@dataclass(frozen=True)
class SignedIn:
    """The user of a live session, and what its pages need."""

    user_id: uuid.UUID
    company_id: uuid.UUID
    company_name: str
    email: str
    role: ConsoleRole
    session_hash: str
    csrf_token: str
    totp_enabled: bool = False
    totp_required: bool = False  # by the company's console settings

    @property
    def is_admin(self) -> bool:
        return self.role == ConsoleRole.ADMIN

    @property
    def must_enrol(self) -> bool:
        """The company requires a second factor and this user has none yet."""
        return self.totp_required and not self.totp_enabled

    @property
    def actor(self) -> str:
        """The name events and history record for this user's changes."""
        return f"console:{self.email}"


def check_password(session: Session, email: str, password: str) -> tuple[uuid.UUID, uuid.UUID] | None:
    """(user id, company id) when `password` is the password of the active user `email`; else None,
    in the same time whether the email is unknown or the password wrong."""
    row = (
        session.connection()
        .execute(
            select(
                ConsoleUser.id,
                ConsoleUser.company_id,
                ConsoleUser.password_hash,
                ConsoleUser.deactivated_at,
                CompanySuspension.suspended_at,
            )
            .outerjoin(CompanySuspension, CompanySuspension.company_id == ConsoleUser.company_id)
            .where(ConsoleUser.email == normal_email(email)[:MAX_EMAIL_LENGTH])
        )
        .first()
    )
    matched = password_matches(row.password_hash if row is not None else None, password)
    if not matched or row is None or row.deactivated_at is not None:
        return None
    if row.suspended_at is not None:
        raise CompanySuspended
    return row.id, row.company_id


def open_session(
    session: Session,
    user_id: uuid.UUID,
    company_id: uuid.UUID,
    user_agent: str | None = None,
    awaiting_code: bool = False,
) -> str:
    """A new session for the user (binding `session` to their company); the cookie's value. A new
    id at every sign-in, whatever the browser sent: a planted id never becomes a signed-in one.
    `awaiting_code`: the password was right and the TOTP code is still to come (for CODE_WAIT);
    such a session signs no one in (`resume` refuses it)."""
    bind_company(session, company_id)
    session_id = secrets.token_urlsafe(32)
    now = utcnow()
    session.add(
        ConsoleSession(
            id_hash=digest(session_id),
            user_id=user_id,
            csrf_token=secrets.token_urlsafe(32),
            created_at=now,
            last_seen_at=now,
            idle_expires_at=now + (CODE_WAIT if awaiting_code else IDLE_TIMEOUT),
            expires_at=now + (CODE_WAIT if awaiting_code else ABSOLUTE_TIMEOUT),
            user_agent=(user_agent or None) and user_agent[:MAX_USER_AGENT_LENGTH],
            awaiting_code=awaiting_code,
        )
    )
    session.flush()
    return session_id


_SESSION_WITH_USER = (
    select(
        ConsoleSession.id_hash,
        ConsoleSession.csrf_token,
        ConsoleSession.last_seen_at,
        ConsoleSession.idle_expires_at,
        ConsoleSession.expires_at,
        ConsoleSession.awaiting_code,
        ConsoleUser.id.label("user_id"),
        ConsoleUser.email,
        ConsoleUser.role,
        ConsoleUser.deactivated_at,
        ConsoleUser.totp_enabled_at,
        Company.id.label("company_id"),
        Company.name.label("company_name"),
        CompanySuspension.suspended_at,
        ConsoleSettings.require_totp,
    )
    .join(ConsoleUser, ConsoleUser.id == ConsoleSession.user_id)
    .join(Company, Company.id == ConsoleSession.company_id)
    .outerjoin(CompanySuspension, CompanySuspension.company_id == ConsoleSession.company_id)
    .outerjoin(ConsoleSettings, ConsoleSettings.company_id == ConsoleSession.company_id)
    .where(ConsoleSession.id_hash == bindparam("id_hash"))
)


def resume(session: Session, session_id: str | None) -> SignedIn | None:
    """The signed-in user of the cookie's session, with `session` bound to their company; None for
    no cookie, an unknown session, an expired one, one still awaiting its TOTP code, a
    deactivated user, or a suspended company."""
    if not session_id or len(session_id) > 100:
        return None
    id_hash = digest(session_id)
    row = session.connection().execute(_SESSION_WITH_USER, {"id_hash": id_hash}).first()
    if row is None or not hmac.compare_digest(row.id_hash, id_hash):
        return None
    now = utcnow()
    if row.deactivated_at is not None or row.idle_expires_at <= now or row.expires_at <= now:
        return None
    if row.awaiting_code or row.suspended_at is not None:
        return None
    bind_company(session, row.company_id)
    if now - row.last_seen_at >= SEEN_RESOLUTION:
        session.execute(
            update(ConsoleSession)
            .where(ConsoleSession.id_hash == id_hash)
            .values(last_seen_at=now, idle_expires_at=min(now + IDLE_TIMEOUT, row.expires_at))
        )
    return SignedIn(
        row.user_id,
        row.company_id,
        row.company_name,
        row.email,
        ConsoleRole(row.role),
        id_hash,
        row.csrf_token,
        totp_enabled=row.totp_enabled_at is not None,
        totp_required=bool(row.require_totp),
    )


def end_session(session: Session, user: SignedIn) -> None:
    session.execute(delete(ConsoleSession).where(ConsoleSession.id_hash == user.session_hash))


def end_sessions_of(session: Session, user_id: uuid.UUID) -> None:
    """Sign a user out everywhere (deactivated, role changed, password changed)."""
    session.execute(delete(ConsoleSession).where(ConsoleSession.user_id == user_id))


def sign_in_link(public_url: str, token: str) -> str:
    return f"{public_url.rstrip('/')}/console/invite/{token}"


def company_users(session: Session) -> list[ConsoleUser]:
    """The bound company's console users, in the order they were invited."""
    return list(session.scalars(select(ConsoleUser).order_by(ConsoleUser.created_at, ConsoleUser.id)))


def change_user(
    session: Session, actor: SignedIn, user_id: str, role: ConsoleRole | None, deactivate: bool
) -> ConsoleUser:
    """Change a user's role or deactivate them (ending their sessions); an admin does neither to
    themselves, so that a company always keeps one admin who can sign in. NotFound for another
    company's user (the bound session does not see them)."""
    parsed = parse_uuid(user_id)
    user = session.get(ConsoleUser, parsed) if parsed else None
    if user is None or user.company_id != actor.company_id:
        raise NotFound.record("Console user")
    if user.id == actor.user_id:
        raise Conflict("You cannot change your own role or deactivate yourself: ask another admin.")
    if role is not None and role != user.role:
        user.role = role
        end_sessions_of(session, user.id)  # their pages must not keep the old rights
        record_user_event(session, EventType.CONSOLE_USER_ROLE_CHANGED, user, actor.actor)
    if deactivate and user.deactivated_at is None:
        user.deactivated_at = utcnow()
        user.invite_hash = None
        user.invite_expires_at = None
        end_sessions_of(session, user.id)
        record_user_event(session, EventType.CONSOLE_USER_DEACTIVATED, user, actor.actor)
    session.flush()
    return user
