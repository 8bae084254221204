"""The signed-in user's own profile (password, TOTP second factor, sessions), the sign-in's second
step (the TOTP code), and the company's "require TOTP" setting (admins, from the Users page)."""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response

from outfitter.console import security
from outfitter.console.pages import FormText, Password, page, render
from outfitter.console.web import (
    MOUNT_PATH,
    PRE_SESSION_COOKIE,
    PROFILE_PATH,
    ConsoleWork,
    CookiePolicy,
    anonymous_work,
    check_origin,
    check_token,
    console_work,
    error_page,
    hit_sign_in_limits,
    pre_session_token,
    redirect,
    safe_next,
)
from outfitter.core.errors import RateLimited

router = APIRouter(include_in_schema=False)

SAVED = {
    "password": "Your password is changed. Every other session is signed out.",
    "totp-on": "The second factor is on: signing in now asks for a code from your app.",
    "totp-off": "The second factor is off.",
    "sessions": "Signed out there.",
}


def _profile(
    request: Request,
    work: ConsoleWork,
    status: int = 200,
    errors: dict[str, str] | None = None,
    enrolment: security.Enrolment | None = None,
) -> Response:
    return render(
        request,
        "profile.html",
        status,
        user=work.user,
        nav="profile",
        errors=errors or {},
        enrolment=enrolment or security.pending_enrolment(work.session, work.user),
        sessions=security.live_sessions(work.session, work.user),
        saved=SAVED.get(request.query_params.get("saved", "")),
        enrol_required=work.user.must_enrol,
    )


def _refused(request: Request, work: ConsoleWork, refused: security.Refused) -> Response:
    work.session.rollback()  # nothing of a refused change stays
    return _profile(request, work, 422, {refused.field: refused.message})


@router.get("/profile")
@page
def profile_page(request: Request) -> Response:
    with console_work(request) as work:
        return _profile(request, work)


@router.post("/profile/password")
@page
def change_password(
    request: Request,
    current: Password = "",
    new: Password = "",
    confirm: Password = "",
    csrf_token: FormText = "",
) -> Response:
    cookies: CookiePolicy = request.app.state.console_cookies
    with console_work(request, {"csrf_token": csrf_token}) as work:
        try:
            hit_sign_in_limits(request, work.user.email)  # guessing the current password is a sign-in
        except RateLimited as exc:
            limited = _profile(request, work, 429, {"current": "Too many attempts: wait a few minutes."})
            limited.headers.update(exc.headers or {})
            return limited
        try:
            session_id = security.change_password(
                work.session, work.user, current, new, confirm, request.headers.get("user-agent")
            )
        except security.Refused as refused:
            return _refused(request, work, refused)
    response = redirect(f"{PROFILE_PATH}?saved=password")
    cookies.set(response, cookies.session_name, session_id)
    return response


@router.post("/profile/totp/start")
@page
def start_totp(request: Request, csrf_token: FormText = "") -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        try:
            enrolment = security.start_enrolment(work.session, work.user)
        except security.Refused as refused:
            return _refused(request, work, refused)
        return _profile(request, work, enrolment=enrolment)


@router.post("/profile/totp/confirm")
@page
def confirm_totp(request: Request, code: FormText = "", csrf_token: FormText = "") -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        try:
            security.confirm_enrolment(work.session, work.user, code)
        except security.Refused as refused:
            return _refused(request, work, refused)
    return redirect(f"{PROFILE_PATH}?saved=totp-on")


@router.post("/profile/totp/disable")
@page
def disable_totp(request: Request, proof: Password = "", csrf_token: FormText = "") -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        try:
            hit_sign_in_limits(request, work.user.email)
        except RateLimited as exc:
            limited = _profile(request, work, 429, {"proof": "Too many attempts: wait a few minutes."})
            limited.headers.update(exc.headers or {})
            return limited
        try:
            security.disable(work.session, work.user, proof)
        except security.Refused as refused:
            return _refused(request, work, refused)
    return redirect(f"{PROFILE_PATH}?saved=totp-off")


@router.post("/profile/sessions/end")
@page
def end_sessions(request: Request, ref: FormText = "", csrf_token: FormText = "") -> Response:
    """End one other session (`ref`), or every other one (no `ref`)."""
    with console_work(request, {"csrf_token": csrf_token}) as work:
        security.end_other_sessions(work.session, work.user, ref or None)
    return redirect(f"{PROFILE_PATH}?saved=sessions#sessions-heading")


# --- the sign-in's second step -----------------------------------------------------------------------


def _code_form(request: Request, status: int = 200, error: str = "", next_url: str = "") -> Response:
    token, fresh = pre_session_token(request)
    response = render(request, "sign_in_code.html", status, form_token=token, error=error, next=next_url)
    if fresh:
        cookies: CookiePolicy = request.app.state.console_cookies
        cookies.set(response, PRE_SESSION_COOKIE, token)
    return response


def _start_again(next_url: str) -> Response:
    return redirect(f"{MOUNT_PATH}/sign-in?{urlencode({'next': safe_next(next_url)})}")


@router.get("/sign-in/code")
def code_page(request: Request, next: str = "") -> Response:
    cookies: CookiePolicy = request.app.state.console_cookies
    with anonymous_work(request) as session:
        pending = security.awaiting_code(session, request.cookies.get(cookies.session_name))
    if pending is None:
        return _start_again(next)
    return _code_form(request, next_url=safe_next(next))


@router.post("/sign-in/code")
@page
def sign_in_code(
    request: Request, code: FormText = "", csrf_token: FormText = "", next: FormText = ""
) -> Response:
    check_origin(request)
    check_token(request.cookies.get(PRE_SESSION_COOKIE), csrf_token)
    cookies: CookiePolicy = request.app.state.console_cookies
    with anonymous_work(request) as session:
        pending = security.awaiting_code(session, request.cookies.get(cookies.session_name))
        if pending is None:
            return _start_again(next)
        try:
            hit_sign_in_limits(request, pending.email)
        except RateLimited as exc:
            refused = _code_form(
                request, 429, "Too many attempts: wait a few minutes, then sign in again.", next
            )
            refused.headers.update(exc.headers or {})
            return refused
        session_id = security.complete_sign_in(session, pending, code, request.headers.get("user-agent"))
        if session_id is None:
            return _code_form(request, 401, security.WRONG_CODE, next)
    response = redirect(safe_next(next))
    cookies.set(response, cookies.session_name, session_id)
    cookies.clear(response, PRE_SESSION_COOKIE)
    return response


# --- the company's setting (admins) ----------------------------------------------------------------


@router.post("/settings/second-factor")
@page
def set_require_totp(request: Request, require_totp: FormText = "", csrf_token: FormText = "") -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        if not work.user.is_admin:
            return error_page(request, 403, "Only an admin can change the company's settings.", work.user)
        security.set_require_totp(work.session, work.user, require_totp == "yes")
    return redirect(f"{MOUNT_PATH}/users?saved=1")
