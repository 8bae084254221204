"""The request pipeline: one unit of work per request, committed once, after the answer is rendered.

An endpoint asks for its database work in its signature, and that is the only way to get a
request session:

    def get_equipment(equipmentId: str, client: ReadAccess) -> ...       # a company's token, `read`
    def update_equipment(..., client: WriteAccess) -> ...                 # a company's token, `write`
    def receive_payment_webhook(..., work: AcrossCompanies) -> ...        # no token: every company

The dependencies only read headers (401 for a missing token comes first, with no database work).
`UnitOfWorkRoute`, the route class of every API router, then runs the rest in ONE worker thread:
open the session, authenticate the token in it and bind the session to the token's company
(`db.tenancy`), call the endpoint, validate and serialise its answer to bytes, and only then
commit. Anything that raises on the way rolls everything back, rendering included, so a request
that fails leaves nothing behind; and the transaction (with its row locks) has ended before the
response is sent. Services and repositories only flush.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, TypeVar

from anyio import to_thread
from fastapi import Depends, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import TypeAdapter
from sqlalchemy import event
from sqlalchemy.orm import ORMExecuteState, Session, sessionmaker
from starlette.responses import Response

from outfitter.core.schemas import Rendered
from outfitter.db.asyncpg_reads import AsyncpgReads
from outfitter.db.reads import Read, ReadPlan, run_in_session
from outfitter.db.tenancy import TenantSession, across_companies, bind_company, reads_only
from outfitter.http import idempotency
from outfitter.http.auth import (
    STAMP_LAST_USED,
    authenticate,
    bearer_token,
    check_token,
    refuse_unless_allowed,
    token_lookup,
)
from outfitter.http.idempotency import IDEMPOTENCY_STATE, KeyedRequest
from outfitter.http.ratelimit import RateLimiter
from outfitter.tenants.actor import Actor
from outfitter.tenants.tokens import hash_token

T = TypeVar("T")


class UnitOfWork:
    """A request's database work: one session, opened, committed and closed by `UnitOfWorkRoute`."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions
        self._session: Session | None = None

    @property
    def session(self) -> Session:
        if self._session is None:
            raise RuntimeError("the unit of work is opened by UnitOfWorkRoute, in the endpoint's thread")
        return self._session

    def open(self) -> None:
        self._session = self._sessions()

    def end_reads(self) -> None:
        """End a transaction that has only read, before talking to another system, so that no
        connection or row lock is held across the network. Refuses once the endpoint has written:
        its writes must commit with the rest of the request, not half-way."""
        session = self.session
        if session.new or session.dirty or session.deleted or session.info.get(_WROTE):
            raise RuntimeError("end_reads() after a write would split the request: call other systems first")
        session.commit()  # only what opening wrote (the token's last-used stamp), if anything

    def commit(self, answer: Response | None = None) -> None:
        """Commit the request's work; `answer` is what the request answers, once rendered."""
        self.session.commit()

    def close(self) -> None:
        if self._session is not None:
            self._session.close()  # rolls back whatever was not committed
            self._session = None


_WROTE = "wrote"


@event.listens_for(TenantSession, "do_orm_execute")
def _note_statement_writes(state: ORMExecuteState) -> None:
    if state.is_insert or state.is_update or state.is_delete:
        state.session.info[_WROTE] = True


@event.listens_for(TenantSession, "after_flush")
def _note_flushed_writes(session: Session, _context: Any) -> None:
    session.info[_WROTE] = True


class ClientWork(UnitOfWork):
    """The unit of work of a client's request: its token's company and a session bound to it."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        token: str,
        scope: str,
        limiter: RateLimiter,
        request_state: dict[str, Any],
    ) -> None:
        super().__init__(sessions)
        self._token = token
        self._scope = scope
        self._limiter = limiter
        self._request_state = request_state
        self._actor: Actor | None = None
        self._keyed: KeyedRequest | None = request_state.get(IDEMPOTENCY_STATE)

    @property
    def actor(self) -> Actor:
        if self._actor is None:
            raise RuntimeError("the unit of work is opened by UnitOfWorkRoute, in the endpoint's thread")
        return self._actor

    def sessions_after(self) -> Callable[[], Session]:
        """Sessions for reads after this unit of work has ended (a streamed answer reads while
        it is sent): each bound to the token's company, as the request's is, and closed by its user."""
        sessions, company_id = self._sessions, self.actor.company_id

        def open_session() -> Session:
            session = reads_only(sessions())
            bind_company(session, company_id)
            return session

        return open_session

    def open(self) -> None:
        # First, before the session exists: a slow Redis must hold no connection and no transaction.
        self._limiter.hit(self._request_state, hash_token(self._token))
        super().open()
        if self._scope == "read":  # a GET's: an open one never holds the updated_since feed
            reads_only(self.session)
        self._actor = authenticate(self.session, self._token, self._scope)
        note_client(self._request_state, self._actor)
        bind_company(self.session, self._actor.company_id)
        if self._keyed is not None:
            idempotency.claim(self.session, self._keyed)  # may raise Answered: run nothing
        self.session.info[_WROTE] = False  # neither the stamp nor the claim is the endpoint's write

    def commit(self, answer: Response | None = None) -> None:
        keyed = self._keyed if hasattr(answer, "body") else None  # a streamed answer is kept after
        if keyed is not None and answer is not None:
            idempotency.settle(self.session, keyed, answer)  # the answer commits with the work
        super().commit()
        if keyed is not None:
            keyed.done = True


class ClientReads:
    """A client's read-only request, on the event loop: authenticate, rate-limit, then run one read
    plan (db.reads) for the token's company. On PostgreSQL through asyncpg, with no worker thread
    and no transaction to commit; on SQLite, or outside the event loop that started the pool (an
    app run without its lifespan), through the same `ClientWork` as any request, in one worker
    thread. Same plan, same answer, either way."""

    def __init__(self, state: Any, token: str, scope: str, request_state: dict[str, Any]) -> None:
        self._state = state
        self._token = token
        self._scope = scope
        self._request_state = request_state

    async def run(self, plan: ReadPlan[T]) -> T:
        reads: AsyncpgReads | None = self._state.reads
        if reads is None or not reads.serves_this_loop():
            return await to_thread.run_sync(self._run_in_session, plan)
        statement, parameters, digest = token_lookup(self._token)
        await self._hit_rate_limit(digest)  # before acquiring a connection, as ClientWork.open
        async with reads.connection() as connection:
            rows = await connection.fetch(Read(statement, parameters, scoped=False))
            actor, stamp = check_token(rows[0] if rows else None, digest, self._scope)
            note_client(self._request_state, actor)
            if stamp is not None:
                await connection.execute(STAMP_LAST_USED, stamp)
            return await connection.run(plan, actor.company_id)

    async def _hit_rate_limit(self, key: str) -> None:
        limiter: RateLimiter = self._state.rate_limiter
        if limiter.shared:  # Redis is across the network: never from the event loop
            await to_thread.run_sync(limiter.hit, self._request_state, key)
        else:
            limiter.hit(self._request_state, key)

    def _run_in_session(self, plan: ReadPlan[T]) -> T:
        work = ClientWork(
            self._state.sessionmaker, self._token, self._scope, self._state.rate_limiter, self._request_state
        )
        try:
            work.open()
            result = run_in_session(work.session, plan)
            work.commit()  # only the token's last-used stamp, if it was due
            return result
        finally:
            work.close()


def note_client(request_state: dict[str, Any], actor: Actor) -> None:
    """The company and token a request acts for, for its log line (http.middleware)."""
    request_state["company_id"] = actor.company_id
    request_state["token_id"] = actor.token_id


class CrossCompanyWork(UnitOfWork):
    """For the paths that legitimately act for any company (a gateway's webhook names a tx_ref,
    not a company): the session is declared `across_companies`."""

    def open(self) -> None:
        super().open()
        across_companies(self.session)


# Declares the bearer scheme in the OpenAPI document (the docs page's Authorize button, and what
# generated clients send); the token itself is read by `bearer_token`, whose 401s say more.
BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="bearerAuth",
    description="An `otf_` token made with `outfitter token create`.",
)


# The token scope each client dependency needs, by the dependency: how a route knows its own.
_SCOPE_NEEDED: dict[Callable[..., Any], str] = {}


def _client_work(scope: str) -> Callable[..., Any]:
    async def dependency(
        request: Request, _declared: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)]
    ) -> ClientWork:
        state = request.app.state
        return ClientWork(
            state.sessionmaker,
            bearer_token(request.headers.get("authorization")),
            scope,
            state.rate_limiter,
            request.scope.setdefault("state", {}),
        )

    _SCOPE_NEEDED[dependency] = scope
    return dependency


async def _client_reads(
    request: Request, _declared: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)]
) -> ClientReads:
    token = bearer_token(request.headers.get("authorization"))
    return ClientReads(request.app.state, token, "read", request.scope.setdefault("state", {}))


_SCOPE_NEEDED[_client_reads] = "read"


async def _cross_company_work(request: Request) -> CrossCompanyWork:
    return CrossCompanyWork(request.app.state.sessionmaker)


ReadAccess = Annotated[ClientWork, Depends(_client_work("read"))]
WriteAccess = Annotated[ClientWork, Depends(_client_work("write"))]
AcrossCompanies = Annotated[CrossCompanyWork, Depends(_cross_company_work)]
# A hot read-only endpoint that answers with one read plan: `async def`, `await reads.run(plan)`.
ReadOnlyAccess = Annotated[ClientReads, Depends(_client_reads)]


class JsonAnswer:
    """Validates an endpoint's return value against its response model and renders the bytes."""

    def __init__(self, response_model: Any, status_code: int | None, by_alias: bool) -> None:
        self.adapter: TypeAdapter[Any] | None = (
            TypeAdapter(response_model) if response_model not in (None, inspect.Parameter.empty) else None
        )
        self.status_code = status_code or 200
        self.by_alias = by_alias

    def __call__(self, result: Any) -> Response:
        if isinstance(result, Response):
            return result
        if isinstance(result, Rendered):  # rendered by orjson, as this model would (core.schemas)
            return Response(result.body, status_code=self.status_code, media_type="application/json")
        if self.adapter is None:
            raise TypeError("an endpoint without a response_model must return a Response")
        body = self.adapter.dump_json(self.adapter.validate_python(result), by_alias=self.by_alias)
        return Response(body, status_code=self.status_code, media_type="application/json")


class UnitOfWorkRoute(APIRoute):
    """Runs a sync endpoint, its rendering and its commit in one worker thread (see the module);
    an `async` one (a `ReadOnlyAccess` read) on the event loop, rendered the same way."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        answer = JsonAnswer(
            kwargs.get("response_model"),
            kwargs.get("status_code"),
            kwargs.get("response_model_by_alias", True),
        )
        if inspect.iscoroutinefunction(endpoint):
            endpoint = _rendered(endpoint, answer)
        else:
            endpoint = _in_one_unit_of_work(endpoint, answer)
        super().__init__(path, endpoint, **kwargs)

    @property
    def scope_needed(self) -> str | None:
        """The token scope the route's client dependency needs; None for a route without one."""
        calls = [dependency.call for dependency in self.dependant.dependencies if dependency.call is not None]
        return next((_SCOPE_NEEDED[call] for call in calls if call in _SCOPE_NEEDED), None)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler, but a request whose input is refused (422, a malformed path id, a body
        that is not JSON) is first refused for its token (401) or scope (403), as one with good
        input would be: its input is not judged for a client that may not send it, and no answer
        to an unknown token is kept for an Idempotency-Key (401s and 403s never are)."""
        handle = super().get_route_handler()
        scope = self.scope_needed
        if scope is None:
            return handle

        async def handler(request: Request) -> Response:
            try:
                return await handle(request)
            except RequestValidationError:
                token = bearer_token(request.headers.get("authorization"))  # read by the dependency already
                request_state = request.scope.setdefault("state", {})
                await to_thread.run_sync(
                    refuse_unless_allowed, request.app.state, request_state, token, scope
                )
                raise

        return handler


def _rendered(endpoint: Callable[..., Any], answer: JsonAnswer) -> Callable[..., Any]:
    @functools.wraps(endpoint)
    async def handler(*args: Any, **kwargs: Any) -> Response:
        return render(answer, await endpoint(*args, **kwargs))

    return handler


def _in_one_unit_of_work(endpoint: Callable[..., Any], answer: JsonAnswer) -> Callable[..., Response]:
    @functools.wraps(endpoint)  # FastAPI reads the signature through __wrapped__
    def handler(*args: Any, **kwargs: Any) -> Response:
        work = next((value for value in kwargs.values() if isinstance(value, UnitOfWork)), None)
        if work is None:
            return render(answer, endpoint(*args, **kwargs))
        try:
            work.open()
            response = render(answer, endpoint(*args, **kwargs))
            work.commit(response)
            return response
        except idempotency.Answered as answered:  # the Idempotency-Key's answer, not the endpoint's
            return answered.response  # the key's record already says all there is to say
        finally:
            work.close()

    return handler


def render(answer: JsonAnswer, result: Any) -> Response:
    """The answer's bytes; a failure here rolls the request back like any other."""
    return answer(result)
