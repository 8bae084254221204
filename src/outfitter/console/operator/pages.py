"""The operator console's sign-in: an invite accepted (password and TOTP together), the password
then the code, and sign-out. The forms before a session carry the double-submit token of the
company console's (`console.web.pre_session_token`) under the operator's own cookie."""

from __future__ import annotations

import secrets
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from outfitter.console import accounts as console_accounts
from outfitter.console import security
from outfitter.console.operator import accounts
from outfitter.console.operator.web import (
    MOUNT_PATH,
    OperatorCookies,
    anonymous_work,
    error_page,
    operator_work,
    page,
    render,
    safe_next,
)
from outfitter.console.web import check_origin, check_token, redirect
from outfitter.core.errors import RateLimited

router = APIRouter(include_in_schema=False)
FormText = Annotated[str, Form(max_length=1000)]
WRONG_CREDENTIALS = "The email or the password is wrong."
INVITE_GONE = (
    "This invite link is not valid: it was used, replaced or is older than 72 hours. "
    "Ask for a new one (outfitter operator invite)."
)


def _form_token(request: Request) -> tuple[str, bool]:
    cookies: OperatorCookies = request.app.state.operator_cookies
    token = request.cookies.get(cookies.form_name)
    if token and 20 <= len(token) <= 100:
        return token, False
    return secrets.token_urlsafe(32), True


def _form(request: Request, template: str, code: int = 200, /, **context: Any) -> Response:
    token, fresh = _form_token(request)
    response = render(request, template, code, form_token=token, **context)
    if fresh:
        cookies: OperatorCookies = request.app.state.operator_cookies
        cookies.set(response, cookies.form_name, token)
    return response


def _check_form(request: Request, csrf_token: str) -> None:
    check_origin(request)
    cookies: OperatorCookies = request.app.state.operator_cookies
    check_token(request.cookies.get(cookies.form_name), csrf_token)


def _hit_limits(request: Request, email: str) -> None:
    per_account, per_address = request.app.state.operator_sign_in_limits
    address = request.client.host if request.client else "-"
    state: dict[str, Any] = {}
    per_address.hit(state, f"operator-address:{address}")
    per_account.hit(
        state, f"operator-account:{console_accounts.digest(console_accounts.normal_email(email))}"
    )


def _limited(request: Request, exc: RateLimited, name: str, **context: Any) -> Response:
    refused = _form(
        request, name, 429, error="Too many sign-in attempts: wait a few minutes, then try again.", **context
    )
    refused.headers.update(exc.headers or {})
    return refused


@router.get("/sign-in")
def sign_in_page(request: Request, next: str = "") -> Response:
    return _form(request, "sign_in.html", email="", next=safe_next(next), error=None)


@router.post("/sign-in")
@page
def sign_in(
    request: Request,
    email: FormText = "",
    password: FormText = "",
    csrf_token: FormText = "",
    next: FormText = "",
) -> Response:
    _check_form(request, csrf_token)
    try:
        _hit_limits(request, email)
    except RateLimited as exc:
        return _limited(request, exc, "sign_in.html", email=email, next=next)
    cookies: OperatorCookies = request.app.state.operator_cookies
    with anonymous_work(request) as session:
        user_id = accounts.check_password(session, email, password)
        if user_id is None:
            return _form(request, "sign_in.html", 401, error=WRONG_CREDENTIALS, email=email, next=next)
        old = accounts.resume(session, request.cookies.get(cookies.session_name))
        if old is not None:
            accounts.end_session(session, old)
        session_id = accounts.open_session(
            session, user_id, request.headers.get("user-agent"), awaiting_code=True
        )
    response = redirect(f"{MOUNT_PATH}/sign-in/code?{urlencode({'next': safe_next(next)})}")
    cookies.set(response, cookies.session_name, session_id)
    return response


@router.get("/sign-in/code")
def code_page(request: Request, next: str = "") -> Response:
    cookies: OperatorCookies = request.app.state.operator_cookies
    with anonymous_work(request) as session:
        pending = accounts.awaiting_code(session, request.cookies.get(cookies.session_name))
    if pending is None:
        return redirect(f"{MOUNT_PATH}/sign-in")
    return _form(request, "sign_in_code.html", next=safe_next(next), error=None)


@router.post("/sign-in/code")
@page
def sign_in_code(
    request: Request, code: FormText = "", csrf_token: FormText = "", next: FormText = ""
) -> Response:
    _check_form(request, csrf_token)
    cookies: OperatorCookies = request.app.state.operator_cookies
    with anonymous_work(request) as session:
        pending = accounts.awaiting_code(session, request.cookies.get(cookies.session_name))
        if pending is None:
            return redirect(f"{MOUNT_PATH}/sign-in")
        email = str(pending.user_id)
        try:
            _hit_limits(request, email)  # codes count against the operator too
        except RateLimited as exc:
            return _limited(request, exc, "sign_in_code.html", next=next)
        session_id = accounts.complete_sign_in(session, pending, code, request.headers.get("user-agent"))
    if session_id is None:
        return _form(request, "sign_in_code.html", 401, error=security.WRONG_CODE, next=next)
    response = redirect(safe_next(next))
    cookies.set(response, cookies.session_name, session_id)
    cookies.clear(response, cookies.form_name)
    return response


@router.get("/invite/{token}")
def invite_page(request: Request, token: str) -> Response:
    with anonymous_work(request) as session:
        user = accounts.invited(session, token)
        if user is None:
            return error_page(request, 404, INVITE_GONE)
        assert user.totp_secret is not None
        enrolment = security.enrolment(user.email, security.open_secret(user.totp_secret))
        return _form(
            request, "invite.html", invite_token=token, email=user.email, enrolment=enrolment, error=""
        )


@router.post("/invite/{token}")
@page
def accept_invite(
    request: Request,
    token: str,
    password: FormText = "",
    confirm: FormText = "",
    code: FormText = "",
    csrf_token: FormText = "",
) -> Response:
    _check_form(request, csrf_token)
    cookies: OperatorCookies = request.app.state.operator_cookies
    with anonymous_work(request) as session:
        user = accounts.invited(session, token)
        if user is None:
            return error_page(request, 404, INVITE_GONE)
        problem = accounts.accept_invite(session, user, password, confirm, code)
        if problem:
            assert user.totp_secret is not None
            enrolment = security.enrolment(user.email, security.open_secret(user.totp_secret))
            return _form(
                request,
                "invite.html",
                422,
                invite_token=token,
                email=user.email,
                enrolment=enrolment,
                error=problem,
            )
        session_id = accounts.open_session(session, user.id, request.headers.get("user-agent"))
    response = redirect(f"{MOUNT_PATH}/")
    cookies.set(response, cookies.session_name, session_id)
    cookies.clear(response, cookies.form_name)
    return response


@router.post("/sign-out")
@page
def sign_out(request: Request, csrf_token: FormText = "") -> Response:
    cookies: OperatorCookies = request.app.state.operator_cookies
    with operator_work(request, {"csrf_token": csrf_token}) as work:
        accounts.end_session(work.session, work.user)
    response = redirect(f"{MOUNT_PATH}/sign-in?signed_out=1")
    cookies.clear(response, cookies.session_name)
    return response
