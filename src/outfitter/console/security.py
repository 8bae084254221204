"""A console user's own security: changing their password, the TOTP second factor (RFC 6238, with
pyotp) at enrolment and at sign-in, their live sessions, and the company's "require TOTP" setting.

Each change to a user is a `console_user.*` event with the acting user as actor
(`accounts.record_user_event`). The TOTP secret stays on the server once enrolment is confirmed:
it is shown once, while enrolling, never in an event, and kept sealed (core.sealing).
"""

from __future__ import annotations

import hmac
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import pyotp
import segno
from sqlalchemy import ColumnElement, delete, or_, select, update
from sqlalchemy.orm import Session

from outfitter.config import get_settings
from outfitter.console import accounts
from outfitter.console.accounts import SignedIn
from outfitter.core.sealing import is_sealed_with_first, seal, unseal
from outfitter.db.base import utcnow
from outfitter.db.tenancy import bind_company
from outfitter.events.schemas import ConsoleSettingsOut
from outfitter.models import ConsoleSession, ConsoleSettings, ConsoleUser, EventType, OperatorUser
from outfitter.outbox import as_event_data, record_event

TOTP_ISSUER = "Outfitter"
CODE_DIGITS = 6
# Codes of the step before and after the current one are accepted too (clocks drift by seconds).
CODE_WINDOW = 1
SESSION_REF_LENGTH = 16  # how the sessions list names a session (a prefix of its id's hash)
WRONG_CODE = "The code is wrong or was already used: enter the one your app shows now."


class Refused(ValueError):
    """A change refused; `field` is the form field the message belongs beside."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _user(session: Session, signed: SignedIn) -> ConsoleUser:
    user = session.get(ConsoleUser, signed.user_id)
    assert user is not None  # a live session's user exists (sessions are deleted with it)
    return user


# --- password ------------------------------------------------------------------------------------


def change_password(
    session: Session, signed: SignedIn, current: str, new: str, confirm: str, user_agent: str | None
) -> str:
    """Set a new password (the current one required, the sign-up rules applied), end every session
    of the user and open a new one for this browser: the other sessions are over and this one's id
    changes. Answers the new session's cookie value."""
    user = _user(session, signed)
    if not accounts.password_matches(user.password_hash, current):
        raise Refused("current", "The current password is wrong.")
    problem = accounts.password_problem(new)
    if problem:
        raise Refused("new", problem)
    if new == current:
        raise Refused("new", "The new password is the current one: choose another.")
    if new != confirm:
        raise Refused("confirm", "The two new passwords differ: type the same one twice.")
    user.password_hash = accounts.hash_password(new)
    accounts.record_user_event(session, EventType.CONSOLE_USER_PASSWORD_CHANGED, user, signed.actor)
    accounts.end_sessions_of(session, user.id)
    return accounts.open_session(session, user.id, user.company_id, user_agent)


# --- sessions ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveSession:
    ref: str
    created_at: datetime
    last_seen_at: datetime
    user_agent: str | None
    current: bool


def _live(signed: SignedIn) -> list[ColumnElement[bool]]:
    now = utcnow()
    return [
        ConsoleSession.user_id == signed.user_id,
        ConsoleSession.awaiting_code.is_(False),
        ConsoleSession.idle_expires_at > now,
        ConsoleSession.expires_at > now,
    ]


def live_sessions(session: Session, signed: SignedIn) -> list[LiveSession]:
    """The user's sessions that still sign them in, the most recently seen first."""
    rows = session.scalars(
        select(ConsoleSession).where(*_live(signed)).order_by(ConsoleSession.last_seen_at.desc())
    )
    return [
        LiveSession(
            row.id_hash[:SESSION_REF_LENGTH],
            row.created_at,
            row.last_seen_at,
            row.user_agent,
            row.id_hash == signed.session_hash,
        )
        for row in rows
    ]


def end_other_sessions(session: Session, signed: SignedIn, ref: str | None = None) -> int:
    """End the user's other sessions (only the one `ref` names, when given); how many ended. The
    current session is ended by signing out."""
    statement = delete(ConsoleSession).where(
        ConsoleSession.user_id == signed.user_id, ConsoleSession.id_hash != signed.session_hash
    )
    if ref is not None:
        if len(ref) != SESSION_REF_LENGTH:
            return 0
        statement = statement.where(ConsoleSession.id_hash.startswith(ref, autoescape=True))
    ended: int = session.execute(statement).rowcount  # type: ignore[attr-defined]
    return ended


# --- TOTP ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Enrolment:
    """What an authenticator app needs: the secret as text and as an otpauth:// URI, and a QR code
    of the URI (an SVG drawn here, as a data: URI, so it needs no network and no script)."""

    secret: str
    uri: str
    qr_svg: str


def enrolment(email: str, secret: str) -> Enrolment:
    uri = pyotp.TOTP(secret).provisioning_uri(name=email, issuer_name=TOTP_ISSUER)
    qr = segno.make(uri, error="m")
    return Enrolment(secret, uri, qr.svg_data_uri(scale=4, border=4, dark="#000", light="#fff"))


def matching_step(secret: str, code: str, now: datetime | None = None) -> int | None:
    """The time step whose code `code` is (within CODE_WINDOW of now), or None."""
    code = code.replace(" ", "").strip()
    if len(code) != CODE_DIGITS or not code.isascii() or not code.isdigit():
        return None
    totp = pyotp.TOTP(secret, digits=CODE_DIGITS)
    current = totp.timecode(now or utcnow())
    for step in range(current - CODE_WINDOW, current + CODE_WINDOW + 1):
        if hmac.compare_digest(totp.generate_otp(step), code):
            return step
    return None


def spend_code(
    session: Session,
    user_id: uuid.UUID,
    sealed: str,
    code: str,
    users: type[ConsoleUser] | type[OperatorUser] = ConsoleUser,
) -> bool:
    """Whether `code` is a fresh code of the user's (sealed) key; if so it is spent (a code, or
    one of an earlier step, is not accepted again: one conditional UPDATE, so two requests racing
    spend it once). `users`: the console's users, or the operators'."""
    step = matching_step(open_secret(sealed), code)
    if step is None:
        return False
    spent = session.execute(
        update(users)
        .where(
            users.id == user_id,
            or_(users.totp_last_step.is_(None), users.totp_last_step < step),
        )
        .values(totp_last_step=step)
        .execution_options(synchronize_session="fetch")
    )
    return bool(spent.rowcount)  # type: ignore[attr-defined]


def _keys() -> tuple[str, ...]:
    return tuple(get_settings().secret_keys)


def open_secret(stored: str) -> str:
    """The TOTP key a user's row keeps sealed (core.sealing)."""
    return unseal(stored, _keys())


def seal_secret(secret: str) -> str:
    return seal(secret, _keys())


def pending_enrolment(session: Session, signed: SignedIn) -> Enrolment | None:
    user = _user(session, signed)
    if user.totp_enabled or user.totp_secret is None:
        return None
    return enrolment(user.email, open_secret(user.totp_secret))


def start_enrolment(session: Session, signed: SignedIn) -> Enrolment:
    """A new secret for the user to confirm with a code (replacing one not yet confirmed)."""
    user = _user(session, signed)
    if user.totp_enabled:
        raise Refused("code", "A second factor is already on: turn it off first to enrol a new one.")
    secret = pyotp.random_base32()
    user.totp_secret = seal_secret(secret)
    user.totp_last_step = None
    session.flush()
    return enrolment(user.email, secret)


def confirm_enrolment(session: Session, signed: SignedIn, code: str) -> None:
    """Turn TOTP on once a code of the new secret proves the app has it."""
    user = _user(session, signed)
    if user.totp_enabled or user.totp_secret is None:
        raise Refused("code", "Start the enrolment first: there is no new secret to confirm.")
    if not spend_code(session, user.id, user.totp_secret, code):
        raise Refused("code", WRONG_CODE)
    user.totp_enabled_at = utcnow()
    accounts.record_user_event(session, EventType.CONSOLE_USER_TOTP_ENABLED, user, signed.actor)


def disable(session: Session, signed: SignedIn, code_or_password: str) -> None:
    """Turn TOTP off, proven by a current code or the password; refused while the company
    requires it."""
    user = _user(session, signed)
    if not user.totp_enabled or user.totp_secret is None:
        raise Refused("proof", "The second factor is already off.")
    if signed.totp_required:
        raise Refused("proof", "Your company requires a second factor: it cannot be turned off.")
    proven = accounts.password_matches(user.password_hash, code_or_password) or spend_code(
        session, user.id, user.totp_secret, code_or_password
    )
    if not proven:
        raise Refused("proof", "That is neither a current code nor your password: try again.")
    user.totp_secret = None
    user.totp_enabled_at = None
    user.totp_last_step = None
    accounts.record_user_event(session, EventType.CONSOLE_USER_TOTP_DISABLED, user, signed.actor)


# --- sign-in's second step -------------------------------------------------------------------------


def has_totp(session: Session, user_id: uuid.UUID) -> bool:
    enabled = session.connection().execute(
        select(ConsoleUser.totp_enabled_at).where(ConsoleUser.id == user_id)
    )
    return enabled.scalar() is not None


@dataclass(frozen=True)
class AwaitingCode:
    """A sign-in whose password was right, waiting for its code."""

    id_hash: str
    user_id: uuid.UUID
    company_id: uuid.UUID
    email: str


def awaiting_code(session: Session, session_id: str | None) -> AwaitingCode | None:
    """The sign-in of the cookie's pending session, if it is still within CODE_WAIT."""
    if not session_id or len(session_id) > 100:
        return None
    id_hash = accounts.digest(session_id)
    row = (
        session.connection()
        .execute(
            select(
                ConsoleSession.id_hash,
                ConsoleSession.expires_at,
                ConsoleUser.id,
                ConsoleUser.company_id,
                ConsoleUser.email,
                ConsoleUser.deactivated_at,
            )
            .join(ConsoleUser, ConsoleUser.id == ConsoleSession.user_id)
            .where(ConsoleSession.id_hash == id_hash, ConsoleSession.awaiting_code.is_(True))
        )
        .first()
    )
    if row is None or row.expires_at <= utcnow() or row.deactivated_at is not None:
        return None
    return AwaitingCode(row.id_hash, row.id, row.company_id, row.email)


def complete_sign_in(
    session: Session, pending: AwaitingCode, code: str, user_agent: str | None
) -> str | None:
    """The new session's cookie value when `code` is right (the pending session ends and a new id
    is issued); None when it is not."""
    bind_company(session, pending.company_id)
    secret = session.scalar(select(ConsoleUser.totp_secret).where(ConsoleUser.id == pending.user_id))
    if secret is None or not spend_code(session, pending.user_id, secret, code):
        return None
    session.execute(delete(ConsoleSession).where(ConsoleSession.id_hash == pending.id_hash))
    return accounts.open_session(session, pending.user_id, pending.company_id, user_agent)


# --- the company's setting ---------------------------------------------------------------------------


def require_totp(session: Session) -> bool:
    settings = session.scalar(select(ConsoleSettings))
    return settings is not None and settings.require_totp


def set_require_totp(session: Session, user: SignedIn, value: bool) -> None:
    """Require a second factor of every console user of the company, or not: a
    `console_settings.updated` event when it changes, naming the admin."""
    settings = session.get(ConsoleSettings, user.company_id)
    if settings is not None and settings.require_totp == value:
        return
    if settings is None:
        settings = ConsoleSettings(company_id=user.company_id, require_totp=value)
        session.add(settings)
    else:
        settings.require_totp = value
    session.flush()
    data = as_event_data(ConsoleSettingsOut, settings)
    record_event(
        session,
        EventType.CONSOLE_SETTINGS_UPDATED,
        user.company_id,
        data,
        actor=user.actor,
        company_id=user.company_id,
    )


# --- the keys at rest ----------------------------------------------------------------------------------


def reseal_totp_keys(session: Session) -> int:
    """Seal every TOTP key (console users' and operators') with the first of OUTFITTER_SECRET_KEYS
    (after a new key was put first): answers how many were sealed again. Across companies: an
    operator's command."""
    keys = _keys()
    console = session.scalars(select(ConsoleUser).where(ConsoleUser.totp_secret.is_not(None)))
    operators = session.scalars(select(OperatorUser).where(OperatorUser.totp_secret.is_not(None)))
    count = _reseal(console, keys) + _reseal(operators, keys)
    session.flush()
    return count


def _reseal(users: Iterable[ConsoleUser | OperatorUser], keys: tuple[str, ...]) -> int:
    count = 0
    for user in users:
        if user.totp_secret is not None and not is_sealed_with_first(user.totp_secret, keys):
            user.totp_secret = seal(unseal(user.totp_secret, keys), keys)
            count += 1
    return count
