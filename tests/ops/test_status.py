"""Whether the worker keeps up: /readyz's `worker`, the workers' heartbeats, `outfitter status`."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from outfitter.cli import app as cli
from outfitter.config import Settings, get_settings
from outfitter.db.base import utcnow
from outfitter.db.session import make_sessionmaker
from outfitter.db.tenancy import TenantSession
from outfitter.models import EventType, WebhookDelivery, WebhookEndpoint, WorkerHeartbeat
from outfitter.worker.status import beat
from tests.factories import Api
from tests.webhooks.conftest import emit, make_worker, register
from tests.webhooks.receiver import Receiver

READY = {"database": "ok", "migrations": "current", "redis": "not configured"}


def _due_since(db: Session, seconds: float) -> None:
    """Every pending delivery due `seconds` ago (as if no worker had sent it since)."""
    db.execute(update(WebhookDelivery).values(next_attempt_at=utcnow() - timedelta(seconds=seconds)))
    db.commit()


def test_readyz_says_when_the_worker_is_behind_without_leaving_rotation(
    client: TestClient, api: Api, db: Session, engine: Engine, private_ok: Settings, receiver: Receiver
) -> None:
    register(api, receiver.url)
    emit(engine, api.company_id, EventType.DEPARTMENT_CREATED)

    due_now = client.get("/readyz")  # due, but no worker has beat: none runs
    assert due_now.status_code == 200
    assert due_now.json()["data"] == {**READY, "worker": "no worker"}
    assert due_now.json()["message"] == (
        "Service is ready. 1 webhook deliveries are due and no worker has beat lately: "
        "start 'outfitter worker'."
    )

    beat(make_sessionmaker(engine, TenantSession), "host:1:abc", utcnow())
    assert client.get("/readyz").json() == {
        "success": True,
        "message": "Service is ready.",
        "data": {**READY, "worker": "ok"},
    }

    _due_since(db, 600)  # the threshold is 120 s by default
    late = client.get("/readyz")
    assert late.status_code == 200  # a server out of rotation would not help the queue
    assert late.json()["data"] == {**READY, "worker": "behind"}
    assert late.json()["message"].startswith(
        "Service is ready. The worker is behind: a due webhook delivery has waited 60"
    )
    assert "(threshold 120 s; 'outfitter status' says more)" in late.json()["message"]


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, database_url: str) -> Iterator[None]:
    monkeypatch.setenv("OUTFITTER_DATABASE_URL", database_url)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_status_prints_the_queue_the_workers_and_the_failing_endpoints(
    cli_env: None, api: Api, db: Session, engine: Engine, private_ok: Settings, receiver: Receiver
) -> None:
    endpoint = register(api, receiver.url)
    emit(engine, api.company_id, EventType.DEPARTMENT_CREATED, EventType.DEPARTMENT_UPDATED)
    _due_since(db, 300)
    failing_since = utcnow() - timedelta(hours=2)
    db.execute(update(WebhookEndpoint).values(failing_since=failing_since))
    db.execute(update(WebhookDelivery).values(last_error="The receiver answered 500.", attempts=1))
    db.commit()
    sessions = make_sessionmaker(engine, TenantSession)
    beat(sessions, "alive-host:11:aaa", utcnow())
    beat(sessions, "old-host:12:bbb", utcnow() - timedelta(minutes=5))
    db.execute(
        update(WorkerHeartbeat)
        .where(WorkerHeartbeat.name == "old-host:12:bbb")
        .values(beat_at=utcnow() - timedelta(minutes=5))
    )
    db.commit()

    result = CliRunner().invoke(cli, ["status", "--json"])
    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)
    queue = payload["queue"]
    assert (queue["pending"], queue["due"], queue["behind"]) == (2, 2, True)
    assert 299 <= queue["lag_seconds"] < 600 and queue["oldest_age_seconds"] >= 0
    assert payload["workers_alive"] == 1
    assert [(worker["name"], worker["alive"]) for worker in payload["workers"]] == [
        ("alive-host:11:aaa", True),
        ("old-host:12:bbb", False),
    ]
    (failing,) = payload["failing_endpoints"]
    assert failing["id"] == endpoint["id"] and failing["url"] == receiver.url
    assert failing["company_id"] == str(api.company_id)
    assert failing["pending"] == 2 and failing["last_error"] == "The receiver answered 500."

    text = CliRunner().invoke(cli, ["status"])
    assert text.exit_code == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("queue: 2 pending, 2 due, oldest ")
    assert lines[0].endswith("(behind: over 120 s)")
    assert lines[1] == "workers alive: 1 (a beat within 30 s)"
    assert lines[2].startswith("  alive-host:11:aaa pid ") and ", alive (last beat " in lines[2]
    assert ", silent (last beat " in lines[3]
    assert lines[4] == "failing endpoints: 1"
    assert lines[5].startswith(
        f"  {endpoint['id']} {receiver.url} (company {api.company_id}): failing since "
    )
    assert lines[5].endswith("2 pending; last error: The receiver answered 500.")


@pytest.mark.one_database
def test_a_running_worker_beats_and_removes_its_heartbeat_when_it_stops(
    client: TestClient, engine: Engine, db: Session, webhook_settings: Settings
) -> None:
    runner = make_worker(engine, webhook_settings.model_copy(update={"worker_poll_seconds": 0.05}))
    thread = threading.Thread(target=runner.run_forever, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30  # a bound for a busy machine, not a timing
        names: list[str] = []
        while not names and time.monotonic() < deadline:
            names = list(db.scalars(select(WorkerHeartbeat.name)))
            db.commit()
            time.sleep(0.05)
        assert names == [runner.name]
        assert client.get("/readyz").json()["data"]["worker"] == "ok"
    finally:
        runner.stop()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert list(db.scalars(select(WorkerHeartbeat.name))) == []
