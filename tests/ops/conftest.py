"""Operations' test set-up: metrics on in this process (prometheus-client's multiprocess mode, in a
directory of the session's), the app given a metrics token, and the webhook tests' receiver and
worker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from outfitter.core import metrics
from tests.webhooks.conftest import private_ok, receiver, webhook_settings, worker  # noqa: F401

METRICS_TOKEN = "scraper-token-0123456789"


@pytest.fixture(scope="session")
def metrics_directory(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Metrics on in this test process, once (they stay on: a process has one directory)."""
    return metrics.enable(str(tmp_path_factory.mktemp("metrics"))).directory


@pytest.fixture
def metrics_on(app: FastAPI, metrics_directory: str) -> Iterator[str]:
    """The app serves /metrics to the bearer of METRICS_TOKEN during the test."""
    original = app.state.settings
    app.state.settings = original.model_copy(update={"metrics_token": METRICS_TOKEN})
    yield METRICS_TOKEN
    app.state.settings = original


def scrape(client: TestClient) -> dict[str, float]:
    """GET /metrics, parsed by prometheus-client's own parser: each sample by its name and labels,
    `name{label="value",...}` (labels sorted), to its value."""
    response = client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            labels = ",".join(f'{key}="{value}"' for key, value in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def value(samples: dict[str, float], name: str, **labels: Any) -> float:
    """A sample's value, 0 when it is absent (a counter not yet incremented)."""
    if labels:
        name += "{" + ",".join(f'{key}="{labels[key]}"' for key in sorted(labels)) + "}"
    return samples.get(name, 0.0)
