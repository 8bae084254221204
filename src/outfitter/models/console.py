"""The web console's people and their sign-ins: console users (one company's, with a role) and
their server-side sessions. A user invited and not yet signed up has an invite and no password."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

from sqlalchemy import Index, String
from sqlalchemy.orm import Mapped, mapped_column

from outfitter.db.base import (
    Base,
    CompanyOwned,
    IdMixin,
    TimestampMixin,
    company_key,
    company_reference,
    str_enum,
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
