"""The console's pages. Each is a thin view over the services the API calls: it reads and writes
through them, in the signed-in user's unit of work (`console.web.console_work`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from outfitter.console import accounts, dashboard, security
from outfitter.console.web import (
    MOUNT_PATH,
    PRE_SESSION_COOKIE,
    ConsoleWork,
    CookiePolicy,
    CsrfRefused,
    EnrolmentNeeded,
    SignInNeeded,
    anonymous_work,
    check_origin,
    check_token,
    console_work,
    error_page,
    hit_sign_in_limits,
    pre_session_token,
    redirect,
    safe_next,
    sign_in_url,
    templates,
)
from outfitter.core.errors import Conflict, NotFound, RateLimited
from outfitter.models import ConsoleRole

router = APIRouter(include_in_schema=False)

FormText = Annotated[str, Form(max_length=1000)]
Password = Annotated[str, Form(max_length=1000)]
WRONG_CREDENTIALS = "The email or the password is wrong."
COMPANY_SUSPENDED = "Your company's console is suspended by Outfitter: contact Outfitter's support."


def page(endpoint: Callable[..., Response]) -> Callable[..., Response]:
    """Answers what a page's work raises as a person would want: the sign-in page when the session
    is gone, 403 for a forged request, 404 for a record that is not the company's."""

    @functools.wraps(endpoint)
    def handler(request: Request, *args: Any, **kwargs: Any) -> Response:
        try:
            return endpoint(request, *args, **kwargs)
        except SignInNeeded:
            target = sign_in_url(request)
            if request.headers.get("hx-request"):
                return Response(status_code=204, headers={"HX-Redirect": target})
            return redirect(target)
        except EnrolmentNeeded:
            target = f"{MOUNT_PATH}/profile?enrol=required"
            if request.headers.get("hx-request"):
                return Response(status_code=204, headers={"HX-Redirect": target})
            return redirect(target)
        except CsrfRefused:
            return error_page(
                request,
                403,
                "This form was not sent from this console's own page, or it has expired: "
                "reload the page and try again.",
            )
        except NotFound as exc:
            return error_page(request, 404, f"{exc.message} It may be another company's, or gone.")

    return handler


def render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, name, context, status_code=status)


# --- signing in and out ----------------------------------------------------------------------------


def _sign_in_form(
    request: Request, status: int = 200, error: str | None = None, email: str = "", next_url: str = ""
) -> HTMLResponse:
    token, fresh = pre_session_token(request)
    response = render(
        request, "sign_in.html", status, form_token=token, error=error, email=email, next=next_url
    )
    if fresh:
        cookies: CookiePolicy = request.app.state.console_cookies
        cookies.set(response, PRE_SESSION_COOKIE, token)
    return response


@router.get("/sign-in")
def sign_in_page(request: Request, next: str = "") -> Response:
    return _sign_in_form(request, next_url=safe_next(next))


@router.post("/sign-in")
@page
def sign_in(
    request: Request,
    email: FormText = "",
    password: Password = "",
    csrf_token: FormText = "",
    next: FormText = "",
) -> Response:
    check_origin(request)
    check_token(request.cookies.get(PRE_SESSION_COOKIE), csrf_token)
    try:
        hit_sign_in_limits(request, email)
    except RateLimited as exc:
        refused = _sign_in_form(
            request, 429, "Too many sign-in attempts: wait a few minutes, then try again.", email, next
        )
        refused.headers.update(exc.headers or {})
        return refused
    cookies: CookiePolicy = request.app.state.console_cookies
    with anonymous_work(request) as session:
        try:
            found = accounts.check_password(session, email, password)
        except accounts.CompanySuspended:
            return _sign_in_form(request, 403, COMPANY_SUSPENDED, email, next)
        if found is None:
            return _sign_in_form(request, 401, WRONG_CREDENTIALS, email, next)
        # The session the browser had (if any) ends: its id is never the signed-in one.
        old = accounts.resume(session, request.cookies.get(cookies.session_name))
        if old is not None:
            accounts.end_session(session, old)
        # With TOTP on, this session only waits for the code (console/profile.py).
        awaiting = security.has_totp(session, found[0])
        session_id = accounts.open_session(session, *found, request.headers.get("user-agent"), awaiting)
    if awaiting:
        response = redirect(f"{MOUNT_PATH}/sign-in/code?{urlencode({'next': safe_next(next)})}")
    else:
        response = redirect(safe_next(next))
        cookies.clear(response, PRE_SESSION_COOKIE)
    cookies.set(response, cookies.session_name, session_id)
    return response


@router.post("/sign-out")
@page
def sign_out(request: Request, csrf_token: FormText = "") -> Response:
    cookies: CookiePolicy = request.app.state.console_cookies
    with console_work(request, {"csrf_token": csrf_token}) as work:
        accounts.end_session(work.session, work.user)
    response = redirect(f"{MOUNT_PATH}/sign-in?signed_out=1")
    cookies.clear(response, cookies.session_name)
    return response


# --- invites ---------------------------------------------------------------------------------------


def _invite_form(
    request: Request, token: str, who: accounts.Invited, status: int = 200, error: str = ""
) -> Response:
    form_token, fresh = pre_session_token(request)
    response = render(
        request,
        "invite.html",
        status,
        invite_token=token,
        who=who,
        form_token=form_token,
        error=error,
        min_length=accounts.MIN_PASSWORD_LENGTH,
    )
    if fresh:
        cookies: CookiePolicy = request.app.state.console_cookies
        cookies.set(response, PRE_SESSION_COOKIE, form_token)
    return response


_INVITE_GONE = (
    "This invite link is not valid: it was used, replaced or is older than 72 hours. "
    "Ask an admin for a new one."
)


@router.get("/invite/{token}")
def invite_page(request: Request, token: str) -> Response:
    with anonymous_work(request) as session:
        who = accounts.invited(session, token)
    if who is None:
        return error_page(request, 404, _INVITE_GONE)
    return _invite_form(request, token, who)


@router.post("/invite/{token}")
@page
def accept_invite(
    request: Request, token: str, password: Password = "", confirm: Password = "", csrf_token: FormText = ""
) -> Response:
    check_origin(request)
    check_token(request.cookies.get(PRE_SESSION_COOKIE), csrf_token)
    cookies: CookiePolicy = request.app.state.console_cookies
    with anonymous_work(request) as session:
        who = accounts.invited(session, token)
        if who is None:
            return error_page(request, 404, _INVITE_GONE)
        problem = accounts.password_problem(password)
        if problem is None and password != confirm:
            problem = "The two passwords differ: type the same one twice."
        if problem:
            return _invite_form(request, token, who, 422, problem)
        accounts.accept_invite(session, who, password)
        session_id = accounts.open_session(
            session, who.user_id, who.company_id, request.headers.get("user-agent")
        )
    response = redirect(f"{MOUNT_PATH}/")
    cookies.set(response, cookies.session_name, session_id)
    cookies.clear(response, PRE_SESSION_COOKIE)
    return response


# --- the dashboard --------------------------------------------------------------------------


@router.get("/")
@page
def dashboard_page(request: Request) -> Response:
    with console_work(request) as work:
        figures = dashboard.figures(work.session)
        return render(request, "dashboard.html", user=work.user, nav="dashboard", figures=figures)


# --- users (admins only) -----------------------------------------------------------------------------


def _users(
    request: Request,
    work: ConsoleWork,
    status: int = 200,
    error: str = "",
    invited: str = "",
    email: str = "",
) -> Response:
    return render(
        request,
        "users.html",
        status,
        user=work.user,
        nav="users",
        users=accounts.company_users(work.session),
        require_totp=security.require_totp(work.session),
        roles=list(ConsoleRole),
        error=error,
        invited=invited,
        email=email,
        saved=request.query_params.get("saved"),
    )


def _admin_only(request: Request, work: ConsoleWork) -> Response | None:
    if work.user.is_admin:
        return None
    return error_page(request, 403, "Only an admin can manage the console's users.", work.user)


@router.get("/users")
@page
def users_page(request: Request) -> Response:
    with console_work(request) as work:
        return _admin_only(request, work) or _users(request, work)


@router.post("/users")
@page
def invite_user(
    request: Request, email: FormText = "", role: FormText = "", csrf_token: FormText = ""
) -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        refused = _admin_only(request, work)
        if refused:
            return refused
        if role not in set(ConsoleRole):
            return _users(request, work, 422, "Choose a role from the list.", email=email)
        try:
            invite = accounts.invite(
                work.session, work.user.company_id, email, ConsoleRole(role), work.user.actor
            )
        except accounts.InviteRefused as exc:
            return _users(request, work, 422, str(exc), email=email)
        link = accounts.sign_in_link(request.app.state.settings.public_url, invite.token)
        return _users(request, work, 201, invited=link)


@router.post("/users/{user_id}")
@page
def change_user(
    request: Request, user_id: str, role: FormText = "", deactivate: FormText = "", csrf_token: FormText = ""
) -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        refused = _admin_only(request, work)
        if refused:
            return refused
        if role and role not in set(ConsoleRole):
            return _users(request, work, 422, "Choose a role from the list.")
        try:
            accounts.change_user(
                work.session, work.user, user_id, ConsoleRole(role) if role else None, deactivate == "yes"
            )
        except Conflict as exc:
            return _users(request, work, 409, exc.message)
    return redirect(f"{MOUNT_PATH}/users?saved=1")
