"""Pure ASGI middleware: request ids, rate-limit headers, body limits (size and media type), and the
guard against input no endpoint can handle (NUL, lone surrogates, JSON nested too deep)."""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from outfitter.core.errors import ValidationFailed, error_body
from outfitter.core.handlers import UNREADABLE_BODY, methods_of_path

logger = logging.getLogger("outfitter")

# The request id of the request this task serves: the access line (outfitter.server) is written
# from within the response's `send`, where only this tells it which request it is.
current_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")

_SANE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_BODY_METHODS = {"POST", "PUT", "PATCH"}


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
    """Gives every request an id (the client's when sane) and echoes it, with rate-limit headers.
    Outermost, so that it also renders the 500 for anything unexpected, without internals. A path
    under one of `error_formats`' prefixes is refused in that format, by every middleware."""

    def __init__(self, app: ASGIApp, error_formats: Mapping[str, ErrorFormat] | None = None) -> None:
        self.app = app
        self.error_formats = dict(error_formats or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        offered = header_value(scope, b"x-request-id")
        request_id = offered if offered and _SANE_REQUEST_ID.match(offered) else uuid.uuid4().hex
        state: dict[str, Any] = scope.setdefault("state", {})
        state["request_id"] = request_id
        current_request_id.set(request_id)  # each request is a task of its own: nothing to reset
        for prefix, error_format in self.error_formats.items():
            if scope["path"].startswith(prefix):
                state["error_format"] = error_format

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
                scope,
                send_with_headers,
                500,
                f"Internal error. Quote request id {request_id} when reporting it.",
                [],
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
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS:
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
            if has_body and takes_csv and _media_type(scope) not in ("text/csv", "multipart/form-data"):
                refusal = _NOT_CSV
            elif has_body and not takes_csv and not _is_json(scope):
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


NUL = "\x00"
NUL_MESSAGE = "Must not contain NUL characters (\\u0000)."
SURROGATE_MESSAGE = "Must not contain a lone surrogate (\\ud800 to \\udfff): send valid Unicode text."
MAX_JSON_DEPTH = 64
DEPTH_MESSAGE = f"Arrays and objects must not be nested more than {MAX_JSON_DEPTH} levels deep."
# Text no column stores: NUL, and lone surrogates (UTF-8 cannot encode them; the driver fails).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# Where a JSON body can carry either: escapes (\u0000, \ud800..\udfff), raw bytes that Python's JSON
# decoder passes through (it decodes with "surrogatepass"), and UTF-16/32 bodies (NUL bytes).
_MAY_HOLD_UNSTORABLE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])|\x00|\xed[\xa0-\xbf]")
_QUOTED = re.compile(rb'"[^"]*"')
_ONLY_BRACKETS_AND_QUOTES = bytes(byte for byte in range(256) if byte not in b'[]{}"')
_BRACES_AS_BRACKETS = bytes.maketrans(b"{}", b"[]")


NON_JSON_NUMBER_MESSAGE = (
    "The request body is not valid JSON: NaN, Infinity and -Infinity are not JSON numbers."
)


# Python reads an integer of at most this many digits (sys.get_int_max_str_digits, 4,300 by
# default); a longer one, valid JSON, made the endpoint's parser fail with a vague 400.
_MAX_INT_DIGITS = sys.get_int_max_str_digits() or 4300
LONG_NUMBER_MESSAGE = (
    f"The request body holds a number of more than {_MAX_INT_DIGITS:,} digits; no field takes one."
)
# Every digit as "0" and every other byte as a space: a run of too many digits is then one byte
# search at C speed (0.2 ms on a 1,000-device body, where the regex [0-9]{4301}, tried at every
# digit, took 4.8 ms).
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_DIGIT_RUN = b"0" * (_MAX_INT_DIGITS + 1)


class _NonJsonNumber(Exception):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NonJsonNumber(name)


def _refuse_long_integer(digits: str) -> int:
    if len(digits.lstrip("-")) > _MAX_INT_DIGITS:
        raise _NonJsonNumber(digits[:20])
    return int(digits)


def _holds_non_json_number(body: bytes) -> bool:
    """Whether the body holds NaN or Infinity as a value (not inside a string): Python's parser
    takes them, RFC 8259 does not. Only parsed when the bytes appear (a search at C speed)."""
    return _parse_refusing(body, parse_constant=_refuse_constant)


def _holds_long_integer(body: bytes) -> bool:
    """Whether the body holds an integer too long for Python to read (not a run of digits inside
    a string, which is text). Only parsed when such a run appears."""
    return _LONG_DIGIT_RUN in body.translate(_DIGITS_AS_ZEROS) and _parse_refusing(
        body, parse_int=_refuse_long_integer
    )


def _parse_refusing(body: bytes, **hooks: Any) -> bool:
    try:
        json.loads(body, **hooks)
    except _NonJsonNumber:
        return True
    except ValueError:  # not JSON at all: the endpoint answers 400 itself
        return False
    return False


def _may_hold_unstorable(body: bytes) -> bool:
    """Whether a JSON body may carry unstorable text. Three byte searches first: C speed, ten times
    the regex's on a 200 KB body, and most bodies hold none of the three."""
    if b"\\u" not in body and b"\x00" not in body and b"\xed" not in body:
        return False
    return _MAY_HOLD_UNSTORABLE.search(body) is not None


def unstorable(text: str) -> str | None:
    """Why `text` cannot be stored (the message for its field), or None when it can."""
    if text.isascii() and NUL not in text:
        return None
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    return NUL_MESSAGE if found.group() == NUL else SURROGATE_MESSAGE


def printable_path(path: str) -> str:
    """A field path fit for the error body: NULs dropped, lone surrogates shown as U+FFFD."""
    return _UNSTORABLE.sub(lambda found: "" if found.group() == NUL else "\ufffd", path)


def nested_too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON `body` nests arrays and objects more than `limit` levels, found without
    parsing it (parsers recurse, and a deep enough body overflows them), in C-speed passes.

    Only the brackets outside strings count: escaped backslashes and quotes go first, then every
    byte but brackets and quotes, then what lies between quotes; `{}` count as `[]`. Each round
    then removes the innermost pairs, exactly one level: a body no deeper than `limit` has no
    brackets left after `limit` rounds, and `limit + 1` openers in a row are too deep at once.
    Brackets that do not pair up leave some too, so such a body is parsed to tell malformed
    early (the endpoint answers 400) from deep (the parser overflows, or succeeds)."""
    if body.count(b"[") + body.count(b"{") <= limit:  # cannot be deeper than its brackets
        return False
    unescaped = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    # Two quotes side by side hold nothing, or end one string where the next begins: dropping them
    # keeps what lies between quotes as it was, and leaves the regex only the strings that hold
    # brackets (a 1,000-device body: 0.3 ms rather than 1.8).
    quoted = unescaped.translate(_BRACES_AS_BRACKETS, _ONLY_BRACKETS_AND_QUOTES).replace(b'""', b"")
    brackets = _QUOTED.sub(b"", quoted)
    too_deep = b"[" * (limit + 1)
    for _ in range(limit):
        if not brackets:
            return False
        if too_deep in brackets:
            return True
        brackets = brackets.replace(b"[]", b"")
    if not brackets:
        return False
    try:
        json.loads(body)
    except RecursionError:
        return True
    except ValueError:
        return False  # malformed before it got deep: the endpoint answers 400
    return True


_UTF_8 = ("utf-8", "utf-8-sig")  # JSON between systems is UTF-8 (RFC 8259); a byte order mark is let be


class InputGuardMiddleware:
    """The one place that refuses input no endpoint can handle, before any endpoint runs:

    - a NUL character or a lone surrogate, which no text column stores: in the path (404: no record
      has such an id), in query parameters and in JSON strings and keys (422 naming each field);
    - a JSON body nested more than MAX_JSON_DEPTH levels (422), which would overflow a parser;
    - NaN or Infinity as a JSON value (400): not JSON, though Python's parser reads them; an
      integer longer than Python reads (400);
    - more than one Authorization header (400): which one counts would be a guess;
    - a JSON body in UTF-16 or UTF-32 (400: send UTF-8).

    Only JSON can carry a lone surrogate: percent-decoding (path, query, urlencoded forms) replaces
    invalid UTF-8 with U+FFFD, and multipart fields that are not valid in their charset are read as
    latin-1. The checks walk iteratively and cost next to nothing on ordinary input."""

    def __init__(self, app: ASGIApp, json_prefixes: tuple[str, ...] = ("/api/",)) -> None:
        self.app = app
        self.json_prefixes = json_prefixes  # where bodies are read: the API's, SCIM's

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if unstorable(scope["path"]):
            await send_error(scope, send, 404, "Not found.", [])
            return
        if sum(name == b"authorization" for name, _ in scope["headers"]) > 1:
            await send_error(scope, send, 400, "Send one Authorization header: this request has several.", [])
            return
        errors: dict[str, list[str]] = {}
        for name, value in parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True):
            problem = unstorable(name) or unstorable(value)
            if problem:
                errors[printable_path(f"query.{name}")] = [problem]
        if errors:
            await send_validation_error(scope, send, errors)
            return
        if scope["method"] not in _BODY_METHODS or not scope["path"].startswith(self.json_prefixes):
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)
        if body is None:
            return  # the client went away
        if _is_json(scope):
            if json.detect_encoding(body) not in _UTF_8:  # Python's parser reads UTF-16 and -32 too
                await send_error(scope, send, 400, UNREADABLE_BODY, [])
                return
            if nested_too_deep(body):
                await send_validation_error(scope, send, {"body": [DEPTH_MESSAGE]})
                return
            if (b"NaN" in body or b"Infinity" in body) and _holds_non_json_number(body):
                await send_error(scope, send, 400, NON_JSON_NUMBER_MESSAGE, [])
                return
            if _holds_long_integer(body):
                await send_error(scope, send, 400, LONG_NUMBER_MESSAGE, [])
                return
            if _may_hold_unstorable(body):  # only then is it worth parsing here
                try:
                    errors = unstorable_fields(json.loads(body))
                except ValueError:
                    errors = {}  # not JSON: the endpoint answers 400
                if errors:
                    await send_validation_error(scope, send, errors)
                    return
        await self.app(scope, replaying(body, receive), send)


def _media_type(scope: Scope) -> str:
    """The Content-Type without its parameters, lower case ("" when there is none)."""
    return (header_value(scope, b"content-type") or "").split(";")[0].strip().lower()


def _is_json(scope: Scope) -> bool:
    media_type = _media_type(scope)
    return media_type == "application/json" or media_type.endswith("+json")


def unstorable_fields(document: Any) -> dict[str, list[str]]:
    """The field paths (`employees.0.email`) of every string or key that cannot be stored, each with
    its message. Iterative: the depth is bounded before, but a walk must not recurse anyway."""
    found: dict[str, list[str]] = {}
    # (path, the key that leads there, value); pushed in reverse so that pop() keeps document order
    pending: list[tuple[str, str, Any]] = [("", "", document)]
    while pending:
        path, key, value = pending.pop()
        problem = unstorable(key) or (unstorable(value) if isinstance(value, str) else None)
        if problem:
            found[printable_path(path or "body")] = [problem]
        elif isinstance(value, dict):
            pending += [(f"{path}.{k}" if path else k, k, v) for k, v in reversed(value.items())]
        elif isinstance(value, list):
            pending += [
                (f"{path}.{i}" if path else str(i), "", v) for i, v in reversed(list(enumerate(value)))
            ]
    return found


async def send_validation_error(scope: Scope, send: Send, errors: dict[str, list[str]]) -> None:
    failure = ValidationFailed.fields(errors)
    await send_error(scope, send, 422, failure.message, [], failure.errors)
