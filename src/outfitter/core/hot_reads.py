"""The hottest reads, answered without FastAPI's per-request machinery.

A hot read is a `ReadOnlyAccess` endpoint (one read plan, on asyncpg) that clients call far more
than any other. On PostgreSQL, `HotReads`, the first route of the app after the fixed-path guard,
takes a GET on such an endpoint's path when it can tell, cheaply, exactly what FastAPI would hand
the endpoint: it validates the path and query values with the very annotations the endpoint
declares (pydantic, as FastAPI does), calls the endpoint function itself, and renders its answer
with orjson. Everything else about the request stays as it was: the middleware (request id,
rate-limit headers, the input guard, the 500), the token's 401/403 and every error envelope (the
app's exception handlers), the rate limit and tenancy (`ClientReads`, as the endpoint runs it).

What it skips, per request: FastAPI's route matching through the included routers, its
dependency solving, the request object and exit stacks, and validating the answer against the
response model before rendering it (docs/architecture.md has the profile). Whenever it cannot
tell (a value that fails validation, a name given twice or not listed, cursor mode, SQLite, an
app run without its lifespan), it does not match, and FastAPI serves the request as always.
`render_json` writes exactly the bytes the response model would (timestamps, money, UUIDs,
enums); a value orjson cannot take is rendered by the response model instead.
"""

from __future__ import annotations

import inspect
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl

import orjson
from fastapi import params
from fastapi.routing import APIRoute
from pydantic import TypeAdapter, ValidationError
from starlette.datastructures import URLPath
from starlette.routing import BaseRoute, Match, NoMatchFound, compile_path
from starlette.types import Receive, Scope, Send

from outfitter.core.auth import bearer_token
from outfitter.core.middleware import header_value
from outfitter.core.schemas import format_timestamp
from outfitter.core.unit_of_work import ClientReads, JsonAnswer

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


def _json_default(value: Any) -> Any:
    """What orjson leaves to us, written as the response models write it."""
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, uuid.UUID):  # asyncpg's own UUID class, which orjson does not know
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    raise TypeError(type(value).__name__)


def render_json(content: Any) -> bytes:
    """The bytes the response model renders for `content` (an answer built for it), through orjson;
    raises orjson.JSONEncodeError for what it cannot write the same way (an integer past 64 bits)."""
    return orjson.dumps(content, default=_json_default, option=orjson.OPT_PASSTHROUGH_DATETIME)


@dataclass(frozen=True)
class _Entry:
    route: APIRoute
    path: Any  # the compiled pattern of the route's full path
    hot: HotRead
    answer: JsonAnswer


_SELECTED = "outfitter.hot_read"


class HotReads(BaseRoute):
    """Serves the hot reads' common requests (see the module); matches nothing else."""

    def __init__(self, entries: list[_Entry]) -> None:
        self.entries = entries

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http" or scope["method"] != "GET" or scope.get("root_path"):
            return Match.NONE, {}
        reads = scope["app"].state.reads
        if reads is None or not reads.serves_this_loop():
            return Match.NONE, {}
        path = scope["path"]
        for entry in self.entries:
            found = entry.path.match(path)
            if found is None:
                continue
            path_params = found.groupdict()
            arguments = entry.hot.arguments(path_params, scope["query_string"])
            if arguments is None:
                return Match.NONE, {}
            child = {"route": entry.route, "endpoint": entry.route.endpoint, "path_params": path_params}
            return Match.FULL, {**child, _SELECTED: (entry, arguments)}
        return Match.NONE, {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        entry, arguments = scope.pop(_SELECTED)
        token = bearer_token(header_value(scope, b"authorization"))
        reads = ClientReads(scope["app"].state, token, "read", scope.setdefault("state", {}))
        result = await entry.hot.endpoint(reads=reads, **arguments)
        try:
            body = render_json(result)
        except orjson.JSONEncodeError:
            body = entry.answer(result).body
        headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def url_path_for(self, name: str, /, **path_params: Any) -> URLPath:
        raise NoMatchFound(name, path_params)


def hot_reads(prefix: str, routes: Iterable[BaseRoute], hot: Iterable[HotRead]) -> HotReads:
    """The `HotReads` route for `hot`, endpoints of `routes` (a router's, included at `prefix`)."""
    by_endpoint: Mapping[Any, APIRoute] = {
        getattr(route.endpoint, "__wrapped__", route.endpoint): route
        for route in routes
        if isinstance(route, APIRoute) and route.methods == {"GET"}
    }
    entries = []
    for read in hot:
        route = by_endpoint[read.endpoint]
        answer = JsonAnswer(route.response_model, route.status_code, route.response_model_by_alias)
        entries.append(_Entry(route, compile_path(prefix + route.path)[0], read, answer))
    return HotReads(entries)
