"""The web console's people and their sign-ins: console users (one company's, with a role) and
their server-side sessions. A user invited and not yet signed up has an invite and no password."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

from sqlalchemy import BigInteger, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from outfitter.db.base import (
    Base,
    CompanyOwned,
    IdMixin,
    TimestampMixin,
    company_key,
    company_reference,
    str_enum,
    utcnow,
)


class ConsoleRole(StrEnum):
    ADMIN = "admin"  # everything, users included
    VIEWER = "viewer"  # reads (and exports) only


class ConsoleUser(IdMixin, CompanyOwned, TimestampMixin, Base):
    """A person who signs in to the console. The email is unique across companies: the sign-in
    form asks for an email and a password only, and an email names one account (docs/console.md)."""

    __tablename__ = "console_users"
    __table_args__ = (company_key("console_users"),)

    # Stored lowered: the unique index compares addresses in any case.
    email: Mapped[str] = mapped_column(String(320), unique=True)
    role: Mapped[ConsoleRole] = mapped_column(str_enum(ConsoleRole, 16))
    password_hash: Mapped[str | None] = mapped_column(String(200))  # argon2id; None until signed up
    # SHA-256 of the one-time invite token (the link carries the token itself), and its expiry.
    invite_hash: Mapped[str | None] = mapped_column(String(64), unique=True)
    invite_expires_at: Mapped[datetime | None]
    deactivated_at: Mapped[datetime | None]
    # The TOTP second factor (RFC 6238): the shared secret (base32, sealed: core.sealing), set when
    # enrolment starts and kept once a code confirms it (`totp_enabled_at`); the time step of the
    # last code accepted, so that a code is used once.
    totp_secret: Mapped[str | None] = mapped_column(String(255))
    totp_enabled_at: Mapped[datetime | None]
    totp_last_step: Mapped[int | None] = mapped_column(BigInteger)

    @property
    def totp_enabled(self) -> bool:
        return self.totp_enabled_at is not None

    @property
    def status(self) -> str:
        """`invited` (no password yet), `active` or `deactivated`."""
        if self.deactivated_at is not None:
            return "deactivated"
        return "active" if self.password_hash else "invited"


class ConsoleSession(CompanyOwned, Base):
    """A signed-in browser. The cookie carries a random id; only its SHA-256 is stored, so a copy of
    the table signs no one in. Ended by sign-out, by idle time or by its absolute expiry."""

    __tablename__ = "console_sessions"
    indexes_company_id = False  # read by its id's hash, deleted with its user
    __table_args__ = (
        Index("ix_console_sessions_user", "user_id"),
        *company_reference("console_sessions", "user_id", "console_users", ondelete="CASCADE"),
    )

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[uuid.UUID]
    csrf_token: Mapped[str] = mapped_column(String(64))  # the synchronizer token of its forms
    created_at: Mapped[datetime]
    last_seen_at: Mapped[datetime]
    idle_expires_at: Mapped[datetime]
    expires_at: Mapped[datetime]  # absolute: whatever the activity
    user_agent: Mapped[str | None] = mapped_column(String(300))  # as the browser named itself
    # The password was right and the second factor is still to come: this row signs no one in.
    awaiting_code: Mapped[bool] = mapped_column(default=False)


class ConsoleSettings(CompanyOwned, Base):
    """A company's console settings, set by its admins on the Users page; no row means the
    defaults. The company is its key (as `ScimSettings`)."""

    __tablename__ = "console_settings"

    company_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("companies.id", ondelete="CASCADE"), primary_key=True
    )
    # Every user must have a TOTP second factor: one without is sent to enrol before any page.
    require_totp: Mapped[bool] = mapped_column(default=False)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
