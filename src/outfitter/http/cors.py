"""CORS for the browsers of the origins an operator lists (OUTFITTER_CORS_ORIGINS): Starlette's
CORSMiddleware, except that a request from any other origin passes straight through, exactly as
with CORS off, so it gets no `Access-Control-*` header at all (Starlette's would still expose
headers to it, and answer its preflight itself)."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

# What a browser page may send and read beyond the CORS-safelisted headers.
ALLOWED_HEADERS = ("Authorization", "Content-Type", "Idempotency-Key", "X-Request-ID")
EXPOSED_HEADERS = (
    "X-Request-ID",
    "Retry-After",
    "RateLimit-Limit",
    "RateLimit-Remaining",
    "RateLimit-Reset",
    "Idempotent-Replayed",
)


class ListedOriginsCORS(CORSMiddleware):
    def __init__(self, app: ASGIApp, origins: Sequence[str]) -> None:
        super().__init__(
            app,
            allow_origins=origins,
            allow_methods=["GET", "POST", "PATCH", "DELETE"],
            allow_headers=ALLOWED_HEADERS,
            expose_headers=EXPOSED_HEADERS,
            max_age=600,  # seconds a browser may reuse a preflight's answer
        )
        self.bypass = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = Headers(scope=scope).get("origin") if scope["type"] == "http" else None
        if origin is None or not self.is_allowed_origin(origin):
            await self.bypass(scope, receive, send)
            return
        await super().__call__(scope, receive, send)
