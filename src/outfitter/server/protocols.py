"""uvicorn's HTTP protocols, answering a request they cannot parse (malformed, or a request line and
headers over MAX_HEAD_BYTES) with the JSON error envelope instead of uvicorn's plain-text 400."""

from __future__ import annotations

import asyncio
import importlib.util
from typing import TYPE_CHECKING

import orjson
from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    pass


# The request line and headers of one request, together. httptools has no limit of its own (h11's is
# 16 KiB), and its URL parser gives up past 64 KiB: past this, the request is refused with a 400.
MAX_HEAD_BYTES = 65536
BAD_REQUEST_MESSAGE = (
    "The request could not be read: its request line and headers must be valid HTTP/1.1 "
    f"and at most {MAX_HEAD_BYTES} bytes together."
)


def event_loop() -> str:
    return "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"


def http_protocol() -> type[asyncio.Protocol]:
    if importlib.util.find_spec("httptools") is not None:
        return EnvelopeHttpToolsProtocol
    return EnvelopeH11Protocol


def _bad_request_response(default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """The whole 400 response, in the error envelope (uvicorn's own is text/plain)."""
    from outfitter.core.errors import error_body

    body = orjson.dumps(error_body(BAD_REQUEST_MESSAGE))
    head = [b"HTTP/1.1 400 Bad Request\r\n"]
    head += [name + b": " + value + b"\r\n" for name, value in default_headers]
    head += [
        b"content-type: application/json\r\n",
        b"content-length: " + str(len(body)).encode() + b"\r\n",
        b"connection: close\r\n\r\n",
    ]
    return b"".join(head) + body


class EnvelopeH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, answering what it cannot parse with the JSON envelope."""

    def send_400_response(self, msg: str) -> None:
        self.transport.write(_bad_request_response(self.server_state.default_headers))
        self.transport.close()


if importlib.util.find_spec("httptools") is not None:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class EnvelopeHttpToolsProtocol(HttpToolsProtocol):
        """uvicorn's httptools protocol, with a limit on the request line and headers, answering
        what it cannot parse (over the limit included) with the JSON envelope.

        Raising in a parser callback makes httptools raise HttpParserCallbackError, an
        HttpParserError, which uvicorn answers with send_400_response."""

        head_bytes = 0

        def on_message_begin(self) -> None:
            self.head_bytes = 0
            super().on_message_begin()

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count(len(name) + len(value) + 4)  # ": " and CRLF
            super().on_header(name, value)

        def _count(self, size: int) -> None:
            self.head_bytes += size
            if self.head_bytes > MAX_HEAD_BYTES:
                raise ValueError("request head over MAX_HEAD_BYTES")

        def send_400_response(self, msg: str) -> None:
            self.transport.write(_bad_request_response(self.server_state.default_headers))
            self.transport.close()
