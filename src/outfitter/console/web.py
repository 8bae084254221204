"""The console's request handling: its headers, the signed-in user's unit of work, CSRF and the
sign-in rate limits.

A page runs in one worker thread as an API request does (`http.unit_of_work`): open the session,
find the cookie's session and bind the session to its user's company (`db.tenancy`), call the
services, render the page, and only then commit. Anything that raises rolls everything back.

Every unsafe request passes two checks before any work: the browser's own account of where it
comes from (`Sec-Fetch-Site` must be same-origin, `Origin` the console's own), and a synchronizer
token bound to the session (a hidden form field, or the `X-CSRF-Token` header htmx sends).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from sqlalchemy.orm import Session

from outfitter.config import Settings
from outfitter.console import accounts
from outfitter.console.accounts import SignedIn
from outfitter.tenants.actor import Actor

MOUNT_PATH = "/console"
HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")  # autoescapes .html: names are text

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}
# Sign-in attempts: per account and per address, whatever the answer.
SIGN_IN_PER_ACCOUNT = "10/15minutes"
SIGN_IN_PER_ADDRESS = "100/15minutes"
PRE_SESSION_COOKIE = "outfitter_form"  # the sign-in and invite forms' token (no session yet)
PROFILE_PATH = f"{MOUNT_PATH}/profile"
# What a user whose company requires TOTP may reach before enrolling: their profile, and signing out.
BEFORE_ENROLMENT = (PROFILE_PATH, f"{MOUNT_PATH}/sign-out")


@dataclass(frozen=True)
class CookiePolicy:
    """`__Host-` needs Secure, which browsers refuse over http: on http (a laptop's 127.0.0.1) the
    cookie has a plain name and no Secure flag (docs/console.md)."""

    secure: bool

    @classmethod
    def of(cls, settings: Settings) -> CookiePolicy:
        return cls(secure=settings.public_url.startswith("https://"))

    @property
    def session_name(self) -> str:
        return "__Host-outfitter_session" if self.secure else "outfitter_session"

    def set(self, response: Response, name: str, value: str, max_age: int | None = None) -> None:
        response.set_cookie(
            name, value, max_age=max_age, path="/", secure=self.secure, httponly=True, samesite="lax"
        )

    def clear(self, response: Response, name: str) -> None:
        response.delete_cookie(name, path="/", secure=self.secure, httponly=True, samesite="lax")


async def http_error(request: Request, exc: Any) -> Response:
    status = exc.status_code
    message = {404: "There is no such page.", 405: "This page does not take that method."}.get(
        status, "The request could not be served."
    )
    return error_page(request, status, message)


def error_page(request: Request, status: int, message: str, user: SignedIn | None = None) -> HTMLResponse:
    return templates.TemplateResponse(
        request, "error.html", {"status": status, "message": message, "user": user}, status_code=status
    )


# --- the unit of work of a page ------------------------------------------------------------------


class SignInNeeded(Exception):
    """No live session: the page answers with the sign-in page's address."""


class CsrfRefused(Exception):
    """An unsafe request that failed the origin or token check."""


class EnrolmentNeeded(Exception):
    """The company requires a second factor and the user has none: the page sends them to enrol."""


@dataclass
class ConsoleWork:
    session: Session
    user: SignedIn

    @property
    def actor(self) -> Actor:
        """The user as the services know an actor: changes are recorded under their name."""
        return Actor(
            company_id=self.user.company_id,
            company_name=self.user.company_name,
            scopes=frozenset({"read", "write"} if self.user.is_admin else {"read"}),
            name=self.user.actor,
        )


def check_origin(request: Request) -> None:
    """The browser says where an unsafe request comes from: refuse any other site."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        raise CsrfRefused
    origin = request.headers.get("origin")
    if origin is not None:
        public = urlsplit(request.app.state.settings.public_url)
        if origin.rstrip("/") != f"{public.scheme}://{public.netloc}":
            raise CsrfRefused


def check_token(expected: str | None, given: str | None) -> None:
    if not expected or not given or not hmac.compare_digest(expected.encode(), given.encode()):
        raise CsrfRefused


@contextmanager
def console_work(request: Request, form: dict[str, str] | None = None) -> Iterator[ConsoleWork]:
    """The signed-in user's unit of work: the session bound to their company, committed when the
    block ends without raising. An unsafe request (a `form` given) passes the CSRF checks first."""
    unsafe = request.method not in ("GET", "HEAD")
    if unsafe:
        check_origin(request)
    cookies: CookiePolicy = request.app.state.console_cookies
    session: Session = request.app.state.sessionmaker()
    try:
        user = accounts.resume(session, request.cookies.get(cookies.session_name))
        if user is None:
            raise SignInNeeded
        if user.must_enrol and not request.url.path.startswith(BEFORE_ENROLMENT):
            raise EnrolmentNeeded
        if unsafe:
            given = (form or {}).get("csrf_token") or request.headers.get("x-csrf-token")
            check_token(user.csrf_token, given)
        yield ConsoleWork(session, user)
        session.commit()
    finally:
        session.close()


@contextmanager
def anonymous_work(request: Request) -> Iterator[Session]:
    """The unit of work of the pages before a session (sign-in, invite): the session is bound by
    what they find (accounts.check_password, accounts.invited)."""
    session: Session = request.app.state.sessionmaker()
    try:
        yield session
        session.commit()
    finally:
        session.close()


def pre_session_token(request: Request) -> tuple[str, bool]:
    """The sign-in and invite forms' token (double-submit: a cookie and the same value in the form),
    and whether the cookie must be set."""
    token = request.cookies.get(PRE_SESSION_COOKIE)
    if token and 20 <= len(token) <= 100:
        return token, False
    return secrets.token_urlsafe(32), True


def hit_sign_in_limits(request: Request, email: str) -> None:
    """Raises RateLimited when the account or the address has tried too often."""
    per_account, per_address = request.app.state.console_sign_in_limits
    address = request.client.host if request.client else "-"
    state: dict[str, Any] = {}
    per_address.hit(state, f"console-address:{address}")
    per_account.hit(state, f"console-account:{accounts.digest(accounts.normal_email(email))}")


def redirect(url: str, status: int = 303) -> RedirectResponse:
    return RedirectResponse(url, status_code=status)


def sign_in_url(request: Request) -> str:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return f"{MOUNT_PATH}/sign-in?next={target}" if request.method == "GET" else f"{MOUNT_PATH}/sign-in"


def safe_next(value: str | None) -> str:
    """Where to go after signing in: only a console path (no open redirect)."""
    if value and value.startswith(f"{MOUNT_PATH}/") and not value.startswith("//") and "\\" not in value:
        return value
    return f"{MOUNT_PATH}/"
