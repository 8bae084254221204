"""`outfitter serve` runs a worker in-process (so `make run` needs nothing else), and
`outfitter worker --once` does what is due and exits. Through the installed command, on SQLite."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from standardwebhooks import Webhook

from tests.webhooks.receiver import Receiver

OUTFITTER = Path(sys.executable).parent / "outfitter"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("OUTFITTER_")}
    environment.update(
        OUTFITTER_DATABASE_URL=f"sqlite:///{tmp_path / 'embedded.db'}",
        OUTFITTER_RATE_LIMIT="off",
        OUTFITTER_WEBHOOK_ALLOW_PRIVATE="true",
        OUTFITTER_WORKER_POLL_SECONDS="0.2",
    )
    run(environment, "db", "upgrade")
    return environment


def run(environment: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(OUTFITTER), *args], env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def token_for(environment: dict[str, str]) -> str:
    company = json.loads(run(environment, "company", "create", "Embedded Ltd", "--json"))
    token: str = json.loads(run(environment, "token", "create", company["id"], "--json"))["token"]
    return token


def test_serve_runs_a_worker_that_sends_a_ping(
    env: dict[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    token = token_for(env)
    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [str(OUTFITTER), "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        base = f"http://127.0.0.1:{port}/api/v2"
        headers = {"Authorization": f"Bearer {token}"}
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        created = httpx.post(f"{base}/client/webhook-endpoints", json={"url": receiver.url}, headers=headers)
        assert created.status_code == 201, created.text
        endpoint = created.json()["data"]
        ping = httpx.post(f"{base}/client/webhook-endpoints/{endpoint['id']}/ping", headers=headers)
        assert ping.status_code == 202, ping.text
        assert receiver.arrived.wait(timeout=30), log.read_text()
        (request,) = receiver.received
        payload = Webhook(endpoint["secret"]).verify(request.body, request.headers)
        assert payload["type"] == "ping" and payload["id"] == ping.json()["data"]["event_id"]
    finally:
        process.terminate()
        process.wait(timeout=40)
    # uvicorn re-raises the SIGTERM it shut down for, once the embedded worker has stopped.
    assert process.returncode == -15, log.read_text()


def test_worker_once_sends_what_is_due_and_exits(env: dict[str, str]) -> None:
    assert "attempted 0" in run(env, "worker", "--once")


def test_worker_refuses_an_unmigrated_database(tmp_path: Path) -> None:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("OUTFITTER_")}
    environment["OUTFITTER_DATABASE_URL"] = f"sqlite:///{tmp_path / 'empty.db'}"
    done = subprocess.run(
        [str(OUTFITTER), "worker", "--once"], env=environment, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and done.stderr.startswith("error: the database schema is not up to date")
