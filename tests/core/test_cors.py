"""CORS: off by default; with OUTFITTER_CORS_ORIGINS, browsers of the listed origins may call the
API (preflight answered, headers exposed) and every other origin gets no CORS header at all."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import ValidationError
from sqlalchemy import Engine

from outfitter.app import create_app
from outfitter.config import Settings
from tests.factories import Api

ALLOWED = "https://app.example.com"
PREFLIGHT = {
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type, idempotency-key",
}


def cors_headers(response: object) -> dict[str, str]:
    headers = getattr(response, "headers")  # noqa: B009 (an httpx response)
    return {name: value for name, value in headers.items() if name.lower().startswith("access-control-")}


@pytest.fixture
def cors_client(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    """The app with two allowed origins, on the suite's database."""
    application: FastAPI = create_app(
        settings.model_copy(update={"cors_origins": [ALLOWED, "http://localhost:3000"]})
    )
    with TestClient(application, base_url="http://testserver/api/v2") as client:
        yield client
    application.state.engine.dispose()


@pytest.mark.one_database
def test_a_listed_origin_passes_the_preflight_and_reads_the_answer(cors_client: TestClient, api: Api) -> None:
    preflight = cors_client.options("/client/employees", headers={"Origin": ALLOWED, **PREFLIGHT})
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == ALLOWED
    assert "POST" in preflight.headers["access-control-allow-methods"]
    allowed_headers = preflight.headers["access-control-allow-headers"].lower()
    assert {"authorization", "content-type", "idempotency-key"} <= {
        h.strip() for h in allowed_headers.split(",")
    }
    assert "access-control-allow-credentials" not in preflight.headers  # bearer tokens, never cookies

    answer = cors_client.get("/client/employees", headers={**api.headers, "Origin": ALLOWED})
    assert answer.status_code == 200 and answer.json()["data"]["total"] == 0
    assert answer.headers["access-control-allow-origin"] == ALLOWED
    assert "x-request-id" in answer.headers["access-control-expose-headers"].lower()
    # An error answer carries the header too, so the browser lets the page read the envelope.
    refused = cors_client.get("/client/employees", headers={"Origin": ALLOWED})
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == ALLOWED


@pytest.mark.one_database
def test_an_origin_not_listed_gets_no_cors_headers(cors_client: TestClient, api: Api) -> None:
    other = "https://evil.example.net"
    preflight = cors_client.options("/client/employees", headers={"Origin": other, **PREFLIGHT})
    assert preflight.status_code == 405 and cors_headers(preflight) == {}  # as with CORS off
    answer = cors_client.get("/client/employees", headers={**api.headers, "Origin": other})
    assert answer.status_code == 200 and cors_headers(answer) == {}


@pytest.mark.one_database
def test_cors_is_off_by_default(client: TestClient, api: Api) -> None:
    assert Settings().cors_origins == []
    preflight = client.options("/api/v2/client/employees", headers={"Origin": ALLOWED, **PREFLIGHT})
    assert cors_headers(preflight) == {} and preflight.status_code == 405
    answer = client.get("/api/v2/client/employees", headers={**api.headers, "Origin": ALLOWED})
    assert answer.status_code == 200 and cors_headers(answer) == {}


@pytest.mark.one_database
def test_the_setting_is_a_comma_separated_list_of_origins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OUTFITTER_CORS_ORIGINS", " https://app.example.com/ , http://localhost:3000")
    assert Settings().cors_origins == ["https://app.example.com", "http://localhost:3000"]
    for wrong in ("app.example.com", "https://app.example.com/path", "ftp://files.example.com"):
        monkeypatch.setenv("OUTFITTER_CORS_ORIGINS", wrong)
        with pytest.raises(ValidationError, match=r"expected origins such as https://app\.example\.com"):
            Settings()
