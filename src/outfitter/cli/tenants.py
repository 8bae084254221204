"""Tenants and their access: `company create/list` and `token list/create/revoke`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from outfitter.cli.common import JsonFlag, app, emit, fail, iso_or_none, parse_id, unit_of_work

company_app = typer.Typer(help="Companies (tenants).", no_args_is_help=True)
token_app = typer.Typer(help="API tokens.", no_args_is_help=True)
app.add_typer(company_app, name="company")
app.add_typer(token_app, name="token")


@company_app.command("create")
def company_create(
    name: str,
    allow_same_name: Annotated[
        bool, typer.Option("--allow-same-name", help="Create it even if a company has this name")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Create a company (refused if one has the same name, in any case: a setup script run twice)."""
    from sqlalchemy import func, select

    from outfitter.console.operator.actions import create_company
    from outfitter.models import Company
    from outfitter.payments.orders import OPERATOR_ACTOR

    with unit_of_work() as session:
        same = session.execute(
            select(Company.id, Company.name).where(func.lower(Company.name) == name.strip().lower())
        )
        existing = same.first()
        if existing is not None and not allow_same_name:
            fail(
                f"a company named {existing.name!r} exists already (id {existing.id}): use it, or give "
                "--allow-same-name to create another"
            )
        try:
            company = create_company(session, name, OPERATOR_ACTOR)
        except ValueError as exc:
            fail(str(exc))
        payload = {"id": str(company.id), "name": company.name}
    emit(as_json, payload, f"created company {payload['name']} with id {payload['id']}")


@company_app.command("list")
def company_list(as_json: JsonFlag = False) -> None:
    """List the companies, oldest first, with how many live tokens each has."""
    from sqlalchemy import func, or_, select

    from outfitter.db.base import utcnow
    from outfitter.models import ApiToken, Company

    with unit_of_work() as session:
        live_tokens = (
            select(func.count())
            .where(
                ApiToken.company_id == Company.id,
                ApiToken.revoked_at.is_(None),
                or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > utcnow()),
            )
            .scalar_subquery()
        )
        rows = session.execute(
            select(Company.id, Company.name, Company.created_at, live_tokens).order_by(Company.created_at)
        ).all()
        companies = [
            {"id": str(id_), "name": name, "created_at": iso_or_none(created), "live_tokens": tokens}
            for id_, name, created, tokens in rows
        ]
    lines = [
        f"{c['id']}  {c['name']}  (created {c['created_at']}, {c['live_tokens']} live token(s))"
        for c in companies
    ]
    emit(as_json, {"companies": companies}, "\n".join(lines) or "no companies yet")


@company_app.command("set")
def company_set(
    company_id: str,
    scim_offboard_retrieval: Annotated[
        str | None,
        typer.Option(
            "--scim-offboard-retrieval",
            help="on: deactivating an employee through SCIM opens a retrieval of their devices, "
            "paid from Credit; off: it only offboards them",
        ),
    ] = None,
    scim_default_country: Annotated[
        str | None,
        typer.Option(
            "--scim-default-country",
            help="Country (name or two-letter code) of SCIM users sent without one; '' clears it",
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Change a company's settings (SCIM provisioning)."""
    from outfitter.scim.settings import change_settings

    switch = {"on": True, "off": False, None: None}
    if scim_offboard_retrieval not in switch:
        fail("--scim-offboard-retrieval takes on or off")
    with unit_of_work() as session:
        try:
            settings = change_settings(
                session,
                parse_id(company_id, "the company id"),
                switch[scim_offboard_retrieval],
                scim_default_country,
            )
        except ValueError as exc:
            fail(str(exc))
        payload = {
            "id": company_id,
            "scim_offboard_retrieval": settings.offboard_retrieval,
            "scim_default_country": settings.default_country,
        }
    retrieval = "on" if payload["scim_offboard_retrieval"] else "off"
    country = payload["scim_default_country"] or "none"
    text = f"company {company_id}: SCIM offboard retrieval {retrieval}, default country {country}"
    emit(as_json, payload, text)


@token_app.command("list")
def token_list(
    company_id: Annotated[str | None, typer.Argument(help="Only this company's")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List tokens: id, company, scopes, expiry, last use, revocation. Never the token itself,
    which only its hash stands for."""
    from sqlalchemy import select

    from outfitter.db.base import utcnow
    from outfitter.models import ApiToken, Company
    from outfitter.tenants.tokens import token_is_live

    statement = select(ApiToken).order_by(ApiToken.created_at)
    company = parse_id(company_id, "COMPANY_ID") if company_id is not None else None
    if company is not None:
        statement = statement.where(ApiToken.company_id == company)
    now = utcnow()
    with unit_of_work() as session:
        if company is not None and session.get(Company, company) is None:
            fail(f"no company with id {company}")
        tokens: list[dict[str, Any]] = [
            {
                "id": str(token.id),
                "company_id": str(token.company_id),
                "name": token.name,
                "scopes": token.scope_list,
                "created_at": iso_or_none(token.created_at),
                "expires_at": iso_or_none(token.expires_at),
                "last_used_at": iso_or_none(token.last_used_at),
                "revoked_at": iso_or_none(token.revoked_at),
                "live": token_is_live(token, now) is None,
            }
            for token in session.scalars(statement)
        ]
    lines = [
        f"{t['id']}  {t['name']!r}  company {t['company_id']}  {' '.join(t['scopes'])}"
        f"  expires {t['expires_at'] or 'never'}"
        f"  last used {t['last_used_at'] or 'never'}"
        f"{'' if t['live'] else '  REVOKED' if t['revoked_at'] else '  EXPIRED'}"
        for t in tokens
    ]
    emit(as_json, {"tokens": tokens}, "\n".join(lines) or "no tokens")


@token_app.command("create")
def token_create(
    company_id: str,
    scope: Annotated[
        list[str] | None,
        typer.Option(
            "--scope",
            help="read, write, scim (the SCIM provisioning API only) or custom_fields:sensitive "
            "(reading sensitive custom fields); repeat for several",
        ),
    ] = None,
    expires_in_days: Annotated[int | None, typer.Option(help="Days until the token expires")] = None,
    name: Annotated[
        str | None,
        typer.Option(help="What the token is for (the activity log names it); default: '<company> API'"),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create an API token for a company. The token is shown once, now."""
    from outfitter.console.operator.actions import issue_token
    from outfitter.core.errors import NotFound
    from outfitter.payments.orders import OPERATOR_ACTOR

    company_uuid = parse_id(company_id, "COMPANY_ID")
    with unit_of_work() as session:
        try:
            issued = issue_token(session, company_uuid, scope, expires_in_days, name, OPERATOR_ACTOR)
        except NotFound:
            fail(f"no company with id {company_uuid}")
        except ValueError as exc:
            fail(str(exc))
        payload: dict[str, Any] = {
            "id": str(issued.record.id),
            "name": issued.record.name,
            "token": issued.token,
            "scopes": issued.record.scope_list,
            "expires_at": iso_or_none(issued.record.expires_at),
        }
    emit(
        as_json,
        payload,
        f"token {payload['id']} {payload['name']!r} ({' '.join(payload['scopes'])}): {payload['token']}",
    )


@token_app.command("revoke")
def token_revoke(token_id: str, as_json: JsonFlag = False) -> None:
    """Revoke a token; requests with it answer 401 from now on."""
    from outfitter.console.operator.actions import revoke_token
    from outfitter.core.errors import NotFound
    from outfitter.payments.orders import OPERATOR_ACTOR

    token_uuid = parse_id(token_id, "TOKEN_ID")
    with unit_of_work() as session:
        try:
            _, revoked_before = revoke_token(session, token_uuid, OPERATOR_ACTOR)
        except NotFound:
            fail(f"no token with id {token_uuid}")
    # Revoked before: nothing to do, and a script may run it twice: still exit 0.
    payload = {"id": str(token_uuid), "revoked": True, "revoked_before": iso_or_none(revoked_before)}
    if revoked_before is not None:
        emit(as_json, payload, f"token {token_id} was already revoked, at {iso_or_none(revoked_before)}")
    else:
        emit(as_json, payload, f"token {token_id} revoked")
