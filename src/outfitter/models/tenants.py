"""Companies (the tenants), their API tokens, and the stored answers of idempotent requests."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, LargeBinary, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from outfitter.db.base import Base, CompanyOwned, IdMixin, TimestampMixin, utcnow


class Company(IdMixin, TimestampMixin, Base):
    __tablename__ = "companies"

    name: Mapped[str] = mapped_column(String(200))


class ScimSettings(CompanyOwned, Base):
    """A company's SCIM provisioning settings (`outfitter company set`); no row means the defaults.
    Company-owned (scoped like every company table); the company is its key, so no other index."""

    __tablename__ = "scim_settings"

    company_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("companies.id", ondelete="CASCADE"), primary_key=True
    )
    # Deactivating an employee opens a retrieval of the devices they hold, paid from Credit.
    offboard_retrieval: Mapped[bool] = mapped_column(default=False)
    # The country (alpha-2) of a user sent without one; without it such a user is refused.
    default_country: Mapped[str | None] = mapped_column(String(2))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class CompanySuspension(Base):
    """A company suspended by an operator: while the row exists its tokens answer 403 and its
    console users cannot sign in. A table of its own (the company is its key), so that a company
    row stays what every revision wrote. Like `ApiToken`, it is read to find (and refuse) the
    tenant, before any company is bound: not a company-scoped table."""

    __tablename__ = "company_suspensions"

    company_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("companies.id", ondelete="CASCADE"), primary_key=True
    )
    suspended_at: Mapped[datetime] = mapped_column(default=utcnow)
    suspended_by: Mapped[str] = mapped_column(String(200))  # the operator, as events name them


class ApiToken(IdMixin, TimestampMixin, Base):
    __tablename__ = "api_tokens"

    company_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("companies.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    # SHA-256 of the token; the token itself is shown once and never stored.
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    scopes: Mapped[str] = mapped_column(String(100))  # space separated, e.g. "read write"
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
    last_used_at: Mapped[datetime | None]

    @property
    def scope_list(self) -> list[str]:
        return self.scopes.split()


class IdempotencyRecord(IdMixin, Base):
    """The first answer to a POST sent with an Idempotency-Key, replayed for 24 hours. Scoped by the
    hash of the bearer token that sent it; `status_code` is null while the first request runs."""

    __tablename__ = "idempotency_records"
    __table_args__ = (UniqueConstraint("token_hash", "key"),)

    token_hash: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(String(200))
    request_hash: Mapped[str] = mapped_column(String(64))
    status_code: Mapped[int | None]
    response_body: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
