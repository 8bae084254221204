"""The hottest reads, answered without FastAPI's per-request machinery.

A hot read is a `ReadOnlyAccess` endpoint (one read plan, on asyncpg) that clients call far more
than any other. On PostgreSQL, `HotReadsMiddleware`, just inside the input guard, takes a GET on
such an endpoint's path when it can tell, cheaply, exactly what FastAPI would hand the endpoint:
it validates the path and query values with the very annotations the endpoint declares
(pydantic, as FastAPI does), calls the endpoint function itself, and renders its answer with
orjson. Everything else about the request stays as it was: the outer middleware (request id,
rate-limit headers, the body limit and input guard, the 500), the token's 401/403 and every error
envelope (the app's handler of typed errors), the rate limit and tenancy (`ClientReads`, as the
endpoint runs it).

What it skips, per request: the idempotency middleware (POST only anyway), Starlette's exception
middleware, FastAPI's exit stacks, its route matching through the included routers, its
dependency solving, and validating the answer against the response model before rendering it
(docs/architecture.md has the profile). Whenever it cannot
tell (a value that fails validation, a name given twice or not listed, cursor mode, SQLite, an
app run without its lifespan), it does not match, and FastAPI serves the request as always.
`core.schemas.render_json` writes exactly the bytes the response model would (timestamps, money,
UUIDs, enums); a value orjson cannot take is rendered by the response model instead.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import orjson
from fastapi import params
from fastapi.routing import APIRoute
from pydantic import TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.routing import BaseRoute, compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from outfitter.core.errors import DomainError
from outfitter.core.schemas import render_json
from outfitter.http.auth import bearer_token
from outfitter.http.handlers import handle_domain_error
from outfitter.http.middleware import header_value
from outfitter.http.unit_of_work import ClientReads, JsonAnswer

# The endpoint's keyword arguments (besides `reads`) from the path's parameters and the raw query
# string, or None when FastAPI must decide (it then serves the request as always).
Arguments = Callable[[dict[str, str], bytes], dict[str, Any] | None]


# A path id written as a UUID (which `uuid.UUID` reads): what a hot retrieve takes.
UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


@dataclass(frozen=True)
class HotRead:
    """An endpoint served by `HotReads`: `async def endpoint(..., reads: ReadOnlyAccess)`."""

    endpoint: Callable[..., Awaitable[Any]]
    arguments: Arguments


class QueryParameters:
    """Query parameters validated as FastAPI validates them: each by the annotation its declaring
    function gives it (`Annotated[int | None, Query(ge=1)]`), with pydantic, from the text.

    `parse` gives every declared name (its default when absent), or None whenever FastAPI might
    do anything else: a value that fails, a name given twice, a name not declared here."""

    def __init__(self, declared: Iterable[tuple[Callable[..., Any], Iterable[str] | None]]) -> None:
        self._adapters: dict[str, TypeAdapter[Any]] = {}
        self._defaults: dict[str, Any] = {}
        for function, names in declared:
            signature = inspect.signature(function, eval_str=True)
            for name in signature.parameters if names is None else names:
                parameter = signature.parameters[name]
                metadata = getattr(parameter.annotation, "__metadata__", ())
                if not any(isinstance(meta, params.Query) for meta in metadata):
                    raise TypeError(f"{function.__name__}({name}) is not a query parameter")
                self._adapters[name] = TypeAdapter(parameter.annotation)
                self._defaults[name] = parameter.default

    def parse(self, query_string: bytes) -> dict[str, Any] | None:
        values = dict(self._defaults)
        if not query_string:
            return values
        given: set[str] = set()
        # As starlette's QueryParams reads it.
        for name, text in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
            adapter = self._adapters.get(name)
            if adapter is None or name in given:
                return None
            given.add(name)
            try:
                values[name] = adapter.validate_python(text)
            except ValidationError:
                return None
        return values


@dataclass(frozen=True)
class _Entry:
    route: APIRoute
    path: Any  # the compiled pattern of the route's full path
    hot: HotRead
    answer: JsonAnswer


class HotReadsMiddleware:
    """Serves the hot reads' common requests (see the module), right inside the input guard; passes
    every other request on. A typed error is rendered as the app's handler renders it."""

    def __init__(
        self, app: ASGIApp, prefix: str, routes: Iterable[BaseRoute], hot: Iterable[HotRead]
    ) -> None:
        self.app = app
        by_endpoint: Mapping[Any, APIRoute] = {
            getattr(route.endpoint, "__wrapped__", route.endpoint): route
            for route in routes
            if isinstance(route, APIRoute) and route.methods == {"GET"}
        }
        self.entries = []
        for read in hot:
            route = by_endpoint[read.endpoint]
            answer = JsonAnswer(route.response_model, route.status_code, route.response_model_by_alias)
            self.entries.append(_Entry(route, compile_path(prefix + route.path)[0], read, answer))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        selected = self._select(scope) if scope["type"] == "http" and scope["method"] == "GET" else None
        if selected is None:
            await self.app(scope, receive, send)
            return
        entry, path_params, arguments = selected
        scope.update(route=entry.route, endpoint=entry.route.endpoint, path_params=path_params)
        try:
            body = await self._answer(scope, entry, arguments)
        except DomainError as exc:
            await (await handle_domain_error(Request(scope), exc))(scope, receive, send)
            return
        headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _select(self, scope: Scope) -> tuple[_Entry, dict[str, str], dict[str, Any]] | None:
        reads = scope["app"].state.reads
        if scope.get("root_path") or reads is None or not reads.serves_this_loop():
            return None
        path = scope["path"]
        for entry in self.entries:
            found = entry.path.match(path)
            if found is not None:
                path_params = found.groupdict()
                arguments = entry.hot.arguments(path_params, scope["query_string"])
                return None if arguments is None else (entry, path_params, arguments)
        return None

    @staticmethod
    async def _answer(scope: Scope, entry: _Entry, arguments: dict[str, Any]) -> bytes:
        token = bearer_token(header_value(scope, b"authorization"))
        reads = ClientReads(scope["app"].state, token, "read", scope.setdefault("state", {}))
        result = await entry.hot.endpoint(reads=reads, **arguments)
        try:
            return render_json(result)
        except orjson.JSONEncodeError:
            return bytes(entry.answer(result).body)
