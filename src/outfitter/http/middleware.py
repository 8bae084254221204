"""Pure ASGI middleware: request ids, trace context, the request's metrics and log line, HEAD as
GET, and body limits (size and media type). The guard against input no endpoint can handle is
`http.input_guard`."""

from __future__ import annotations

import contextlib
import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from outfitter.core import metrics
from outfitter.core.errors import error_body
from outfitter.core.logs import ACCESS_LOGGER
from outfitter.core.tracing import current_request_id, current_trace_id, new_trace_id, trace_id_of
from outfitter.http.handlers import methods_of_path

logger = logging.getLogger("outfitter")
access_logger = logging.getLogger(ACCESS_LOGGER)
SCIM_PREFIX = "/scim/"

_SANE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
BODY_METHODS = {"POST", "PUT", "PATCH"}


Errors = Mapping[str, Sequence[str]]
# How a refusal made before any endpoint runs is written: (status, message, field errors or None)
# to (status, media type, body). An app mounted with an error format of its own (SCIM's) gives
# one for its paths (`RequestContextMiddleware`), so that its clients never see the API's envelope.
ErrorFormat = Callable[[int, str, Errors | None], tuple[int, str, bytes]]


def api_error(status: int, message: str, errors: Errors | None) -> tuple[int, str, bytes]:
    """The API's envelope (`core.errors.error_body`)."""
    return status, "application/json", orjson.dumps(error_body(message, errors))


async def send_error(
    scope: Scope,
    send: Send,
    status: int,
    message: str,
    headers: list[tuple[bytes, bytes]],
    errors: Errors | None = None,
) -> None:
    """Refuse the request, in the error format of the app its path is under."""
    error_format: ErrorFormat = scope.get("state", {}).get("error_format", api_error)
    status, media_type, payload = error_format(status, message, errors)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", media_type.encode()),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def header_value(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


class RequestContextMiddleware:
    """Gives every request an id (the client's when sane) and echoes it, with rate-limit headers;
    sets its trace (`core.tracing`); once it is answered, counts it (`core.metrics`, when on) and,
    with `access_log`, writes its line on the `outfitter.access` logger (`OUTFITTER_LOG_FORMAT=json`).
    Outermost, so that it also renders the 500 for anything unexpected, without internals. A path
    under one of `error_formats`' prefixes is refused in that format, by every middleware."""

    def __init__(
        self,
        app: ASGIApp,
        error_formats: Mapping[str, ErrorFormat] | None = None,
        access_log: bool = False,
        route_templates: Mapping[int, str] | None = None,
        mounts: Sequence[str] = (),
    ) -> None:
        self.app = app
        self.error_formats = dict(error_formats or {})
        self.access_log = access_log
        # The full template of each route included under a prefix, by the route's id (FastAPI puts
        # the route itself, whose path lacks the prefix, in the scope); the apps mounted at `mounts`
        # give their routes' paths below the mount.
        self.route_templates = route_templates if route_templates is not None else {}
        self.mounts = tuple(mounts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        offered: bytes | None = None
        traceparent: bytes | None = None
        for key, value in scope["headers"]:  # one pass for both
            if key == b"x-request-id":
                offered = value
            elif key == b"traceparent":
                traceparent = value
        given = offered.decode("latin-1") if offered else None
        request_id = given if given and _SANE_REQUEST_ID.match(given) else uuid.uuid4().hex
        state: dict[str, Any] = scope.setdefault("state", {})
        state["request_id"] = request_id
        current_request_id.set(request_id)  # each request is a task of its own: nothing to reset
        current_trace_id.set(trace_id_of(traceparent) or new_trace_id())
        for prefix, error_format in self.error_formats.items():
            if scope["path"].startswith(prefix):
                state["error_format"] = error_format

        response_started = False
        status = 500

        async def send_with_headers(message: Message) -> None:
            nonlocal response_started, status
            if message["type"] == "http.response.start":
                response_started = True
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                for name, value in state.get("rate_limit_headers", {}).items():
                    headers.append((name.lower().encode(), value.encode()))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            logger.exception(
                "unhandled error on %s %s (request %s)", scope["method"], scope["path"], request_id
            )
            if response_started:
                raise
            await send_error(
                scope,
                send_with_headers,
                500,
                f"Internal error. Quote request id {request_id} when reporting it.",
                [],
            )
        finally:
            recorder = metrics.active
            if recorder is not None or self.access_log:
                seconds = time.perf_counter() - started
                route = self.route_template(scope)
                if recorder is not None:
                    recorder.request(scope["method"], route, status, seconds)
                    if scope["path"].startswith(SCIM_PREFIX):
                        recorder.count(recorder.scim_requests, scope["method"], str(status))
                if self.access_log:
                    _log_request(scope, state, route, status, seconds)

    def route_template(self, scope: Scope) -> str:
        """The template of the route that answered (`/api/v2/client/equipment/{equipmentId}`),
        never the path itself (ids and all: a metric label or a log field per device);
        "(unmatched)" when no route did (a 404)."""
        route = scope.get("route")
        if route is None:
            return metrics.UNMATCHED_ROUTE
        template = self.route_templates.get(id(route))
        if template is not None:
            return template
        path = str(getattr(route, "path", metrics.UNMATCHED_ROUTE))
        for mount in self.mounts:
            if scope["path"].startswith(mount) and not path.startswith(mount):
                return mount + path
        return path


def _log_request(scope: Scope, state: dict[str, Any], route: str, status: int, seconds: float) -> None:
    """The request's one line: what an operator follows a request by, none of what it carried."""
    access_logger.info(
        "%s %s %d",
        scope["method"],
        route,
        status,
        extra={
            "method": scope["method"],
            "route": route,
            "status": status,
            "duration_ms": round(seconds * 1000, 2),
            "company_id": state.get("company_id"),
            "token_id": state.get("token_id"),
        },
    )


class _HeadAnswered(BaseException):
    """A HEAD's status and headers are sent: the GET behind it stops (BaseException, so that no
    handler of the app's takes it for an error)."""


class HeadAsGetMiddleware:
    """HEAD is a GET answered with its head only (RFC 9110 asks every server for both): the app
    answers the GET, and this sends its status and headers (Content-Length included) and an empty
    body, then stops the GET. So a streamed answer (a CSV export) reads nothing more than its
    first piece: otherwise the server read the whole export for a HEAD, and a keep-alive
    connection waited for it, whatever server runs the app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def head_only(message: Message) -> None:
            if message["type"] != "http.response.body":
                await send(message)
                return
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            raise _HeadAnswered

        with contextlib.suppress(_HeadAnswered):
            await self.app({**scope, "method": "GET"}, receive, head_only)


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body, for a middleware that must see it before the app; None when the
    client went away before sending all of it. The size is bounded by BodyLimitMiddleware."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the app the body `read_body` took, in one message, then the real one
    (which tells of a disconnect)."""
    return replaying_message({"type": "http.request", "body": body, "more_body": False}, receive)


def replaying_message(message: Message, receive: Receive) -> Receive:
    """A `receive` that gives `message`, already taken from `receive`, then the real ones."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return message

    return replay


_NOT_CSV = (
    "The request body must be CSV: send 'Content-Type: text/csv', "
    "or upload the file as multipart/form-data in the field 'file'."
)
_NOT_JSON = "The request body must be JSON: send 'Content-Type: application/json'."


class _BodyTooLarge(BaseException):
    """BaseException, because FastAPI turns any Exception raised while reading a body into a 400."""


class BodyLimitMiddleware:
    """413 for bodies over the limit (declared or streamed), 415 for non-JSON bodies on the API.

    The CSV imports (`csv_paths`, exactly those paths) take `text/csv` (or the file uploaded as
    `multipart/form-data`) instead, up to `csv_max_bytes`; every other path keeps JSON and
    `max_bytes`."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        json_prefix: str = "/api/",
        csv_paths: frozenset[str] = frozenset(),
        csv_max_bytes: int = 0,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.json_prefix = json_prefix
        self.csv_paths = csv_paths
        self.csv_max_bytes = csv_max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        # Only POST takes a file: other methods there are refused by the router (405), whatever the body.
        takes_csv = scope["method"] == "POST" and scope["path"] in self.csv_paths
        limit = self.csv_max_bytes if takes_csv else self.max_bytes
        too_large = f"The request body is larger than the limit of {limit} bytes."
        declared = header_value(scope, b"content-length")
        if declared is not None and not declared.isdigit():
            await send_error(
                scope, send, 400, "The Content-Length header must be a whole number of bytes.", []
            )
            return
        if declared is not None and int(declared) > limit:
            await send_error(scope, send, 413, too_large, [])
            return
        if scope["path"].startswith(self.json_prefix) and (declared is None or declared != "0"):
            has_body = declared is not None or header_value(scope, b"transfer-encoding") is not None
            refusal = None
            if has_body and takes_csv and media_type(scope) not in ("text/csv", "multipart/form-data"):
                refusal = _NOT_CSV
            elif has_body and not takes_csv and not is_json(scope):
                refusal = _NOT_JSON
            # Only where an endpoint reads the body: else the router's 404 or 405 says what is wrong.
            if refusal is not None and _routed(scope):
                await send_error(scope, send, 415, refusal, [])
                return

        received = 0
        response_started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _BodyTooLarge:
            if not response_started:
                await send_error(scope, send, 413, too_large, [])


def _routed(scope: Scope) -> bool:
    """Whether an endpoint takes this method on this path (`app.state.route_methods`, the API's
    routes; True for an app without them)."""
    routes = getattr(scope["app"].state, "route_methods", None)
    return routes is None or scope["method"] in methods_of_path(routes, scope["path"])


def media_type(scope: Scope) -> str:
    """The Content-Type without its parameters, lower case ("" when there is none)."""
    return (header_value(scope, b"content-type") or "").split(";")[0].strip().lower()


def is_json(scope: Scope) -> bool:
    given = media_type(scope)
    return given == "application/json" or given.endswith("+json")
