"""The operator console's request handling: its cookies (a name and a path of their own), the
signed-in operator's unit of work, and how a page answers what that work raises.

The checks are the company console's (`console.web`): the origin check and the synchronizer token
on every unsafe request, the sign-in rate limits, the security headers. The session works across
companies (an operator's pages list every company's orders); an action on one company binds it
first (`operator.actions`), as the CLI does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from outfitter.config import Settings
from outfitter.console.operator import accounts
from outfitter.console.operator.accounts import SignedInOperator
from outfitter.console.web import CsrfRefused, SignInNeeded, check_origin, check_token, redirect, templates
from outfitter.core.errors import NotFound
from outfitter.db.tenancy import across_companies

MOUNT_PATH = "/operator"
# Sign-in attempts, as the console's, counted apart from them.
SIGN_IN_PER_ACCOUNT = "10/15minutes"
SIGN_IN_PER_ADDRESS = "100/15minutes"


@dataclass(frozen=True)
class OperatorCookies:
    """Cookies sent to /operator only. On https `__Secure-` (a `__Host-` cookie must have the path
    `/`, which would send it to the companies' console too); on http plain names."""

    secure: bool

    @classmethod
    def of(cls, settings: Settings) -> OperatorCookies:
        return cls(secure=settings.public_url.startswith("https://"))

    @property
    def session_name(self) -> str:
        return "__Secure-outfitter_operator" if self.secure else "outfitter_operator"

    @property
    def form_name(self) -> str:
        return "__Secure-outfitter_operator_form" if self.secure else "outfitter_operator_form"

    def set(self, response: Response, name: str, value: str) -> None:
        response.set_cookie(
            name, value, path=MOUNT_PATH, secure=self.secure, httponly=True, samesite="strict"
        )

    def clear(self, response: Response, name: str) -> None:
        response.delete_cookie(name, path=MOUNT_PATH, secure=self.secure, httponly=True, samesite="strict")


@dataclass
class OperatorWork:
    session: Session
    user: SignedInOperator


@contextmanager
def operator_work(request: Request, form: dict[str, str] | None = None) -> Iterator[OperatorWork]:
    """The signed-in operator's unit of work, across companies, committed when the block ends
    without raising. An unsafe request passes the CSRF checks first."""
    unsafe = request.method not in ("GET", "HEAD")
    if unsafe:
        check_origin(request)
    cookies: OperatorCookies = request.app.state.operator_cookies
    with across_companies(request.app.state.sessionmaker()) as session:
        user = accounts.resume(session, request.cookies.get(cookies.session_name))
        if user is None:
            raise SignInNeeded
        if unsafe:
            check_token(user.csrf_token, (form or {}).get("csrf_token"))
        yield OperatorWork(session, user)
        session.commit()


@contextmanager
def anonymous_work(request: Request) -> Iterator[Session]:
    with across_companies(request.app.state.sessionmaker()) as session:
        yield session
        session.commit()


def render(request: Request, template: str, code: int = 200, /, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, f"operator/{template}", context, status_code=code)


def error_page(
    request: Request, status: int, message: str, user: SignedInOperator | None = None
) -> HTMLResponse:
    return render(request, "error.html", status, status=status, message=message, user=user)


def sign_in_url(request: Request) -> str:
    if request.method != "GET":
        return f"{MOUNT_PATH}/sign-in"
    return f"{MOUNT_PATH}/sign-in?next={request.url.path}"


def safe_next(value: str | None) -> str:
    """Where to go after signing in: only an operator path (no open redirect)."""
    if value and value.startswith(f"{MOUNT_PATH}/") and not value.startswith("//") and "\\" not in value:
        return value
    return f"{MOUNT_PATH}/"


def page(endpoint: Callable[..., Response]) -> Callable[..., Response]:
    """The sign-in page when the session is gone, 403 for a forged request, 404 for no record."""

    @functools.wraps(endpoint)
    def handler(request: Request, *args: Any, **kwargs: Any) -> Response:
        try:
            return endpoint(request, *args, **kwargs)
        except SignInNeeded:
            return redirect(sign_in_url(request))
        except CsrfRefused:
            return error_page(
                request,
                403,
                "This form was not sent from the operator console's own page, or it has expired: "
                "reload the page and try again.",
            )
        except NotFound as exc:
            return error_page(request, 404, exc.message)

    return handler


async def http_error(request: Request, exc: Any) -> Response:
    status = exc.status_code
    message = {404: "There is no such page.", 405: "This page does not take that method."}.get(
        status, "The request could not be served."
    )
    return error_page(request, status, message)
