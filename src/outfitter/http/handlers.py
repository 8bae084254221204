"""The one place that turns failures into the error envelope."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from sqlalchemy import exc as sa_exc
from starlette.datastructures import URLPath
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match, NoMatchFound, compile_path
from starlette.types import Receive, Scope, Send

from outfitter.core import metrics
from outfitter.core.errors import (
    DATABASE_UNAVAILABLE,
    POOL_EXHAUSTED,
    RETRY_AFTER_SECONDS,
    WRITES_CROSSED,
    DomainError,
    error_body,
    outage_detail,
    validation_message,
)

logger = logging.getLogger("outfitter")

_STATUS_MESSAGES = {
    404: "No such endpoint: /api/v2/docs lists every endpoint (all of them under /api/v2).",
    405: "This endpoint does not accept that HTTP method.",
}
# FastAPI's words for a body it could not read: JSON's parser takes UTF-8, -16 and -32 text, so
# what fails here is bytes that are none of them (a valid JSON text in another encoding).
_UNREADABLE_BODY = "There was an error parsing the body"
UNREADABLE_BODY = "The request body is not valid JSON: send it as UTF-8 text."
# A body-taking endpoint called with none: pydantic's "Field required" at the body's place.
BODY_REQUIRED = "This request takes a JSON body, and none was sent."


def field_path(location: Sequence[Any]) -> str:
    """('body', 'employees', 0, 2, 'email') -> 'employees.0.2.email'; query keeps its prefix."""
    parts = list(location)
    if parts and parts[0] == "body":
        parts = parts[1:]
    return ".".join(str(part) for part in parts) or "body"


async def handle_validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = list(exc.errors())
    if any(error.get("type") == "json_invalid" for error in errors):
        return JSONResponse(error_body("The request body is not valid JSON."), status_code=400)
    if any(error.get("loc", ("",))[0] == "path" for error in errors):
        # A malformed id in the path names no record: the same answer as an unknown one.
        return JSONResponse(error_body("Not found."), status_code=404)
    if any(error.get("type") == "missing" and tuple(error.get("loc", ())) == ("body",) for error in errors):
        return JSONResponse(error_body(BODY_REQUIRED), status_code=400)
    by_path: dict[str, list[str]] = {}
    for error in errors:
        by_path.setdefault(field_path(error.get("loc", ())), []).append(validation_message(error))
    first_path, first_messages = next(iter(by_path.items()))
    summary = f"{first_path}: {first_messages[0]}"
    if len(by_path) > 1:
        summary += f" (and {len(by_path) - 1} more field{'s' if len(by_path) > 2 else ''})"
    return JSONResponse(error_body(summary, by_path), status_code=422)


async def handle_domain_error(request: Request, exc: DomainError) -> JSONResponse:
    return JSONResponse(error_body(exc.message, exc.errors), status_code=exc.status_code, headers=exc.headers)


async def handle_http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    message = _STATUS_MESSAGES.get(exc.status_code) or str(exc.detail)
    if exc.status_code == 400 and exc.detail == _UNREADABLE_BODY:
        message = UNREADABLE_BODY
    headers = dict(exc.headers or {})
    if exc.status_code == 404 and (path := request.url.path).endswith("/"):
        without = path.rstrip("/")
        if methods_of_path(request.app.state.route_methods, without):
            message = f"No such endpoint: {without} is one, without the trailing slash."
    if exc.status_code == 405:
        # The router names only the first route whose path matched; a path can have several. Off
        # the API (health checks, the docs page) its Allow is whole: HEAD added wherever GET is.
        allowed = methods_of_path(request.app.state.route_methods, request.url.path) or _with_head(
            method.strip() for method in headers.get("Allow", "").split(",") if method.strip()
        )
        if allowed:
            headers["Allow"] = ", ".join(allowed)
            message = f"{request.method} is not allowed here; this path takes {', '.join(allowed)}."
    return JSONResponse(error_body(message), status_code=exc.status_code, headers=headers)


def _with_head(methods: Iterable[str]) -> list[str]:
    """`methods`, sorted, with HEAD wherever GET is (Starlette serves it): an Allow header's list."""
    owned = set(methods)
    return sorted(owned | ({"HEAD"} if "GET" in owned else set()))


@dataclass(frozen=True)
class RouteMethods:
    """Each API path's methods, for the Allow header of a 405: fixed paths by their text, paths
    with parameters by their pattern."""

    fixed: dict[str, set[str]]
    templates: list[tuple[re.Pattern[str], set[str]]]


def route_methods(prefix: str, routers: Iterable[APIRouter]) -> RouteMethods:
    routes = [route for router in routers for route in router.routes if isinstance(route, APIRoute)]
    fixed: dict[str, set[str]] = {}
    for route in routes:
        if "{" not in route.path:
            fixed.setdefault(prefix + route.path, set()).update(route.methods or ())
    templates = [
        (compile_path(prefix + route.path)[0], set(route.methods or ()))
        for route in routes
        if "{" in route.path
    ]
    return RouteMethods(fixed, templates)


def methods_of_path(routes: RouteMethods, path: str) -> list[str]:
    """A fixed path (`/client/equipment/bulk`) takes its own methods only, though it is also a
    value of a template beside it (`/client/equipment/{equipmentId}`); see FixedPathGuard."""
    methods = routes.fixed.get(path)
    if methods is None:
        methods = {method for pattern, owned in routes.templates if pattern.match(path) for method in owned}
    return _with_head(methods)


class FixedPathGuard(BaseRoute):
    """Answers 405 on a fixed path for the methods that only a template beside it takes: PATCH on
    `/client/equipment/bulk` would otherwise reach `PATCH /client/equipment/{equipmentId}` and
    answer 404 (or 422) for an id "bulk". One dictionary look-up per request that reaches it."""

    def __init__(self, refused: dict[str, frozenset[str]]) -> None:
        self.refused = refused

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http" and scope["method"] in self.refused.get(scope["path"], ()):
            return Match.FULL, {}
        return Match.NONE, {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise StarletteHTTPException(405)  # rendered, with Allow, by handle_http_error

    def url_path_for(self, name: str, /, **path_params: Any) -> URLPath:
        raise NoMatchFound(name, path_params)


def install_fixed_path_guard(app: FastAPI, routes: RouteMethods) -> None:
    """Put a FixedPathGuard first among the app's routes, for every fixed path that a template
    beside it would take with other methods; nothing when none collides."""
    refused: dict[str, frozenset[str]] = {}
    for path, methods in routes.fixed.items():
        taken = {method for pattern, owned in routes.templates if pattern.match(path) for method in owned}
        taken -= methods
        if taken:
            refused[path] = frozenset(_with_head(taken))
    if refused:
        app.router.routes.insert(0, FixedPathGuard(refused))


def _unavailable(request: Request, exc: Exception, message: str) -> JSONResponse:
    # One warning line per request (outage_detail: no SQL, parameters or stack trace).
    request_id = getattr(request.state, "request_id", "-")
    logger.warning(
        "answered 503 to %s %s (request %s): %s",
        request.method,
        request.url.path,
        request_id,
        outage_detail(exc),
    )
    return JSONResponse(
        error_body(message), status_code=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)}
    )


# PostgreSQL's deadlock_detected and serialization_failure: the transaction was undone for a
# concurrent one, and the same request sent again goes through.
_TRANSIENT_SQLSTATES = frozenset({"40P01", "40001"})
# A statement the database (or its driver) refuses for its size: PostgreSQL's class 54,
# program_limit_exceeded (too complex, too many arguments or columns), and the driver-side limits
# raised as OperationalError with no SQLSTATE. Sent again it fails again, so it is no outage.
_TOO_LARGE_SQLSTATE_CLASS = "54"
_TOO_LARGE_MESSAGES = (
    "number of parameters must be between 0 and 65535",  # psycopg: the protocol's 16-bit count
    "too many sql variables",  # SQLite: SQLITE_LIMIT_VARIABLE_NUMBER
    "expression tree is too large",  # SQLite: SQLITE_LIMIT_EXPR_DEPTH
    "too many terms in compound select",
    "string or blob too big",
    "statement too long",
    "stack depth limit exceeded",
)
TOO_LARGE = (
    "This request is too large for the database to answer in one statement (too many values or "
    "conditions): send it in smaller parts."
)


def too_large_message(exc: BaseException) -> str | None:
    """What to tell a client (with a 400) when the database refused the statement for its size:
    the request, not the database, is at fault, and sent again it fails again. Else None."""
    orig = getattr(exc, "orig", None)
    if not isinstance(exc, sa_exc.DBAPIError) or orig is None:
        return None
    if str(getattr(orig, "sqlstate", None) or "").startswith(_TOO_LARGE_SQLSTATE_CLASS):
        return TOO_LARGE
    text = str(orig).lower()
    return TOO_LARGE if any(message in text for message in _TOO_LARGE_MESSAGES) else None


def outage_message(exc: BaseException) -> str | None:
    """What to tell a client (with a 503 and Retry-After) when `exc` is passing, else None: the
    database out of reach, or this transaction undone for a concurrent one (a deadlock).

    Out of reach: the pool found no free connection within OUTFITTER_DB_POOL_TIMEOUT;
    OperationalError and InterfaceError (connection refused or lost, server shutting down, SQLite's
    file missing or locked); any DBAPIError for which SQLAlchemy invalidated the connection (the
    backend was killed). Every other database error (IntegrityError, ProgrammingError,
    DataError...) is a bug or a conflict, not an outage."""
    if isinstance(exc, sa_exc.TimeoutError):
        if metrics.active is not None:
            metrics.active.pool_timeouts.inc()
        return POOL_EXHAUSTED
    if getattr(getattr(exc, "orig", None), "sqlstate", None) in _TRANSIENT_SQLSTATES:
        return WRITES_CROSSED  # the database is fine: a retry succeeds
    if too_large_message(exc) is not None:  # the request's fault: 400 (handle_database_error)
        return None
    if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError) or (
        isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated
    ):
        return DATABASE_UNAVAILABLE
    return None


async def handle_database_error(request: Request, exc: sa_exc.SQLAlchemyError) -> JSONResponse:
    too_large = too_large_message(exc)
    if too_large is not None:
        logger.warning("answered 400 to %s %s: %s", request.method, request.url.path, outage_detail(exc))
        return JSONResponse(error_body(too_large), status_code=400)
    message = outage_message(exc)
    if message is None:
        raise exc  # on to the 500
    return _unavailable(request, exc, message)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, handle_validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(DomainError, handle_domain_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, handle_http_error)  # type: ignore[arg-type]
    for database_error in (
        sa_exc.TimeoutError,
        sa_exc.OperationalError,
        sa_exc.InterfaceError,
        sa_exc.DBAPIError,
    ):
        app.add_exception_handler(database_error, handle_database_error)  # type: ignore[arg-type]
