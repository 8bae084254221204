"""The operator console as a sub-application at /operator, sharing the API's state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from starlette.datastructures import State
from starlette.exceptions import HTTPException as StarletteHTTPException

from outfitter.config import Settings
from outfitter.console.operator import companies, orders, pages, watch
from outfitter.console.operator.web import (
    MOUNT_PATH,
    SIGN_IN_PER_ACCOUNT,
    SIGN_IN_PER_ADDRESS,
    OperatorCookies,
    http_error,
)
from outfitter.console.web import SECURITY_HEADERS, redirect
from outfitter.http.ratelimit import RateLimiter


def install_operator_console(app: FastAPI) -> None:
    app.mount(MOUNT_PATH, create_operator_app(app.state))

    @app.get(MOUNT_PATH, include_in_schema=False)
    async def operator_root() -> RedirectResponse:
        return redirect(f"{MOUNT_PATH}/", 308)


def create_operator_app(state: State) -> FastAPI:
    """Its pages use the console's stylesheet (/console/static); none is in the OpenAPI document."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None, redirect_slashes=False)
    app.state = state
    settings: Settings = state.settings
    state.operator_cookies = OperatorCookies.of(settings)
    state.operator_sign_in_limits = (
        RateLimiter(SIGN_IN_PER_ACCOUNT, settings.redis_url, "operator"),
        RateLimiter(SIGN_IN_PER_ADDRESS, settings.redis_url, "operator"),
    )
    app.include_router(pages.router)
    app.include_router(companies.router)
    app.include_router(orders.router)
    app.include_router(watch.router)
    app.add_exception_handler(StarletteHTTPException, http_error)

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Callable[..., Any]) -> Response:
        response: Response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    return app
