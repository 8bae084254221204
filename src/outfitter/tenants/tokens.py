"""Companies and API tokens: creation, revocation and lookup. Used by the CLI and by `auth`."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy.orm import Session

from outfitter.core.schemas import visible_on_one_line
from outfitter.db.base import utcnow
from outfitter.models import ApiToken, Company

TOKEN_PREFIX = "otf_"
# `scim`: only the SCIM provisioning API (/scim/v2). `custom_fields:sensitive`: with `read`, the
# values of sensitive custom fields (their endpoints, and exports that ask for them).
SCOPES = ("read", "write", "scim", "custom_fields:sensitive")
DEFAULT_SCOPES = ("read", "write")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


MAX_COMPANY_NAME = 200  # the column's length
MAX_TOKEN_NAME = 200  # the column's length
MAX_TOKEN_DAYS = 36_525


def create_company(session: Session, name: str) -> Company:
    """A new company; ValueError for a name that is empty, too long, or not one visible line (a
    line break would split `company list`, an invisible character make two names look alike)."""
    company = Company(name=checked_company_name(name))
    session.add(company)
    session.flush()
    return company


def checked_company_name(name: str) -> str:
    """`name` stripped; ValueError when it is empty, too long or not one visible line."""
    name = name.strip()
    if not name:
        raise ValueError("the company name is empty")
    return _one_visible_line(name, "the company name", MAX_COMPANY_NAME)


@dataclass(frozen=True)
class IssuedToken:
    record: ApiToken
    token: str  # the only time the plain token exists


def issue_token(
    session: Session,
    company_id: uuid.UUID,
    scopes: list[str] | None = None,
    expires_in_days: int | None = None,
    name: str | None = None,
) -> IssuedToken:
    company = session.get(Company, company_id)
    if company is None:
        raise ValueError(f"no company with id {company_id}")
    chosen = list(dict.fromkeys(scopes or DEFAULT_SCOPES))
    unknown = [scope for scope in chosen if scope not in SCOPES]
    if unknown:
        raise ValueError(f"unknown scope {unknown[0]!r}; choose from {', '.join(SCOPES)}")
    if "scim" in chosen and len(chosen) > 1:  # an IdP's token opens /scim/v2 and nothing else
        raise ValueError(
            "a scim token opens the SCIM API only: create it with --scope scim alone, and another "
            "token for read or write"
        )
    if expires_in_days is not None and not 1 <= expires_in_days <= MAX_TOKEN_DAYS:
        raise ValueError(f"--expires-in-days must be between 1 and {MAX_TOKEN_DAYS:,} (100 years)")
    if name is not None:
        name = _one_visible_line(name.strip(), "--name", MAX_TOKEN_NAME)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)  # 256 bits of entropy
    record = ApiToken(
        company_id=company.id,
        name=name or f"{company.name} API"[:MAX_TOKEN_NAME],
        token_hash=hash_token(token),
        scopes=" ".join(chosen),
        expires_at=utcnow() + timedelta(days=expires_in_days) if expires_in_days else None,
    )
    session.add(record)
    session.flush()
    return IssuedToken(record=record, token=token)


def revoke_token(session: Session, token_id: uuid.UUID) -> datetime | None:
    """Revoke the token (ValueError for an unknown id); when it was revoked already, that time
    (it stays as it was), else None."""
    record = session.get(ApiToken, token_id)
    if record is None:
        raise ValueError(f"no token with id {token_id}")
    if record.revoked_at is not None:
        return record.revoked_at
    record.revoked_at = utcnow()
    return None


class _TokenTimes(Protocol):
    revoked_at: datetime | None
    expires_at: datetime | None


def token_is_live(record: _TokenTimes, now: datetime) -> str | None:
    """None when usable, else why not."""
    if record.revoked_at is not None:
        return "The token has been revoked."
    if record.expires_at is not None and record.expires_at <= now:
        return "The token has expired."
    return None


def _one_visible_line(value: str, what: str, limit: int) -> str:
    """`value` as a person reads it in a list or a log line: visible, on one line (a line break
    would split a listing, an invisible character make two names look alike), at most `limit`."""
    try:
        visible_on_one_line(value)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    if len(value) > limit:
        raise ValueError(f"{what} has {len(value)} characters; at most {limit}")
    return value
