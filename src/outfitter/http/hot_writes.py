"""The commonest writes, handed to their endpoint without FastAPI's routing and dependency solving.

A hot write is a route's sync endpoint taking a `WriteAccess` and one JSON body (the single creates
of an employee and of a device). `HotWritesMiddleware`, the innermost of the app's middleware (so
inside the idempotency middleware, whose replays and key claims stay as they are), takes a POST on
such a route's path when it can tell, cheaply, exactly what FastAPI would hand the endpoint: a
bearer token that reads as one (else FastAPI's dependency would answer its 401), a JSON content
type, a body that parses as FastAPI parses it (`json.loads`) and that the endpoint's own body
annotation validates (the same pydantic model, so the same rules and no second copy of them). It
then calls the route's endpoint as FastAPI would, in a worker thread (`UnitOfWorkRoute`'s handler:
rate limit, token, unit of work, render, commit), and sends the Response it returns. A typed error
or a database error is rendered by the app's own handler for it.

Everything else goes on to FastAPI unchanged, with the body replayed: another content type, a body
that does not parse or validate (FastAPI's 422s, with their field paths), a missing or malformed
token, any other method or path. What it skips, per request: Starlette's exception middleware,
FastAPI's exit stacks, its route matching through the included routers, its body reading and
dependency solving (docs/architecture.md has the profile).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from outfitter.core.errors import DomainError
from outfitter.http.auth import bearer_token
from outfitter.http.middleware import header_value, read_body, replaying
from outfitter.http.unit_of_work import ClientWork, WriteAccess


@dataclass(frozen=True)
class _Entry:
    route: APIRoute
    body: TypeAdapter[Any]  # the endpoint's own body annotation
    body_name: str
    work_name: str


def _entry(route: APIRoute) -> _Entry:
    """A hot write's route, once its endpoint is seen to take exactly a `WriteAccess` and a body."""
    endpoint = getattr(route.endpoint, "__wrapped__", route.endpoint)
    parameters = inspect.signature(endpoint, eval_str=True).parameters
    work = [name for name, parameter in parameters.items() if parameter.annotation == WriteAccess]
    bodies = [
        name
        for name, parameter in parameters.items()
        if inspect.isclass(parameter.annotation) and issubclass(parameter.annotation, BaseModel)
    ]
    if len(work) != 1 or len(bodies) != 1 or len(parameters) != 2:
        raise TypeError(f"{endpoint.__name__} must take a WriteAccess and one body model, nothing else")
    return _Entry(route, TypeAdapter(parameters[bodies[0]].annotation), bodies[0], work[0])


class HotWritesMiddleware:
    """Hands the hot writes' common requests to their endpoint (see the module); passes every other
    request on."""

    def __init__(
        self, app: ASGIApp, prefix: str, routes: Iterable[BaseRoute], hot: Iterable[Callable[..., Any]]
    ) -> None:
        self.app = app
        by_endpoint = {
            getattr(route.endpoint, "__wrapped__", route.endpoint): route
            for route in routes
            if isinstance(route, APIRoute) and route.methods == {"POST"}
        }
        self.entries = {
            prefix + by_endpoint[endpoint].path: _entry(by_endpoint[endpoint]) for endpoint in hot
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        entry = (
            self.entries.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        )
        if entry is None:
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)
        if body is None:
            return  # the client went away before its request was whole: nothing to run
        arguments = _arguments(scope, entry, body)
        if arguments is None:
            await self.app(scope, replaying(body, receive), send)
            return
        scope.update(route=entry.route, endpoint=entry.route.endpoint, path_params={})
        try:
            response = await run_in_threadpool(entry.route.endpoint, **arguments)
        except Exception as exc:
            handler = _handler(scope, exc)
            if handler is None:
                raise
            response = await handler(Request(scope), exc)
        await response(scope, receive, send)


def _arguments(scope: Scope, entry: _Entry, body: bytes) -> dict[str, Any] | None:
    """What FastAPI would call the endpoint with, or None when FastAPI must decide."""
    if not _is_json(header_value(scope, b"content-type")):
        return None
    try:
        token = bearer_token(header_value(scope, b"authorization"))
        value = entry.body.validate_python(json.loads(body))
    except (DomainError, ValueError, ValidationError):  # a JSONDecodeError is a ValueError
        return None
    state = scope["app"].state
    work = ClientWork(state.sessionmaker, token, "write", state.rate_limiter, scope.setdefault("state", {}))
    return {entry.work_name: work, entry.body_name: value}


def _is_json(content_type: str | None) -> bool:
    """A content type FastAPI reads as JSON: application/json or application/*+json."""
    if content_type is None:
        return False
    media_type = content_type.split(";", 1)[0].strip().lower()
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


def _handler(scope: Scope, exc: Exception) -> Callable[[Request, Exception], Any] | None:
    """The app's handler for `exc`, found as Starlette's exception middleware finds it (the
    nearest class first); None for an error no handler takes (the outer middleware's 500)."""
    handlers = scope["app"].exception_handlers
    return next((handlers[kind] for kind in type(exc).__mro__ if kind in handlers), None)
