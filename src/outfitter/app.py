"""create_app(): routers, error handlers, middleware and the engine's lifetime."""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from functools import partial
from pathlib import Path

import swagger_ui
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import SQLAlchemyError

from outfitter.catalog.router import router as catalog_router
from outfitter.config import Settings, get_settings
from outfitter.config.database_url import display_database_url
from outfitter.console.app import install_console
from outfitter.console.device_bulk import IMPORT_PATH as CONSOLE_DEVICES_IMPORT_PATH
from outfitter.console.operator.app import install_operator_console
from outfitter.core import metrics
from outfitter.core.errors import RETRY_AFTER_SECONDS, error_body
from outfitter.core.schemas import Envelope, Schema, ok
from outfitter.csvio.reader import MAX_IMPORT_BYTES
from outfitter.customfields.router import router as custom_fields_router
from outfitter.db.asyncpg_reads import AsyncpgReads, OptionsAsyncpgLacks
from outfitter.db.session import make_engine, make_sessionmaker, watch_pool
from outfitter.db.tenancy import TenantSession, across_companies
from outfitter.equipment.router import router as equipment_router
from outfitter.events.router import router as events_router
from outfitter.http.cors import ListedOriginsCORS
from outfitter.http.handlers import install_error_handlers, install_fixed_path_guard, route_methods
from outfitter.http.idempotency import IdempotencyMiddleware
from outfitter.http.input_guard import InputGuardMiddleware
from outfitter.http.middleware import BodyLimitMiddleware, HeadAsGetMiddleware, RequestContextMiddleware
from outfitter.http.openapi import install_contract, operation_id
from outfitter.http.ratelimit import RateLimiter
from outfitter.locations.router import router as locations_router
from outfitter.migrations import schema_state
from outfitter.payments.router import router as payments_router
from outfitter.payments.router import sandbox_router
from outfitter.people.router import router as people_router
from outfitter.scim.app import MOUNT_PATH as SCIM_PATH
from outfitter.scim.app import create_scim_app
from outfitter.scim.responses import refusal as scim_refusal
from outfitter.webhooks.openapi import add_webhooks
from outfitter.webhooks.router import router as webhooks_router
from outfitter.worker.status import QueueCollector, queue_state, workers

API_PREFIX = "/api/v2"
# The only paths whose body is a CSV file (text/csv, up to MAX_IMPORT_BYTES), not JSON.
CSV_IMPORT_PATHS = ("/client/employees/import", "/client/equipment/import")
# The console's uploads of the same files (multipart forms), held to the same size.
CONSOLE_CSV_IMPORT_PATHS = ("/console/employees/import", CONSOLE_DEVICES_IMPORT_PATH)

logger = logging.getLogger("outfitter")


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    if settings.metrics_token:
        metrics.enable(settings.metrics_dir)
    engine = make_engine(
        settings.database_url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_pool_max_overflow,
        pool_timeout=settings.db_pool_timeout,
    )
    watch_pool(engine, settings.db_pool_max_overflow)

    # PostgreSQL's read-only hot paths run on the event loop through asyncpg (db.reads).
    reads = _asyncpg_reads(settings) if engine.dialect.name == "postgresql" else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if reads is not None:
            await reads.start()
        try:
            yield
        finally:
            if reads is not None:
                await reads.close()
            engine.dispose()

    app = FastAPI(
        title="Outfitter",
        version="2.0.0",
        summary="Equip employees: catalog, people, equipment and payments.",
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=None,  # served by _add_docs, from local assets
        redoc_url=None,
        lifespan=lifespan,
        # A path with a trailing slash is a 404 that says so, not a redirect: Starlette's redirect
        # is built from the Host header, and a POST's client would have to send the body again.
        redirect_slashes=False,
        generate_unique_id_function=operation_id,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessionmaker = make_sessionmaker(engine, TenantSession)
    app.state.reads = reads
    app.state.rate_limiter = RateLimiter(settings.rate_limit, settings.redis_url)
    app.state.scim_rate_limiter = RateLimiter(settings.scim_rate_limit, settings.redis_url, "scim")

    install_error_handlers(app)
    # Added last runs first: the request id must wrap everything, including the body checks.
    app.add_middleware(
        IdempotencyMiddleware,
        sessions=app.state.sessionmaker,
        ttl=timedelta(hours=settings.idempotency_ttl_hours),
        prefix=API_PREFIX + "/",
    )
    app.add_middleware(InputGuardMiddleware, json_prefixes=(f"{API_PREFIX}/", f"{SCIM_PATH}/"))
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.max_body_bytes,
        csv_paths=frozenset((*(API_PREFIX + path for path in CSV_IMPORT_PATHS), *CONSOLE_CSV_IMPORT_PATHS)),
        csv_max_bytes=MAX_IMPORT_BYTES,
    )
    app.add_middleware(HeadAsGetMiddleware)
    route_templates: dict[int, str] = {}  # filled once the routers are included
    app.add_middleware(
        RequestContextMiddleware,
        error_formats={SCIM_PATH: scim_refusal},
        access_log=settings.log_format == "json",
        route_templates=route_templates,
        mounts=(SCIM_PATH,),
    )
    if settings.cors_origins:  # outermost: a preflight is answered before any other check
        app.add_middleware(ListedOriginsCORS, origins=settings.cors_origins)

    # SCIM first: a mount costs the API's requests one prefix test, where SCIM's would otherwise
    # walk every API route before reaching it.
    app.mount(SCIM_PATH, create_scim_app(app.state))
    install_console(app)  # the web console's pages (docs/console.md), outside the API's document
    install_operator_console(app)  # Outfitter's staff (docs/console.md, "Operator console")
    # Each router straight on the app, the hottest first: FastAPI matches a request by walking the
    # routes in order, level by level, and that walk was a third of a single retrieve's CPU.
    domain_routers = (
        equipment_router,
        people_router,
        locations_router,
        catalog_router,
        payments_router,
        events_router,
        webhooks_router,
        custom_fields_router,
    )
    for domain_router in domain_routers:
        app.include_router(domain_router, prefix=API_PREFIX)
        route_templates.update(
            {
                id(route): API_PREFIX + route.path
                for route in domain_router.routes
                if isinstance(route, APIRoute)
            }
        )
    app.state.route_methods = route_methods(API_PREFIX, domain_routers)
    install_fixed_path_guard(app, app.state.route_methods)
    if settings.sandbox_gateway_served:
        app.include_router(sandbox_router)
    _add_docs(app)
    _add_health_checks(app)
    _add_metrics(app)
    install_contract(app, partial(add_webhooks, timeout_seconds=settings.webhook_timeout_seconds))
    return app


# Swagger UI's files, from the swagger-ui-py package: the docs page needs no internet.
SWAGGER_UI_ASSETS = Path(swagger_ui.__file__).parent / "static"
DOCS_ASSETS = f"{API_PREFIX}/docs/assets"


def _add_docs(app: FastAPI) -> None:
    app.mount(DOCS_ASSETS, StaticFiles(directory=SWAGGER_UI_ASSETS), name="docs-assets")

    @app.get(f"{API_PREFIX}/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=f"{API_PREFIX}/openapi.json",
            title="Outfitter API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png",
            # The token given to Authorize lives in the page, not in the browser's localStorage
            # (where it would outlive the tab and be open to any script of this origin).
            swagger_ui_parameters={"persistAuthorization": False},
        )


class NotReady(Schema):
    """/readyz's 503: the error envelope, with each dependency's state in `data`."""

    success: bool = False
    message: str
    data: dict[str, str]


def _add_health_checks(app: FastAPI) -> None:
    @app.get(
        "/healthz", response_model=Envelope[dict[str, str]], tags=["operations"], summary="Process is up"
    )
    def healthz() -> dict[str, object]:
        """Answers 200 while the process serves requests, whatever its dependencies' state: for a
        liveness probe. Readiness (the database reachable) is /readyz."""
        return ok({"status": "ok"}, "Service is up.")

    @app.get(
        "/readyz",
        response_model=Envelope[dict[str, str]],
        responses={
            503: {
                "model": NotReady,
                "description": "The database is unreachable, or not at this release's schema",
            }
        },
        tags=["operations"],
        summary="Each dependency's state; 503 if the database is unreachable or at another release's schema",
    )
    def readyz() -> object:
        """Each dependency's state, for a readiness probe: 503 while the database is unreachable or
        its schema is not this release's. Redis (rate limits, which fail open) and the worker
        (whether the webhook queue is kept up with) are reported only: taking this server out of
        rotation would help neither."""
        database, migrations = _check_database(app)
        checks = {
            "database": database,
            "migrations": migrations,
            "redis": app.state.rate_limiter.storage_state(),
            "worker": "unknown",
        }
        if database != "ok" or migrations != "current":
            body = error_body(NOT_READY[database if database != "ok" else migrations])
            body["data"] = checks
            return JSONResponse(body, status_code=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
        checks["worker"], worry = _check_worker(app)
        return ok(checks, "Service is ready." + (f" {worry}" if worry else ""))


def _add_metrics(app: FastAPI) -> None:
    @app.get("/metrics", include_in_schema=False)
    def serve_metrics(request: Request) -> Response:
        """Every process's metrics in Prometheus' text format, for a scraper that sends the bearer
        token OUTFITTER_METRICS_TOKEN; a 404 while it is unset (docs/operations.md, "Metrics")."""
        token = app.state.settings.metrics_token
        recorder = metrics.active
        if not token or recorder is None:
            return JSONResponse(
                error_body("Metrics are off: set OUTFITTER_METRICS_TOKEN to serve them."), status_code=404
            )
        scheme, _, given = (request.headers.get("authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
            return JSONResponse(
                error_body("Send the metrics token: 'Authorization: Bearer <OUTFITTER_METRICS_TOKEN>'."),
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        body = recorder.render([QueueCollector(app.state.sessionmaker)])
        return Response(body, media_type=METRICS_MEDIA_TYPE)


# Prometheus' text exposition format, version 0.0.4 (prometheus_client.CONTENT_TYPE_LATEST).
METRICS_MEDIA_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _asyncpg_reads(settings: Settings) -> AsyncpgReads | None:
    """The hot reads' pool, or none (the session serves them, as on SQLite) when the database URL
    has options asyncpg cannot honour: it would send them to the server, which refuses them."""
    try:
        return AsyncpgReads(settings.database_url, settings.db_read_pool_size, settings.db_pool_timeout)
    except OptionsAsyncpgLacks as exc:
        logger.warning(
            "the hot reads go through psycopg, not asyncpg, which cannot honour the database URL's "
            "option(s) %s (docs/operations.md, 'Database connections')",
            exc,
        )
        return None


NOT_READY = {
    "unreachable": "The database is unreachable.",
    "behind": "The database schema is behind this release: run 'outfitter db upgrade'.",
    "ahead": "The database schema is newer than this release: run the release that migrated it.",
}


def _check_database(app: FastAPI) -> tuple[str, str]:
    """The database ("ok" or "unreachable") and its migrations: "current", "behind" (every request
    would fail on a missing table), "ahead" (migrated by a newer release: this one does not know
    its tables), or "unknown" while the database is out of reach."""
    try:
        state = schema_state(app.state.engine)
    except SQLAlchemyError as exc:
        logger.warning("readiness: the database is unreachable: %s", type(exc).__name__)
        return "unreachable", "unknown"
    if state != "current":
        # The log names the database; the public answer does not.
        database = display_database_url(app.state.settings.database_url)
        relation = "ahead of" if state == "ahead" else "behind"
        logger.warning("readiness: the database schema in %s is %s this release", database, relation)
    return "ok", state


def _check_worker(app: FastAPI) -> tuple[str, str | None]:
    """Whether the webhook queue is kept up with: "ok", "behind" (a due delivery has waited past
    OUTFITTER_WORKER_LAG_THRESHOLD_SECONDS), "no worker" (deliveries are due and no worker has beat
    lately) or "unknown"; and a sentence for the message when it is not "ok"."""
    threshold = app.state.settings.worker_lag_threshold_seconds
    try:
        with across_companies(app.state.sessionmaker()) as session:
            state = queue_state(session)
            alive = sum(worker.alive for worker in workers(session))
    except SQLAlchemyError as exc:
        logger.warning("readiness: the webhook queue could not be read: %s", type(exc).__name__)
        return "unknown", None
    if state.behind(threshold):
        return "behind", (
            f"The worker is behind: a due webhook delivery has waited {state.lag:.0f} s "
            f"(threshold {threshold:g} s; 'outfitter status' says more)."
        )
    if state.due and not alive:
        return "no worker", (
            f"{state.due} webhook deliveries are due and no worker has beat lately: start 'outfitter worker'."
        )
    return "ok", None
