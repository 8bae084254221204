"""Rate budgets of several windows (a burst, then a sustained rate), the `scim` scope's own
budget, the headers that tell a client where it stands, and the warning that limits kept in
memory are per process."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.server import warn_of_limits_per_process
from tests.factories import CompanyFactory, assert_error


def _client(settings: Settings, **overrides: object) -> TestClient:
    return TestClient(create_app(settings.model_copy(update=overrides)))


def test_the_window_nearest_to_refusing_is_the_one_a_client_is_told_of(
    settings: Settings, engine: Engine
) -> None:
    with _client(settings, rate_limit="5/minute;3/hour") as client:
        api = CompanyFactory(engine, client).create("Windows Ltd")
        answers = [api.get("/client/currencies") for _ in range(3)]
        assert [answer.headers["ratelimit-remaining"] for answer in answers] == ["2", "1", "0"]
        assert {answer.headers["ratelimit-limit"] for answer in answers} == {"3"}  # the hour's
        assert answers[0].headers["ratelimit-policy"] == "5;w=60, 3;w=3600"
        refused = api.get("/client/currencies")
        assert_error(refused, 429, "Rate limit of 3 requests per 3600 seconds exceeded")
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.headers.get_list("retry-after") == [refused.headers["retry-after"]]


def test_a_burst_is_refused_by_its_own_window(settings: Settings, engine: Engine) -> None:
    with _client(settings, rate_limit="2/minute;100/hour") as client:
        api = CompanyFactory(engine, client).create("Bursty Ltd")
        assert [api.get("/client/currencies").status_code for _ in range(2)] == [200, 200]
        refused = api.get("/client/currencies")
        assert_error(refused, 429, "Rate limit of 2 requests per 60 seconds exceeded")
        assert refused.headers["ratelimit-limit"] == "2"
        assert refused.headers["ratelimit-remaining"] == "0"


def test_a_scim_token_spends_a_budget_of_its_own(settings: Settings, engine: Engine) -> None:
    with _client(settings, rate_limit="2/minute", scim_rate_limit="4/minute") as client:
        companies = CompanyFactory(engine, client)
        api = companies.create("Provisioned Ltd")
        scim = companies.token(api, ["scim"])
        headers = {"Authorization": f"Bearer {scim.token}"}
        users = [client.get("/scim/v2/Users", headers=headers) for _ in range(4)]
        assert [answer.status_code for answer in users] == [200] * 4
        assert users[0].headers["ratelimit-policy"] == "4;w=60"
        refused = client.get("/scim/v2/Users", headers=headers)
        assert refused.status_code == 429
        assert "Rate limit of 4 requests" in refused.json()["detail"]
        # The API token's budget is untouched by the identity provider's requests.
        assert [api.get("/client/currencies").status_code for _ in range(2)] == [200, 200]
        assert_error(api.get("/client/currencies"), 429, "Rate limit of 2 requests")


def test_the_defaults_allow_bursts_and_say_so() -> None:
    settings = Settings(database_url="sqlite:///unused.db")
    assert settings.rate_limit == "100/second;3000/minute"
    assert settings.scim_rate_limit == "300/second;6000/minute"


@pytest.mark.parametrize("rule", ["lots", "0/second;5/minute", "5/minute;0/hour"])
def test_a_budget_that_would_refuse_everything_is_refused_at_start(rule: str) -> None:
    with pytest.raises(ValueError, match="expected 'off' or numbers"):
        Settings(database_url="sqlite:///unused.db", rate_limit=rule)
    with pytest.raises(ValueError, match="expected 'off' or numbers"):
        Settings(database_url="sqlite:///unused.db", scim_rate_limit=rule)


def test_serving_several_processes_without_redis_says_limits_are_per_process(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("OUTFITTER_REDIS_URL", raising=False)
    caplog.set_level(logging.WARNING, logger="uvicorn.error")
    from outfitter.config import get_settings

    get_settings.cache_clear()
    try:
        warn_of_limits_per_process(1)
        assert not caplog.records
        warn_of_limits_per_process(4)
        assert "rate limits are kept per server process (4 processes" in caplog.text
        caplog.clear()
        monkeypatch.setenv("OUTFITTER_REDIS_URL", "redis://127.0.0.1:6379/0")
        get_settings.cache_clear()
        warn_of_limits_per_process(4)
        assert not caplog.records
    finally:
        get_settings.cache_clear()
