"""`outfitter serve --workers 2` as an operator runs it with OUTFITTER_LOG_FORMAT=json and a metrics
token: one JSON line per request, parsed here, and /metrics summing both server processes (their
pools' capacity, every request whichever process answered it), read by prometheus-client's parser."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

OUTFITTER = Path(sys.executable).parent / "outfitter"
METRICS_TOKEN = "served-scraper-token-0123456789"
TRACE = "0af7651916cd43dd8448eb211c80319c"
ROUTE = "/api/v2/client/departments"


@dataclass
class Served:
    url: str
    log: Path
    company_id: str
    token: str
    token_id: str

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()


def _free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _cli(env: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run([str(OUTFITTER), *args], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if "--json" in args else {}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if not sys.platform.startswith("linux"):
        pytest.skip("serves with uvicorn's worker processes")
    directory = tmp_path_factory.mktemp("served")
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("OUTFITTER_", "PROMETHEUS_"))
    }
    env.update(
        OUTFITTER_DATABASE_URL=f"sqlite:///{directory / 'x.db'}",
        OUTFITTER_EMBEDDED_WORKER="false",
        OUTFITTER_RATE_LIMIT="off",
        OUTFITTER_LOG_FORMAT="json",
        OUTFITTER_METRICS_TOKEN=METRICS_TOKEN,
    )
    _cli(env, "db", "upgrade")
    company = _cli(env, "company", "create", "Acme Ltd", "--json")
    token = _cli(env, "token", "create", company["id"], "--json")
    port = _free_port()
    log = directory / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [str(OUTFITTER), "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, f"serve exited {process.returncode}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"no answer on /healthz:\n{log.read_text()}"
            # Both worker processes up, not only the first: each one's pool counts in the metrics.
            if log.read_text().count("Application startup complete") >= 2:
                try:
                    if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
            time.sleep(0.2)
        yield Served(url, log, company["id"], token["token"], token["id"])
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _scrape(served: Served) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = httpx.get(
        f"{served.url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=10
    )
    assert answer.status_code == 200, answer.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def test_one_json_line_per_request_and_metrics_from_both_processes(served: Served) -> None:
    answers = []
    for number in range(12):  # each on a connection of its own: the processes share them
        headers = {"Authorization": f"Bearer {served.token}"}
        if number == 0:
            headers["traceparent"] = f"00-{TRACE}-b7ad6b7169203331-01"
        answers.append(
            httpx.get(f"{served.url}{ROUTE}", params={"search": "ada@example.com"}, headers=headers)
        )
    assert [answer.status_code for answer in answers] == [200] * 12
    request_ids = [answer.headers["x-request-id"] for answer in answers]

    deadline = time.monotonic() + 10  # lines are flushed by other processes: a bound, not a timing
    while time.monotonic() < deadline:
        logged = [line for line in served.lines() if ROUTE in line]
        if len(logged) >= 12:
            break
        time.sleep(0.1)
    records = [json.loads(line) for line in served.lines() if line.strip()]  # every line is JSON
    requests = [record for record in records if record.get("route") == ROUTE]
    assert [record["request_id"] for record in requests] == request_ids or sorted(
        record["request_id"] for record in requests
    ) == sorted(request_ids)
    for record in requests:
        assert record["logger"] == "outfitter.access" and record["level"] == "info"
        assert record["method"] == "GET" and record["status"] == 200
        assert isinstance(record["duration_ms"], float) and record["duration_ms"] >= 0
        assert record["company_id"] == served.company_id and record["token_id"] == served.token_id
        assert record["message"] == f"GET {ROUTE} 200"
        assert set(record) == {
            "time", "level", "logger", "message", "request_id", "trace_id",
            "method", "route", "status", "duration_ms", "company_id", "token_id",
        }  # fmt: skip
    traced = next(record for record in requests if record["request_id"] == request_ids[0])
    assert traced["trace_id"] == TRACE
    text = served.log.read_text()
    assert served.token not in text and "ada@example.com" not in text and "search=" not in text
    assert {record["logger"] for record in records} >= {"uvicorn.error", "outfitter.access"}

    samples = _scrape(served)
    count = samples[
        ("outfitter_http_requests_total", (("method", "GET"), ("route", ROUTE), ("status", "200")))
    ]
    assert count == 12  # whichever process answered each
    # Each server process's pool (OUTFITTER_DB_POOL_SIZE 10) counts in the sum: two processes.
    assert samples[("outfitter_db_pool_connections_capacity", ())] == 20
    assert samples[("outfitter_webhook_queue_depth", ())] == 0
