"""A database that cannot be reached, or a pool with no free connection, answers 503 with
Retry-After and the error envelope, never a 500; other database errors stay 500."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, literal, select, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.pool import QueuePool
from starlette.routing import Mount

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.core.errors import DATABASE_UNAVAILABLE, POOL_EXHAUSTED, WRITES_CROSSED
from outfitter.http.handlers import TOO_LARGE
from outfitter.scim.app import MOUNT_PATH as SCIM_PATH
from tests.factories import CompanyFactory, assert_error

ANY_TOKEN = {"Authorization": "Bearer otf_" + "x" * 43}
AN_ENDPOINT = "/api/v2/client/assets/categories"  # ReadAccess: the token is looked up first


def assert_unavailable(response: httpx.Response, message: str) -> None:
    body = assert_error(response, 503)
    assert body == {"success": False, "message": message, "data": None}
    assert response.headers["Retry-After"] == "2"


@pytest.fixture(
    params=["postgresql://127.0.0.1:1/nothing", "sqlite:////nonexistent-directory/outfitter.db"],
    ids=["postgresql-nothing-listens", "sqlite-no-such-directory"],
)
def unreachable_client(request: pytest.FixtureRequest) -> Iterator[TestClient]:
    app = create_app(Settings(database_url=request.param, rate_limit="off"))
    with TestClient(app, base_url="http://testserver") as client:
        yield client


def test_an_unreachable_database_answers_503_with_retry_after(
    unreachable_client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="outfitter"):
        response = unreachable_client.get(AN_ENDPOINT, headers=ANY_TOKEN)
    assert_unavailable(response, DATABASE_UNAVAILABLE)
    warnings = [record for record in caplog.records if "answered 503" in record.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING and warnings[0].exc_info is None  # no stack trace
    assert "OperationalError" in warnings[0].getMessage()


def test_readyz_answers_503_with_each_dependency_when_the_database_is_unreachable(
    unreachable_client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="outfitter"):
        response = unreachable_client.get("/readyz")
    assert response.status_code == 503 and response.headers["Retry-After"] == "2"
    body = response.json()
    assert body["success"] is False and body["message"] == "The database is unreachable."
    assert body["data"] == {
        "database": "unreachable",
        "migrations": "unknown",
        "redis": "not configured",
        "worker": "unknown",
    }
    assert all(record.exc_info is None for record in caplog.records)  # a probe logs no stack trace


def test_readyz_reports_each_dependency(client: TestClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["data"] == {
        "database": "ok",
        "migrations": "current",
        "redis": "not configured",
        "worker": "ok",
    }


def test_an_idempotent_post_answers_503_too(unreachable_client: TestClient) -> None:
    """The Idempotency-Key is claimed in the database before the endpoint runs."""
    response = unreachable_client.post(
        "/api/v2/client/departments",
        json={"name": "Research"},
        headers={**ANY_TOKEN, "Idempotency-Key": "k-1"},
    )
    assert_unavailable(response, DATABASE_UNAVAILABLE)


def test_an_exhausted_pool_answers_503_and_serves_again_once_a_connection_is_free(
    postgres_only: None, database_url: str, engine: Engine
) -> None:
    settings = Settings(
        database_url=database_url,
        rate_limit="off",
        db_pool_size=1,
        db_pool_max_overflow=0,
        db_pool_timeout=0.5,
    )
    app = create_app(settings)
    pool = app.state.engine.pool
    assert isinstance(pool, QueuePool)
    with TestClient(app, base_url="http://testserver") as client:
        api = CompanyFactory(engine, client).create("Busy Ltd")
        assert api.get("/client/assets/categories").status_code == 200
        with ExitStack() as held:
            # Every connection the pool will hand out: its size plus its overflow.
            for _ in range(pool.size() + pool._max_overflow):
                held.enter_context(app.state.engine.connect()).execute(text("SELECT 1"))
            assert_unavailable(api.get("/client/assets/categories"), POOL_EXHAUSTED)
        assert api.get("/client/assets/categories").status_code == 200
    app.state.engine.dispose()


# --- which database errors are an outage: the handlers through the whole middleware stack -------


def _orig() -> Exception:
    return Exception("the driver's message\nand a second line")


class _Deadlock(Exception):
    """As psycopg raises PostgreSQL's deadlock_detected."""

    sqlstate = "40P01"


RAISED = {
    "pool-timeout": sa_exc.TimeoutError("QueuePool limit of size 1 overflow 0 reached"),
    "operational": sa_exc.OperationalError("SELECT 1", {}, _orig()),
    "interface": sa_exc.InterfaceError("SELECT 1", {}, _orig()),
    "invalidated": sa_exc.DBAPIError("SELECT 1", {}, _orig(), connection_invalidated=True),
    "deadlock": sa_exc.OperationalError("SELECT ... FOR UPDATE", {}, _Deadlock("deadlock detected")),
    "dbapi": sa_exc.DBAPIError("SELECT 1", {}, _orig()),
    "integrity": sa_exc.IntegrityError("INSERT ...", {}, _orig()),
    "programming": sa_exc.ProgrammingError("SELECT nonsense", {}, _orig()),
}


@pytest.fixture(scope="module")
def raising_app(tmp_path_factory: pytest.TempPathFactory) -> FastAPI:
    path = Path(tmp_path_factory.mktemp("raising")) / "unused.db"
    app = create_app(Settings(database_url=f"sqlite:///{path}", rate_limit="off"))

    def raise_it(kind: str) -> None:
        raise RAISED[kind]

    app.add_api_route("/raise/{kind}", raise_it)
    return app


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("pool-timeout", POOL_EXHAUSTED),
        ("operational", DATABASE_UNAVAILABLE),
        ("interface", DATABASE_UNAVAILABLE),
        ("invalidated", DATABASE_UNAVAILABLE),
        ("deadlock", WRITES_CROSSED),  # not an outage: the same request again goes through
    ],
)
def test_outages_are_503(raising_app: FastAPI, kind: str, message: str) -> None:
    with TestClient(raising_app) as client:
        assert_unavailable(client.get(f"/raise/{kind}"), message)


@pytest.mark.parametrize("kind", ["dbapi", "integrity", "programming"])
def test_other_database_errors_stay_500(raising_app: FastAPI, kind: str) -> None:
    with TestClient(raising_app, raise_server_exceptions=False) as client:
        response = client.get(f"/raise/{kind}")
    body = assert_error(response, 500, "Internal error")
    assert "Retry-After" not in response.headers
    assert "SELECT" not in body["message"] and "INSERT" not in body["message"]


# A read through FastAPI's dependencies, and a hot write: each request's first statement finds the
# connection lost.
# Answers once the backend is gone (5 s at most): the request after it cannot race its end.
TERMINATED = text("SELECT pg_terminate_backend(:pid, 5000)")

KILLED_BACKEND_REQUESTS = {
    "read": ("GET", "/client/assets/categories", None, 200),
    "hot write": (
        "POST",
        "/client/employees",
        {
            "first_name": "Ada",
            "last_name": "Back",
            "email": "ada.back@example.com",
            "country_id": "NG",
            "phone": "+234 801 234 5678",
            "address": "1 Marina, Lagos",
        },
        201,
    ),
}


@pytest.mark.parametrize("kind", list(KILLED_BACKEND_REQUESTS))
def test_a_killed_backend_fails_one_request_with_503_then_the_pool_recovers(
    postgres_only: None, database_url: str, engine: Engine, kind: str
) -> None:
    """The pool does not ping before each request (a round trip per request): a connection that
    PostgreSQL dropped meanwhile costs its request a 503 with Retry-After, never a 500, and the pool
    then replaces its connections; the refused write is not kept, and sent again it is made."""
    method, path, body, status = KILLED_BACKEND_REQUESTS[kind]
    settings = Settings(database_url=database_url, rate_limit="off", db_pool_size=1, db_pool_max_overflow=0)
    app = create_app(settings)
    with TestClient(app, base_url="http://testserver") as client:
        api = CompanyFactory(engine, client).create("Restarted Ltd")
        assert api.get("/client/assets/categories").status_code == 200
        with app.state.engine.connect() as pooled:  # the pool's one connection
            backend = pooled.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with engine.connect() as admin:
            assert admin.execute(TERMINATED, {"pid": backend}).scalar()
        assert_unavailable(api.request(method, path, json=body), DATABASE_UNAVAILABLE)
        listed = api.get("/client/employees")
        assert listed.status_code == 200, (listed.text, app.state.engine.pool.status())
        assert listed.json()["data"]["data"] == []
        again = api.request(method, path, json=body)
        assert again.status_code == status, again.text
        if body is not None:
            assert again.json()["data"]["email"] == body["email"]
    app.state.engine.dispose()


def test_a_restarted_server_costs_one_request_not_one_per_pooled_connection(
    postgres_only: None, database_url: str, engine: Engine
) -> None:
    """Every pooled connection dies with a restart. The first request to find its connection lost
    answers 503 and the pool drops all the connections older than that moment (as SQLAlchemy's own
    execution does), so the next request, a hot write on the driver's cursor, gets a new one."""
    settings = Settings(database_url=database_url, rate_limit="off", db_pool_size=3, db_pool_max_overflow=0)
    app = create_app(settings)
    hot_write = KILLED_BACKEND_REQUESTS["hot write"]
    with TestClient(app, base_url="http://testserver") as client:
        api = CompanyFactory(engine, client).create("Restarted Ltd")
        with ExitStack() as held:  # three connections in the pool at once
            pooled = [held.enter_context(app.state.engine.connect()) for _ in range(3)]
            backends = [
                connection.execute(text("SELECT pg_backend_pid()")).scalar_one() for connection in pooled
            ]
        with engine.connect() as admin:
            for backend in backends:  # each gone before the request
                assert admin.execute(TERMINATED, {"pid": backend}).scalar()
        assert_unavailable(api.request("POST", hot_write[1], json=hot_write[2]), DATABASE_UNAVAILABLE)
        again = api.request("POST", hot_write[1], json=hot_write[2])
        assert again.status_code == 201, again.text
        assert api.get("/client/assets/categories").status_code == 200
    app.state.engine.dispose()


def _more_parameters_than_the_database_takes(app: FastAPI) -> Callable[[], None]:
    def run() -> None:
        with app.state.engine.connect() as connection:
            if connection.dialect.name == "sqlite":
                dbapi = connection.connection.dbapi_connection
                limit = dbapi.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
            else:
                limit = 65_535  # the protocol's 16-bit count of a statement's parameters
            values = list(range(limit + 1))
            connection.execute(select(literal(1)).where(literal(0).in_(values)))

    return run


def test_a_statement_too_large_for_the_database_is_a_400_not_an_outage(
    settings: Settings, engine: Engine
) -> None:
    """A statement the database (or its driver) refuses for its size fails again when sent again:
    a 400 saying so, without Retry-After, where it was a 503 "retry" an identity provider repeats
    forever. Through the API's handlers and SCIM's alike, on both databases."""
    app = create_app(settings)
    app.add_api_route("/too-large", _more_parameters_than_the_database_takes(app))
    scim = next(route for route in app.routes if isinstance(route, Mount) and route.path == SCIM_PATH)
    assert isinstance(scim.app, FastAPI)
    scim.app.add_api_route("/TooLarge", _more_parameters_than_the_database_takes(app))
    with TestClient(app, base_url="http://testserver") as client:
        api = client.get("/too-large")
        scim_answer = client.get(f"{SCIM_PATH}/TooLarge")
        assert client.get("/readyz").status_code == 200  # the database is fine
    assert api.status_code == 400, api.text
    assert api.json() == {"success": False, "message": TOO_LARGE, "data": None}
    assert "Retry-After" not in api.headers
    assert scim_answer.status_code == 400, scim_answer.text
    assert scim_answer.json() == {
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:Error"],
        "status": "400",
        "detail": TOO_LARGE,
        "scimType": "tooMany",
    }
    assert "Retry-After" not in scim_answer.headers
    app.state.engine.dispose()
