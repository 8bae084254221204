"""The SCIM application, mounted at /scim/v2 by `outfitter.app`: its own error handlers, because
every SCIM failure is a SCIM Error message (RFC 7644 section 3.12), never the API's envelope."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from scim2_models import SCIMException
from starlette.datastructures import State
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from outfitter.core.errors import RETRY_AFTER_SECONDS, DomainError
from outfitter.http.handlers import (
    field_path,
    methods_of_path,
    outage_message,
    route_methods,
    too_large_message,
)
from outfitter.scim.responses import error_response
from outfitter.scim.router import MOUNT_PATH, router

logger = logging.getLogger("outfitter")

__all__ = ["MOUNT_PATH", "create_scim_app"]

# The API's typed errors, as SCIM answers them: 422 is SCIM's 400 invalidValue, a conflict is a
# uniqueness one (every 409 the people rules raise is a name, email or id already taken).
_SCIM_TYPES = {400: "invalidValue", 409: "uniqueness", 422: "invalidValue"}


def create_scim_app(state: State) -> FastAPI:
    """The SCIM sub-application, sharing `state` (engine, sessions, rate limits) with the API's."""
    # No redirect for a trailing slash (as the API's): a 404 SCIM Error, before any token is read.
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None, redirect_slashes=False)
    app.state = state
    app.include_router(router)
    app.add_exception_handler(SCIMException, _scim_error)
    app.add_exception_handler(DomainError, _domain_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_middleware(_ScimFailures)
    return app


async def _scim_error(request: Request, exc: Any) -> Response:
    error = exc.to_error()
    return error_response(int(error.status or exc.status), error.detail or str(exc), error.scim_type)


async def _domain_error(request: Request, exc: Any) -> Response:
    assert isinstance(exc, DomainError)
    status = 400 if exc.status_code == 422 else exc.status_code
    return error_response(status, exc.message, _SCIM_TYPES.get(exc.status_code), exc.headers)


async def _validation_error(request: Request, exc: Any) -> Response:
    errors = list(exc.errors())
    if any(error.get("type") == "json_invalid" for error in errors):
        return error_response(400, "The request body is not valid JSON.", "invalidSyntax")
    first = errors[0] if errors else {}
    detail = f"{field_path(first.get('loc', ()))}: {first.get('msg', 'Invalid value')}"
    return error_response(400, detail, "invalidValue")


# Each SCIM path's methods, for a 405's Allow (the router names only the first route it matched).
_ROUTE_METHODS = route_methods(MOUNT_PATH, [router])


async def _http_error(request: Request, exc: Any) -> Response:
    if exc.status_code == 405 and (allowed := methods_of_path(_ROUTE_METHODS, request.url.path)):
        detail = f"{request.method} is not allowed here; this path takes {', '.join(allowed)}."
        return error_response(405, detail, None, {"Allow": ", ".join(allowed)})
    messages = {
        404: "No such SCIM endpoint: see /scim/v2/ResourceTypes.",
        405: "This endpoint does not take that method.",
    }
    # A 400 here is a body FastAPI could not parse (one nested past what the parser takes, say).
    scim_type = "invalidSyntax" if exc.status_code == 400 else None
    return error_response(exc.status_code, messages.get(exc.status_code, str(exc.detail)), scim_type)


class _ScimFailures:
    """Anything unexpected as a SCIM Error: 503 (with Retry-After) when the database is out of
    reach, 400 `tooMany` when it refused a statement for its size, else a 500 that names nothing
    internal, logged with the request's id."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            if started:
                raise
            outage = outage_message(exc)
            too_large = too_large_message(exc)
            if too_large is not None:  # the request's shape, not an outage: sent again it fails again
                logger.warning("SCIM answered 400: %s", type(exc).__name__)
                response = error_response(400, too_large, "tooMany")
            elif outage is not None:
                logger.warning("SCIM answered 503: %s", type(exc).__name__)
                response = error_response(503, outage, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
            else:
                request_id = scope.get("state", {}).get("request_id", "-")
                logger.exception("SCIM request %s failed: %s %s", request_id, scope["method"], scope["path"])
                undone = "" if scope["method"] in ("GET", "HEAD") else "; the change was not made"
                response = error_response(
                    500,
                    f"Something went wrong on our side{undone}. Quote request id {request_id} when "
                    "reporting it.",
                )
            await response(scope, receive, send)
