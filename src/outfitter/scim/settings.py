"""A company's SCIM settings: whether deactivation opens a retrieval, and the default country."""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session

from outfitter.catalog.reference import find_country
from outfitter.models import Company, ScimSettings


def settings_of(session: Session, company_id: uuid.UUID) -> ScimSettings:
    """The company's settings; the defaults (a row not yet written) when it never set any."""
    found = session.get(ScimSettings, company_id)
    return found or ScimSettings(company_id=company_id, offboard_retrieval=False, default_country=None)


def change_settings(
    session: Session,
    company_id: uuid.UUID,
    offboard_retrieval: bool | None = None,
    default_country: str | None = None,
) -> ScimSettings:
    """Set what is given (an empty `default_country` clears it); ValueError names a bad value."""
    if session.get(Company, company_id) is None:
        raise ValueError(f"no company with id {company_id}")
    settings = session.get(ScimSettings, company_id)
    if settings is None:
        settings = ScimSettings(company_id=company_id, offboard_retrieval=False)
        session.add(settings)
    if offboard_retrieval is not None:
        settings.offboard_retrieval = offboard_retrieval
    if default_country is not None:
        if not default_country.strip():
            settings.default_country = None
        else:
            country = find_country(session, default_country)
            if country is None:
                raise ValueError(f"unknown country {default_country!r}: give a name or a two-letter code")
            settings.default_country = country.code
    session.flush()
    return settings
