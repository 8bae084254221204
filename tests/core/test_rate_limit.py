"""Per-token rate limits with their headers, in memory and shared through Redis."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from outfitter.app import create_app
from outfitter.config import Settings
from tests.factories import Api, CompanyFactory, assert_error

REDIS_URL = os.environ.get("OUTFITTER_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def _client(settings: Settings, **overrides: object) -> TestClient:
    return TestClient(create_app(settings.model_copy(update=overrides)))


def test_requests_over_the_limit_get_429_with_retry_after(settings: Settings, engine: Engine) -> None:
    with _client(settings, rate_limit="3/minute") as client:
        api = CompanyFactory(engine, client).create("Busy Ltd")
        remaining = [api.get("/client/currencies").headers["ratelimit-remaining"] for _ in range(3)]
        assert remaining == ["2", "1", "0"]
        refused = api.get("/client/currencies")
        assert_error(refused, 429, "Rate limit of 3 requests")
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.headers["ratelimit-limit"] == "3"
        other = CompanyFactory(engine, client).create("Calm Ltd")  # limits are per token
        assert other.get("/client/currencies").status_code == 200


def test_requests_refused_for_their_input_count_against_the_limit(settings: Settings, engine: Engine) -> None:
    """A token's refused requests (422, a malformed path id) count as its others do, so a client
    cannot send invalid input without limit; an unknown token's are refused as such (401)."""
    with _client(settings, rate_limit="3/minute") as client:
        api = CompanyFactory(engine, client).create("Sloppy Ltd")
        invalid = api.post("/client/departments", json={"name": 1})
        assert_error(invalid, 422, "name")
        assert invalid.headers["ratelimit-remaining"] == "2"
        assert_error(api.get("/client/employees/not-an-id"), 404)
        assert_error(api.get("/client/employees", per_page="0"), 422)
        assert_error(api.post("/client/departments", json={"name": 2}), 429, "Rate limit of 3 requests")
        assert_error(api.get("/client/currencies"), 429)
        unknown = client.post(
            "/api/v2/client/departments", json={"name": 1}, headers={"Authorization": "Bearer otf_nobody"}
        )
        assert_error(unknown, 401, "Invalid token")


def test_limit_off_sends_no_rate_limit_headers(api: Api) -> None:
    assert "ratelimit-limit" not in api.get("/client/currencies").headers


def test_limits_are_shared_between_processes_through_redis(settings: Settings, engine: Engine) -> None:
    try:
        redis.Redis.from_url(REDIS_URL).ping()
    except redis.RedisError as exc:
        if os.environ.get("CI", "").lower() in {"1", "true"}:
            pytest.fail(f"Redis at {REDIS_URL} is not reachable: {exc}")
        pytest.skip(f"Redis at {REDIS_URL} is not reachable: {exc}")
    with (
        _client(settings, rate_limit="4/minute", redis_url=REDIS_URL) as first,
        _client(settings, rate_limit="4/minute", redis_url=REDIS_URL) as second,
    ):
        api = CompanyFactory(engine, first).create("Shared Ltd")
        on_second = Api(second, api.token, api.company_id, api.token_id)
        statuses = [
            (api if index % 2 else on_second).get("/client/currencies").status_code for index in range(5)
        ]
        assert statuses == [200, 200, 200, 200, 429]


@pytest.fixture
def silent_redis() -> Iterator[str]:
    """A 'Redis' that accepts connections and never answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
    listener.close()


@pytest.mark.parametrize("where", ["nothing listens", "never answers"])
def test_an_unreachable_redis_fails_open(
    settings: Settings, engine: Engine, silent_redis: str, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = "redis://127.0.0.1:1/0" if where == "nothing listens" else silent_redis
    with (
        caplog.at_level(logging.WARNING, logger="outfitter"),
        _client(settings, rate_limit="2/minute", redis_url=url) as client,
    ):
        api = CompanyFactory(engine, client).create("Open Ltd")
        responses = [api.get("/client/currencies") for _ in range(5)]
        ready = client.get("/readyz")
    assert [response.status_code for response in responses] == [200] * 5  # no limit, no 500
    assert "ratelimit-limit" not in responses[0].headers
    warnings = [record for record in caplog.records if "Redis is unreachable" in record.getMessage()]
    assert len(warnings) == 1  # once a minute, not once a request
    assert ready.status_code == 200 and ready.json()["data"]["redis"] == "unreachable"


def _connections_in_use(app: FastAPI) -> tuple[int, int]:
    """Connections checked out of the SQLAlchemy pool, and of the asyncpg pool (PostgreSQL)."""
    reads = app.state.reads
    pool = reads._pool if reads is not None else None
    in_asyncpg = 0 if pool is None else pool.get_size() - pool.get_idle_size()
    return app.state.engine.pool.checkedout(), in_asyncpg


@pytest.mark.parametrize(
    "path",
    [
        "/client/currencies",  # a unit of work: the session path
        "/client/equipment",  # a read plan: asyncpg on PostgreSQL
        "/client/equipment/00000000-0000-0000-0000-000000000000",
    ],
)
def test_the_rate_limit_is_asked_before_any_database_connection_is_held(
    settings: Settings, engine: Engine, silent_redis: str, path: str
) -> None:
    """A slow Redis must not hold a pooled connection (or a transaction) while it is waited for."""
    with _client(settings, rate_limit="100/minute", redis_url=silent_redis) as client:
        api = CompanyFactory(engine, client).create("Waiting Ltd")
        limiter = client.app.state.rate_limiter  # type: ignore[attr-defined]
        asked_redis = limiter.strategy.hit
        held: list[tuple[int, int]] = []

        def hit(*args: Any) -> bool:
            held.append(_connections_in_use(client.app))  # type: ignore[arg-type]
            return bool(asked_redis(*args))  # then waits for the silent Redis, and fails open

        limiter.strategy.hit = hit
        response = api.get(path)
    assert response.status_code in (200, 404), response.text
    assert held == [(0, 0)]
