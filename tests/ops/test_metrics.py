"""GET /metrics: Prometheus' text format, read by prometheus-client's own parser, behind its token;
the webhook queue drains in it as the worker sends; requests, events and deliveries counted."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from outfitter.config import Settings
from outfitter.worker import Worker
from tests.factories import Api, assert_error
from tests.ops.conftest import METRICS_TOKEN, scrape, value
from tests.webhooks.conftest import register
from tests.webhooks.receiver import Receiver, served_document


def test_the_queue_drains_in_the_metrics_as_the_worker_sends(
    client: TestClient,
    api: Api,
    private_ok: Settings,
    metrics_on: str,
    receiver: Receiver,
    worker: Worker,
) -> None:
    served_document()  # the receiver checks bodies against it: made before the sends' deadlines
    register(api, receiver.url)
    before = scrape(client)
    assert value(before, "outfitter_webhook_queue_depth") == 0
    for name in ("Ops", "Finance", "Legal"):
        created = api.post("/client/departments", {"name": name})
        assert created.status_code == 201, created.text

    queued = scrape(client)
    assert value(queued, "outfitter_queue_readable") == 1
    assert value(queued, "outfitter_webhook_queue_depth") == 3
    assert value(queued, "outfitter_webhook_queue_due") == 3
    assert value(queued, "outfitter_webhook_queue_oldest_age_seconds") >= 0
    events = "outfitter_events_written_total"
    assert (
        value(queued, events, type="department.created") - value(before, events, type="department.created")
        == 3
    )
    requests = "outfitter_http_requests_total"
    route = {"method": "POST", "route": "/api/v2/client/departments"}
    assert (
        value(queued, requests, **route, status="201") - value(before, requests, **route, status="201") == 3
    )
    histogram = "outfitter_http_request_duration_seconds_count"
    assert value(queued, histogram, **route) - value(before, histogram, **route) == 3

    assert worker.run_once() >= 3  # more if an attempt timed out on a busy machine
    drained = scrape(client)
    assert value(drained, "outfitter_webhook_queue_depth") == 0
    assert value(drained, "outfitter_webhook_queue_due") == 0
    assert value(drained, "outfitter_webhook_queue_lag_seconds") == 0
    deliveries = "outfitter_webhook_deliveries_total"
    sent = value(drained, deliveries, outcome="succeeded") - value(queued, deliveries, outcome="succeeded")
    assert sent == 3
    assert len(set(receiver.ids())) == 3


def test_failures_count_against_their_endpoint(
    client: TestClient,
    api: Api,
    private_ok: Settings,
    metrics_on: str,
    receiver: Receiver,
    worker: Worker,
) -> None:
    endpoint = register(api, receiver.url)
    receiver.script = [500, 500, 500]  # the schedule's three attempts (webhook_settings) fail
    before = scrape(client)
    assert api.post("/client/departments", {"name": "Ops"}).status_code == 201
    worker.run_once()
    after = scrape(client)
    failures = "outfitter_webhook_endpoint_failures_total"
    assert (
        value(after, failures, endpoint=endpoint["id"]) - value(before, failures, endpoint=endpoint["id"])
        == 3
    )
    deliveries = "outfitter_webhook_deliveries_total"
    assert value(after, deliveries, outcome="failed") - value(before, deliveries, outcome="failed") == 3
    assert value(after, "outfitter_webhook_queue_depth") == 0  # given up: failed, not pending


@pytest.mark.one_database
def test_a_scrape_without_the_token_is_refused(client: TestClient, metrics_on: str) -> None:
    for headers in ({}, {"Authorization": "Bearer not-the-token-at-all"}, {"Authorization": METRICS_TOKEN}):
        response = client.get("/metrics", headers=headers)
        assert_error(response, 401)
        assert "OUTFITTER_METRICS_TOKEN" in response.json()["message"]
        assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.one_database
def test_metrics_are_off_without_a_token(client: TestClient) -> None:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert_error(response, 404)
    assert response.json()["message"] == "Metrics are off: set OUTFITTER_METRICS_TOKEN to serve them."


@pytest.mark.one_database
def test_requests_are_labelled_by_route_template_not_path(
    client: TestClient, api: Api, metrics_on: str
) -> None:
    before = scrape(client)
    missing = "018f0000-0000-7000-8000-000000000000"
    assert api.get(f"/client/departments/{missing}").status_code == 404
    assert client.get("/no/such/path").status_code == 404
    after = scrape(client)
    requests = "outfitter_http_requests_total"
    template = {"method": "GET", "route": "/api/v2/client/departments/{departmentId}", "status": "404"}
    assert value(after, requests, **template) - value(before, requests, **template) == 1
    unmatched = {"method": "GET", "route": "(unmatched)", "status": "404"}
    assert value(after, requests, **unmatched) - value(before, requests, **unmatched) == 1
    assert not [name for name in after if missing in name or "/no/such/path" in name]


@pytest.mark.one_database
def test_a_process_killed_without_ending_leaves_no_live_gauge(
    client: TestClient, metrics_on: str, metrics_directory: str
) -> None:
    """A server process killed (its supervisor starts another) never runs its ending: its pool's
    live gauges must not count at the next scrape, while its counts stay."""
    before = scrape(client).get("outfitter_db_pool_connections_capacity", 0.0)
    program = (
        "import os\n"
        "from outfitter.core import metrics\n"
        f"active = metrics.enable({metrics_directory!r})\n"
        "active.pool_capacity.set(7)\n"
        "active.pool_exhausted.inc()\n"
        "os._exit(0)  # as a SIGKILL would: no ending runs\n"
    )
    subprocess.run([sys.executable, "-c", program], check=True, env={**os.environ})
    after = scrape(client)
    assert after.get("outfitter_db_pool_connections_capacity", 0.0) == before
    assert after["outfitter_db_pool_exhausted_total"] >= 1
    assert not [
        name
        for name in os.listdir(metrics_directory)
        if name.startswith("gauge_live") and not name.endswith(f"_{os.getpid()}.db")
    ]
