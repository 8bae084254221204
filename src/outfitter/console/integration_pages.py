"""The Integrations pages for API tokens and the SCIM connection (webhook endpoints are in
`webhook_pages`). Admins change them; viewers read them. A new token is shown once, in the answer
to the form that made it, and never again: only its hash is stored (`tenants.tokens`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from outfitter.console import integrations
from outfitter.console.pages import FormText, page, render
from outfitter.console.web import MOUNT_PATH, ConsoleWork, console_work, error_page, redirect
from outfitter.tenants.tokens import IssuedToken

router = APIRouter(include_in_schema=False)

TOKENS_PATH = f"{MOUNT_PATH}/integrations/tokens"
SCIM_PATH = f"{MOUNT_PATH}/integrations/scim"
# The scopes an admin may give an API token here; a `scim` token is made on the SCIM page.
API_SCOPES = ("read", "write")
Checked = Annotated[list[str], Form()]


def admin_only(request: Request, work: ConsoleWork) -> Response | None:
    """None for an admin; a 403 page for a viewer, who reads these pages but changes nothing."""
    if work.user.is_admin:
        return None
    return error_page(request, 403, "Only an admin can change the company's integrations.", work.user)


def _expiry(value: str) -> int | None:
    """The form's expiry: one of the offered numbers of days, or never (ValueError otherwise)."""
    if value in ("", "never"):
        return None
    if value.isdigit() and int(value) in integrations.EXPIRY_CHOICES:
        return int(value)
    raise ValueError("Choose an expiry from the list.")


# --- API tokens ------------------------------------------------------------------------------------


def _tokens_page(request: Request, work: ConsoleWork, status: int = 200, **context: Any) -> Response:
    return render(
        request,
        "integrations_tokens.html",
        status,
        user=work.user,
        nav="integrations",
        tab="tokens",
        rows=integrations.list_tokens(work.session, work.user.company_id),
        scopes=API_SCOPES,
        expiry_choices=integrations.EXPIRY_CHOICES,
        saved=request.query_params.get("saved"),
        **context,
    )


@router.get("/integrations")
def integrations_root() -> Response:
    return redirect(TOKENS_PATH, 308)


@router.get("/integrations/tokens")
@page
def tokens_page(request: Request) -> Response:
    with console_work(request) as work:
        return _tokens_page(request, work)


@router.post("/integrations/tokens")
@page
def create_token(
    request: Request,
    name: FormText = "",
    scope: Checked = [],  # noqa: B006  (FastAPI copies a form default)
    expires: FormText = "",
    csrf_token: FormText = "",
) -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        refused = admin_only(request, work)
        if refused:
            return refused
        form = {"name": name, "scopes": scope, "expires": expires}
        try:
            if any(chosen not in API_SCOPES for chosen in scope):
                raise ValueError("Choose read, write or both.")
            issued = integrations.create_token(
                work.session, work.actor, name.strip(), scope, _expiry(expires)
            )
        except ValueError as exc:
            return _tokens_page(request, work, 422, error=_sentence(str(exc)), form=form)
        return _tokens_page(request, work, 201, issued=_shown_once(issued))


@router.post("/integrations/tokens/{token_id}/revoke")
@page
def revoke_token(request: Request, token_id: str, back: FormText = "", csrf_token: FormText = "") -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        refused = admin_only(request, work)
        if refused:
            return refused
        integrations.revoke_token(work.session, work.actor, token_id)
    return redirect(f"{SCIM_PATH if back == 'scim' else TOKENS_PATH}?saved=revoked")


def _shown_once(issued: IssuedToken) -> dict[str, Any]:
    record = issued.record
    return {"id": record.id, "name": record.name, "token": issued.token, "scopes": record.scope_list}


def _sentence(message: str) -> str:
    """The services' ValueErrors as a sentence (`--expires-in-days` is the CLI's word)."""
    message = message.replace("--name", "The name").replace("--scope scim alone", "the scim scope alone")
    return message[:1].upper() + message[1:] + ("" if message.endswith(".") else ".")


# --- SCIM --------------------------------------------------------------------------------------------


def _scim_page(request: Request, work: ConsoleWork, status: int = 200, **context: Any) -> Response:
    settings = integrations.scim_settings(work.session, work.user.company_id)
    base_url = request.app.state.settings.public_url.rstrip("/") + "/scim/v2"
    return render(
        request,
        "integrations_scim.html",
        status,
        user=work.user,
        nav="integrations",
        tab="scim",
        rows=integrations.list_tokens(work.session, work.user.company_id, scim_only=True),
        settings=settings,
        base_url=base_url,
        expiry_choices=integrations.EXPIRY_CHOICES,
        saved=request.query_params.get("saved"),
        **context,
    )


@router.get("/integrations/scim")
@page
def scim_page(request: Request) -> Response:
    with console_work(request) as work:
        return _scim_page(request, work)


@router.post("/integrations/scim/tokens")
@page
def create_scim_token(
    request: Request, name: FormText = "", expires: FormText = "", csrf_token: FormText = ""
) -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        refused = admin_only(request, work)
        if refused:
            return refused
        try:
            issued = integrations.create_token(
                work.session, work.actor, name.strip() or "SCIM provisioning", ["scim"], _expiry(expires)
            )
        except ValueError as exc:
            return _scim_page(request, work, 422, token_error=_sentence(str(exc)))
        return _scim_page(request, work, 201, issued=_shown_once(issued))


@router.post("/integrations/scim/settings")
@page
def change_scim_settings(
    request: Request,
    default_country: FormText = "",
    offboard_retrieval: FormText = "",
    csrf_token: FormText = "",
) -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        refused = admin_only(request, work)
        if refused:
            return refused
        try:
            integrations.change_scim_settings(
                work.session, work.actor, offboard_retrieval == "yes", default_country.strip()
            )
        except ValueError as exc:
            return _scim_page(
                request, work, 422, settings_error=_sentence(str(exc)), country=default_country.strip()
            )
    return redirect(f"{SCIM_PATH}?saved=settings")
