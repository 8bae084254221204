"""The operator's companies: the list and a new one; each company's settings, suspension, tokens,
console users and wallet (credit with a reason). Every change goes through `operator.actions`,
which the CLI calls too, and is an event under the operator's name."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from sqlalchemy import func, select

from outfitter.console import accounts as console_accounts
from outfitter.console.operator import actions
from outfitter.console.operator.web import MOUNT_PATH, OperatorWork, operator_work, page, render
from outfitter.console.web import redirect
from outfitter.core.errors import DomainError
from outfitter.core.money import decimal_text
from outfitter.db.tenancy import bind_company
from outfitter.models import Company, CompanySuspension, ConsoleRole, ConsoleUser, ScimSettings
from outfitter.payments.presenters import wallet_summary
from outfitter.tenants.tokens import SCOPES

router = APIRouter(include_in_schema=False)
FormText = Annotated[str, Form(max_length=1000)]


def _companies(
    request: Request, work: OperatorWork, status: int = 200, error: str = "", name: str = ""
) -> Response:
    users = select(func.count()).where(ConsoleUser.company_id == Company.id).scalar_subquery()
    rows = work.session.execute(
        select(Company, users, CompanySuspension.suspended_at)
        .outerjoin(CompanySuspension, CompanySuspension.company_id == Company.id)
        .order_by(Company.created_at)
    ).all()
    return render(
        request, "companies.html", status, user=work.user, nav="companies", rows=rows, error=error, name=name
    )


@router.get("/")
@page
def companies_page(request: Request) -> Response:
    with operator_work(request) as work:
        return _companies(request, work)


@router.post("/companies")
@page
def create_company(request: Request, name: FormText = "", csrf_token: FormText = "") -> Response:
    with operator_work(request, {"csrf_token": csrf_token}) as work:
        try:
            created = actions.create_company(work.session, name, work.user.actor)
        except ValueError as exc:
            return _companies(request, work, 422, f"{str(exc).capitalize()}.", name)
        target = f"{MOUNT_PATH}/companies/{created.id}?saved=created"
    return redirect(target)


def _company(
    request: Request, work: OperatorWork, company_id: str, status: int = 200, **context: Any
) -> Response:
    found = actions.company(work.session, company_id)
    bind_company(work.session, found.id)
    scim = work.session.get(ScimSettings, found.id)
    return render(
        request,
        "company.html",
        status,
        user=work.user,
        nav="companies",
        company=found,
        suspension=actions.suspension(work.session, found.id),
        scim=scim,
        tokens=actions.company_tokens(work.session, found.id),
        users=console_accounts.company_users(work.session),
        wallet=wallet_summary(work.session),
        roles=list(ConsoleRole),
        scopes=SCOPES,
        saved=request.query_params.get("saved", ""),
        errors=context.pop("errors", {}),
        **context,
    )


@router.get("/companies/{company_id}")
@page
def company_page(request: Request, company_id: str) -> Response:
    with operator_work(request) as work:
        return _company(request, work, company_id)


@router.post("/companies/{company_id}/settings")
@page
def change_settings(
    request: Request,
    company_id: str,
    name: FormText = "",
    offboard_retrieval: FormText = "",
    default_country: FormText = "",
    csrf_token: FormText = "",
) -> Response:
    with operator_work(request, {"csrf_token": csrf_token}) as work:
        try:
            actions.update_company(
                work.session, company_id, name, offboard_retrieval == "on", default_country, work.user.actor
            )
        except ValueError as exc:
            work.session.rollback()
            return _company(request, work, company_id, 422, errors={"settings": f"{str(exc).capitalize()}."})
    return redirect(f"{MOUNT_PATH}/companies/{company_id}?saved=settings")


@router.post("/companies/{company_id}/suspension")
@page
def change_suspension(
    request: Request, company_id: str, suspend: FormText = "", csrf_token: FormText = ""
) -> Response:
    with operator_work(request, {"csrf_token": csrf_token}) as work:
        if suspend == "yes":
            actions.suspend_company(work.session, company_id, work.user.actor)
        else:
            actions.reinstate_company(work.session, company_id, work.user.actor)
    return redirect(
        f"{MOUNT_PATH}/companies/{company_id}?saved={'suspended' if suspend == 'yes' else 'reinstated'}"
    )


@router.post("/companies/{company_id}/tokens")
@page
def create_token(
    request: Request,
    company_id: str,
    name: FormText = "",
    scopes: Annotated[list[str] | None, Form(max_length=20)] = None,
    expires_in_days: FormText = "",
    csrf_token: FormText = "",
) -> Response:
    with operator_work(request, {"csrf_token": csrf_token}) as work:
        days = expires_in_days.strip()
        try:
            if days and not days.isdigit():
                raise ValueError("give the days until it expires as a whole number, or leave it empty")
            issued = actions.issue_token(
                work.session,
                company_id,
                scopes or None,
                int(days) if days else None,
                name or None,
                work.user.actor,
            )
        except ValueError as exc:
            work.session.rollback()
            message = f"{str(exc).capitalize().replace('--expires-in-days', 'The days until it expires')}."
            return _company(request, work, company_id, 422, errors={"token": message})
        work.session.flush()
        return _company(request, work, company_id, 201, new_token=issued.token)


@router.post("/tokens/{token_id}/revoke")
@page
def revoke_token(request: Request, token_id: str, csrf_token: FormText = "") -> Response:
    with operator_work(request, {"csrf_token": csrf_token}) as work:
        token, _ = actions.revoke_token(work.session, token_id, work.user.actor)
        company_id = token.company_id
    return redirect(f"{MOUNT_PATH}/companies/{company_id}?saved=revoked")


@router.post("/companies/{company_id}/users")
@page
def invite_user(
    request: Request, company_id: str, email: FormText = "", role: FormText = "", csrf_token: FormText = ""
) -> Response:
    with operator_work(request, {"csrf_token": csrf_token}) as work:
        try:
            invite = actions.invite_console_user(work.session, company_id, email, role, work.user.actor)
        except ValueError as exc:
            work.session.rollback()
            return _company(request, work, company_id, 422, errors={"invite": str(exc)}, invite_email=email)
        link = console_accounts.sign_in_link(request.app.state.settings.public_url, invite.token)
        return _company(request, work, company_id, 201, invite_link=link)


@router.post("/companies/{company_id}/credit")
@page
def credit(
    request: Request,
    company_id: str,
    currency: FormText = "",
    amount: FormText = "",
    reason: FormText = "",
    csrf_token: FormText = "",
) -> Response:
    with operator_work(request, {"csrf_token": csrf_token}) as work:
        value = decimal_text(amount.strip())
        try:
            if value is None:
                raise DomainError("Give the amount as a number such as 1500.00 (digits and a point).")
            actions.credit(work.session, company_id, currency, value, reason, work.user.actor)
        except DomainError as exc:
            work.session.rollback()
            field, messages = next(iter(exc.errors.items())) if exc.errors else ("amount", [exc.message])
            message = messages[0]
            credit_form = {"currency": currency, "amount": amount, "reason": reason}
            return _company(
                request, work, company_id, 422, errors={f"credit_{field}": message}, credit=credit_form
            )
    return redirect(f"{MOUNT_PATH}/companies/{company_id}?saved=credited#wallet")
