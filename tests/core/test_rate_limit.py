"""Per-token rate limits with their headers, in memory and shared through Redis."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator

import pytest
import redis
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
