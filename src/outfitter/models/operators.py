"""The operator console's people (the service's own staff) and their sign-ins. Of no company: an
operator acts across companies, and a company's console user is never one (docs/console.md)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from outfitter.db.base import Base, IdMixin, TimestampMixin


class OperatorUser(IdMixin, TimestampMixin, Base):
    """An operator, invited by `outfitter operator invite`. TOTP is required: the secret is made
    with the invite and confirmed by a code when the password is set, so an operator who can sign
    in always has a second factor."""

    __tablename__ = "operator_users"

    email: Mapped[str] = mapped_column(String(320), unique=True)  # stored lowered
    password_hash: Mapped[str | None] = mapped_column(String(200))  # argon2id; None until signed up
    invite_hash: Mapped[str | None] = mapped_column(String(64), unique=True)
    invite_expires_at: Mapped[datetime | None]
    deactivated_at: Mapped[datetime | None]
    totp_secret: Mapped[str | None] = mapped_column(String(255))  # sealed (core.sealing)
    totp_enabled_at: Mapped[datetime | None]
    totp_last_step: Mapped[int | None] = mapped_column(BigInteger)

    @property
    def status(self) -> str:
        if self.deactivated_at is not None:
            return "deactivated"
        return "active" if self.password_hash else "invited"


class OperatorSession(Base):
    """A signed-in operator's browser: as `ConsoleSession`, in a table of its own and under a cookie
    of its own, so that a company's session never opens /operator and an operator's never /console."""

    __tablename__ = "operator_sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("operator_users.id", ondelete="CASCADE"), index=True
    )
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    last_seen_at: Mapped[datetime]
    idle_expires_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    user_agent: Mapped[str | None] = mapped_column(String(300))
    awaiting_code: Mapped[bool] = mapped_column(default=False)
