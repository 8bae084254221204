"""The guard against input no endpoint can handle: NUL, lone surrogates, numbers JSON or Python
cannot read, JSON nested too deep. Refused with a 422 (or 400) naming the field, before any endpoint."""

from __future__ import annotations

import json
import re
import sys
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from outfitter.core.errors import ValidationFailed
from outfitter.http.handlers import UNREADABLE_BODY
from outfitter.http.middleware import (
    BODY_METHODS,
    is_json,
    read_body,
    replaying,
    send_error,
)

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
# search at C speed, where a regex such as [0-9]{4301} is tried again at every digit.
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
    # brackets.
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
        if scope["method"] not in BODY_METHODS or not scope["path"].startswith(self.json_prefixes):
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)
        if body is None:
            return  # the client went away
        if is_json(scope):
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
