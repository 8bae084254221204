"""The console as a sub-application at /console, sharing the API's state (engine, sessions)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import State
from starlette.exceptions import HTTPException as StarletteHTTPException

from outfitter.config import Settings
from outfitter.console import (
    activity,
    buying,
    custom_fields,
    device_bulk,
    device_checkout,
    device_pages,
    employee_export,
    integration_pages,
    locations,
    orders,
    people,
    profile,
    transactions,
    webhook_pages,
)
from outfitter.console.pages import router
from outfitter.console.web import (
    HERE,
    MOUNT_PATH,
    SECURITY_HEADERS,
    SIGN_IN_PER_ACCOUNT,
    SIGN_IN_PER_ADDRESS,
    CookiePolicy,
    http_error,
    redirect,
)
from outfitter.http.ratelimit import RateLimiter


def install_console(app: FastAPI) -> None:
    """Mount the console at /console (and send /console itself to its dashboard)."""
    app.mount(MOUNT_PATH, create_console_app(app.state))

    @app.get(MOUNT_PATH, include_in_schema=False)
    async def console_root() -> RedirectResponse:
        return redirect(f"{MOUNT_PATH}/", 308)


def create_console_app(state: State) -> FastAPI:
    """The console, a sub-application at /console sharing the API's state (engine, sessions): none
    of it is in the API's OpenAPI document."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None, redirect_slashes=False)
    app.state = state
    settings: Settings = state.settings
    state.console_cookies = CookiePolicy.of(settings)
    state.console_sign_in_limits = (
        RateLimiter(SIGN_IN_PER_ACCOUNT, settings.redis_url, "console"),
        RateLimiter(SIGN_IN_PER_ADDRESS, settings.redis_url, "console"),
    )
    app.mount("/static", StaticFiles(directory=HERE / "static", packages=None), name="static")
    app.include_router(router)
    app.include_router(device_checkout.router)  # before people: /employees/{id}/offboard
    app.include_router(employee_export.router)  # before people: /employees/export is no id
    app.include_router(people.router)
    app.include_router(locations.router)
    app.include_router(activity.router)
    app.include_router(profile.router)
    app.include_router(orders.router)
    app.include_router(buying.router)
    app.include_router(transactions.router)
    app.include_router(integration_pages.router)
    app.include_router(webhook_pages.router)
    app.include_router(custom_fields.router)
    app.include_router(device_bulk.router)  # before device_pages: /devices/import is not a device id
    app.include_router(device_pages.router)
    app.add_exception_handler(StarletteHTTPException, http_error)

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Callable[..., Any]) -> Response:
        response: Response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        if not request.url.path.startswith(f"{MOUNT_PATH}/static/"):
            response.headers.setdefault("Cache-Control", "no-store")
        return response

    return app
