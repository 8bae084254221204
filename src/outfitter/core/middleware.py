"""Pure ASGI middleware: request ids, rate-limit headers, and body limits (size and media type)."""

from __future__ import annotations

import json
import logging
import re
import uuid
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from outfitter.core.errors import ValidationFailed, error_body

logger = logging.getLogger("outfitter")

_SANE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_BODY_METHODS = {"POST", "PUT", "PATCH"}


async def send_error(send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]]) -> None:
    await send_json(send, status, error_body(message), headers)


async def send_json(send: Send, status: int, body: Any, headers: list[tuple[bytes, bytes]]) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
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
    """Gives every request an id (the client's when sane) and echoes it, with rate-limit headers.
    Outermost, so that it also renders the 500 for anything unexpected, without internals."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        offered = header_value(scope, b"x-request-id")
        request_id = offered if offered and _SANE_REQUEST_ID.match(offered) else uuid.uuid4().hex
        state: dict[str, Any] = scope.setdefault("state", {})
        state["request_id"] = request_id

        response_started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
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
                send_with_headers,
                500,
                f"Internal error. Quote request id {request_id} when reporting it.",
                [],
            )


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
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        takes_csv = scope["path"] in self.csv_paths
        limit = self.csv_max_bytes if takes_csv else self.max_bytes
        too_large = f"The request body is larger than the limit of {limit} bytes."
        declared = header_value(scope, b"content-length")
        if declared is not None and not declared.isdigit():
            await send_error(send, 400, "The Content-Length header must be a whole number of bytes.", [])
            return
        if declared is not None and int(declared) > limit:
            await send_error(send, 413, too_large, [])
            return
        if scope["path"].startswith(self.json_prefix) and (declared is None or declared != "0"):
            content_type = (header_value(scope, b"content-type") or "").split(";")[0].strip().lower()
            has_body = declared is not None or header_value(scope, b"transfer-encoding") is not None
            if takes_csv and has_body and content_type not in ("text/csv", "multipart/form-data"):
                await send_error(
                    send,
                    415,
                    "The request body must be CSV: send 'Content-Type: text/csv', "
                    "or upload the file as multipart/form-data in the field 'file'.",
                    [],
                )
                return
            if (
                not takes_csv
                and has_body
                and not (content_type == "application/json" or content_type.endswith("+json"))
            ):
                await send_error(
                    send, 415, "The request body must be JSON: send 'Content-Type: application/json'.", []
                )
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
                await send_error(send, 413, too_large, [])


NUL = "\x00"
NUL_MESSAGE = "Must not contain NUL characters (\\u0000)."


class NulGuardMiddleware:
    """The one place that refuses NUL characters, which no text column stores: in the path (404:
    no record has such an id), in query parameters and in JSON bodies (422 naming each field)."""

    def __init__(self, app: ASGIApp, json_prefix: str = "/api/") -> None:
        self.app = app
        self.json_prefix = json_prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if NUL in scope["path"]:
            await send_error(send, 404, "Not found.", [])
            return
        errors = {
            f"query.{name.replace(NUL, '')}": [NUL_MESSAGE]
            for name, value in parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
            if NUL in name or NUL in value
        }
        if errors:
            await send_validation_error(send, errors)
            return
        if scope["method"] not in _BODY_METHODS or not scope["path"].startswith(self.json_prefix):
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if b"\\u0000" in body:  # only then is it worth parsing here
            try:
                errors = {path: [NUL_MESSAGE] for path in nul_paths(json.loads(body))}
            except ValueError:
                errors = {}  # not JSON: the endpoint answers 400
            if errors:
                await send_validation_error(send, errors)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def nul_paths(value: Any, path: str = "") -> list[str]:
    """The field paths (`employees.0.email`) of every string or key holding a NUL."""
    if isinstance(value, str):
        return [path or "body"] if NUL in value else []
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            found += [child.replace(NUL, "")] if NUL in key else nul_paths(item, child)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += nul_paths(item, f"{path}.{index}" if path else str(index))
    return found


async def send_validation_error(send: Send, errors: dict[str, list[str]]) -> None:
    failure = ValidationFailed.fields(errors)
    await send_json(send, 422, error_body(failure.message, failure.errors), [])
