"""Benchmark: outgoing webhooks on PostgreSQL (a scratch database, created and dropped here).

1. Delivery: N events (default 10,000) are committed in batches of 100 while 1, then 2,
   `outfitter worker` processes send them to a local receiver (a uvicorn process on 127.0.0.1
   that answers at once). Two cases, run in turn in each of `--rounds` rounds so that a shared
   machine's load weighs on both alike: one company with one endpoint (every event for it), and
   `--companies` companies with one endpoint each (the events dealt among them). Prints, per
   round and as the median of the rounds, deliveries per second (first event committed -> last
   delivery received) and the lag of each delivery (its event's created_at -> received by the
   receiver), p50 and p99. Then the lag at a steady rate (default 200 events/s, one event per
   commit, on a fixed schedule) with `--steady-workers` workers (what a receiver sees day to day).
   The two cases also run as a backlog (unless `--no-backlog`): every event is committed before
   the workers start, and deliveries per second count from the first one received, so that the
   rate is the workers' own, not bounded by how fast this script commits on a busy machine. Each
   line also gives the workers' CPU time per delivery (user + system), which load moves less.
2. Write cost: the latency of POST /client/employees with no endpoint registered and with one,
   so the fan-out's share of a write request shows (one indexed SELECT, plus one INSERT when an
   endpoint wants the event). Before the events branch is merged, employee create records no event;
   the script then records `employee.created` itself in the request, as the instrumentation will,
   and says so.

    .venv/bin/python bench/webhook_delivery.py [--events 10000] [--rounds 3] [--companies 20]
        [--workers 1,2] [--requests 300] [--rate 200 --paced-events 2000 --steady-workers 1]
        [--concurrency 32] [--receiver-port 0] [--no-write-cost] [--no-backlog]
        [--postgres postgresql://127.0.0.1:5432/postgres]

The endpoints keep their default concurrency (16 sends in flight at most), the workers theirs (32).

Run with another checkout's interpreter (its `outfitter worker` is the one next to it) to compare
before and after: `/path/to/other/.venv/bin/python bench/webhook_delivery.py`.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from harness import free_port, scratch_postgres, serving
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.db.session import make_engine
from outfitter.db.tenancy import TenantSession, bind_company
from outfitter.migrations import upgrade
from outfitter.models import DeliveryStatus, Event, EventType, WebhookDelivery, WebhookEndpoint
from outfitter.outbox import NewEvent, as_event_data, record_event, record_events
from outfitter.tenants.tokens import create_company, issue_token

BIN = Path(sys.executable).parent
BATCH = 100

RECEIVER = """
import sys, time
out = open(sys.argv[2], "a", buffering=1)
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    headers = dict(scope["headers"])
    out.write(f"{headers[b'webhook-id'].decode()} {time.time()}\\n")
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})
import uvicorn
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""


@contextmanager
def receiver(port: int, log: Path) -> Iterator[str]:
    process = subprocess.Popen([sys.executable, "-c", RECEIVER, str(port), str(log)])
    deadline = time.monotonic() + 20
    while True:
        try:
            httpx.post(f"http://127.0.0.1:{port}/", headers={"webhook-id": "warmup"})
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/hooks"
    finally:
        process.terminate()
        process.wait(timeout=10)


def company_with_endpoint(session: Session, url: str | None) -> tuple[uuid.UUID, str]:
    company = create_company(session, f"Bench {uuid.uuid4().hex[:6]}")
    token = issue_token(session, company.id, None).token
    if url is not None:
        session.add(
            WebhookEndpoint(company_id=company.id, url=url, event_types=[], secret="whsec_" + "A" * 44)
        )
    return company.id, token


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used (Linux): unlike wall-clock rates, it does not
    depend on what else the machine runs."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_worker(env: dict[str, str]) -> subprocess.Popen[str]:
    """An `outfitter worker` process, returned once it logs that it polls: on a busy machine its
    start-up can take seconds, which a fixed sleep would count as lag. Its log is echoed."""
    process = subprocess.Popen([str(BIN / "outfitter"), "worker"], env=env, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        sys.stderr.write(line)
        if " started (" in line:
            break
    else:
        raise SystemExit(f"the worker exited before it started: {process.wait()}")
    stream = process.stderr
    threading.Thread(target=lambda: [sys.stderr.write(line) for line in stream], daemon=True).start()
    return process


def deliver(
    database_url: str,
    events: int,
    workers: int,
    run: Path,
    concurrency: int,
    port: int,
    rate: float | None = None,
    companies: int = 1,
    backlog: bool = False,
) -> dict[str, float]:
    """`rate` None: the events are committed as fast as possible, in batches of 100 (a burst: the
    lag is mostly queueing). A rate: one event per commit, the n-th at start + n / `rate` (the lag
    of workers that keep up). `companies`: each with an endpoint of its own, the commits dealt
    among them in turn. `backlog`: the workers start once every event is committed, and the
    deliveries per second count from the first received (the workers' own pace, not the commits')."""
    engine = make_engine(database_url)
    log = run / f"received-{uuid.uuid4().hex[:8]}.log"
    env = {
        **os.environ,
        "OUTFITTER_DATABASE_URL": database_url,
        "OUTFITTER_WEBHOOK_ALLOW_PRIVATE": "true",
        "OUTFITTER_WORKER_POLL_SECONDS": "0.05",
        "OUTFITTER_WORKER_CONCURRENCY": str(concurrency),
    }
    with receiver(port or free_port(), log) as url:
        with Session(engine) as session, session.begin():
            company_ids = [company_with_endpoint(session, f"{url}/{n}")[0] for n in range(companies)]
        processes = [] if backlog else [start_worker(env) for _ in range(workers)]
        created: dict[str, datetime] = {}
        began = time.monotonic()
        start = 0
        while start < events:
            size = BATCH
            if rate:  # on schedule: each commit takes the events due by now (one, unless behind)
                time.sleep(max(0.0, began + start / rate - time.monotonic()))
                size = max(1, int((time.monotonic() - began) * rate) - start)
            size = min(size, events - start)
            with TenantSession(engine) as session, session.begin():
                bind_company(session, company_ids[(start // BATCH) % companies])
                batch = [NewEvent(EventType.EMPLOYEE_UPDATED, uuid.uuid4(), {"n": n}) for n in range(size)]
                record_events(session, batch)
            start += size
        committing = time.monotonic() - began
        if backlog:  # every event committed: the workers start now
            processes = [start_worker(env) for _ in range(workers)]
        with Session(engine) as session:
            for event_id, at in session.execute(select(Event.id, Event.created_at)):
                created[str(event_id)] = at
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            with Session(engine) as session:
                done = session.scalar(
                    select(func.count())
                    .select_from(WebhookDelivery)
                    .where(WebhookDelivery.status != DeliveryStatus.PENDING)
                )
            if done == events:
                break
            time.sleep(0.2)
        cpu = sum(cpu_seconds(process.pid) for process in processes)
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(timeout=60)
    received = {}
    for line in log.read_text().splitlines():
        event_id, at = line.split()
        if event_id in created:
            received.setdefault(event_id, float(at))
    with engine.begin() as connection:
        connection.execute(
            text("TRUNCATE events, webhook_deliveries, webhook_attempts, webhook_endpoints CASCADE")
        )
    engine.dispose()
    lags = sorted(received[key] - created[key].timestamp() for key in received)
    # A backlog counts from its first delivery received: a worker's start-up is no part of its rate.
    first = min(received.values()) if backlog else min(at.timestamp() for at in created.values())
    return {
        "received": len(received),
        "committed_per_second": events / committing,
        "worker_cpu_ms": cpu * 1000 / max(1, len(received)),
        "per_second": len(received) / (max(received.values()) - first),
        "p50": lags[len(lags) // 2],
        "p99": lags[int(len(lags) * 0.99) - 1],
    }


RECORDING = {"on": True}  # the shim's switch, when this script instruments employee create


def instrument_employee_create_if_needed(engine: Any) -> bool:
    """Record employee.created in the request, as the events branch does, unless it already does."""
    from outfitter.people import service
    from outfitter.people.schemas import EmployeeOut

    with Session(engine) as session:
        if session.scalar(
            select(func.count()).select_from(Event).where(Event.type == EventType.EMPLOYEE_CREATED)
        ):
            return False
    original = service.create_employee

    def create_employee(session: Session, body: Any) -> Any:
        employee = original(session, body)
        if RECORDING["on"]:
            record_event(
                session, EventType.EMPLOYEE_CREATED, employee.id, as_event_data(EmployeeOut, employee)
            )
        return employee

    service.create_employee = create_employee  # type: ignore[assignment]
    return True


def employee_body(index: int) -> dict[str, Any]:
    return {
        "first_name": "Bench",
        "last_name": f"E{index}",
        "email": f"e{index}.{uuid.uuid4().hex[:8]}@bench.example.com",
        "country_id": "NG",
        "phone": "+234 801 234 5678",
        "address": "12 Marina Road, Lagos",
    }


def write_cost(database_url: str, requests: int, url: str) -> dict[str, float]:
    """Median latency of each variant, measured round-robin (one request of each in turn), so that
    the load of a shared machine weighs on all of them alike."""
    engine = make_engine(database_url)
    with Session(engine) as session, session.begin():
        _, plain_token = company_with_endpoint(session, None)
        _, hooked_token = company_with_endpoint(session, url)
    app = create_app(Settings(database_url=database_url, rate_limit="off"))
    timings: dict[str, list[float]] = {}
    with serving(app, free_port()) as base:

        def client(token: str) -> httpx.Client:
            headers = {"Authorization": f"Bearer {token}"}
            return httpx.Client(base_url=f"{base}/api/v2", headers=headers, timeout=60)

        with client(plain_token) as plain, client(hooked_token) as hooked:
            plain.post("/client/employees", json=employee_body(-1)).raise_for_status()
            variants: list[tuple[str, httpx.Client, bool]] = [
                ("event, no endpoint", plain, True),
                ("event, one endpoint", hooked, True),
            ]
            if instrument_employee_create_if_needed(engine):
                variants.insert(0, ("no event", plain, False))  # the unmerged branch: a baseline
            for index in range(requests + 20):
                for label, http, recording in variants:
                    RECORDING["on"] = recording
                    started = time.perf_counter()
                    response = http.post("/client/employees", json=employee_body(index))
                    elapsed = time.perf_counter() - started
                    assert response.status_code == 201, response.text[:300]
                    if index >= 20:  # the first ones warm up connections and caches
                        timings.setdefault(label, []).append(elapsed * 1000)
    results = {label: statistics.median(values) for label, values in timings.items()}
    with Session(engine) as session:
        results["deliveries queued"] = float(
            session.scalar(select(func.count()).select_from(WebhookDelivery)) or 0
        )
    engine.dispose()
    return results


def burst_line(figures: dict[str, float], events: int) -> str:
    return (
        f"{int(figures['received'])} of {events} delivered "
        f"(committed at {figures['committed_per_second']:.0f}/s), "
        f"{figures['per_second']:.0f} deliveries/s; lag p50 {figures['p50'] * 1000:.0f} ms, "
        f"p99 {figures['p99'] * 1000:.0f} ms; worker CPU {figures['worker_cpu_ms']:.2f} ms a delivery"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3, help="of the two burst cases, in turn")
    parser.add_argument("--companies", type=int, default=20, help="of the many-companies case")
    parser.add_argument("--workers", default="1,2", help="worker processes of the burst runs")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rate", type=float, default=200, help="events per second of the steady run")
    parser.add_argument("--paced-events", type=int, default=2000)
    parser.add_argument("--steady-workers", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=32, help="OUTFITTER_WORKER_CONCURRENCY")
    parser.add_argument("--receiver-port", type=int, default=0, help="0: any free port")
    parser.add_argument("--no-write-cost", action="store_true", help="skip part 2")
    parser.add_argument("--no-backlog", action="store_true", help="only the burst cases")
    parser.add_argument("--postgres", default="postgresql://127.0.0.1:5432/postgres")
    args = parser.parse_args()
    port = args.receiver_port
    cases = {
        (kind, label): (companies, kind == "backlog")
        for kind in ("burst", "backlog")
        for label, companies in (
            ("1 company, 1 endpoint", 1),
            (f"{args.companies} companies, 1 endpoint each", args.companies),
        )
        if kind == "burst" or not args.no_backlog
    }
    with scratch_postgres(args.postgres) as database_url, tempfile.TemporaryDirectory() as scratch:
        upgrade(make_engine(Settings(database_url=database_url).database_url))
        database_url = Settings(database_url=database_url).database_url
        for workers in (int(count) for count in args.workers.split(",")):
            rates: dict[tuple[str, str], list[float]] = {case: [] for case in cases}
            cpu: dict[tuple[str, str], list[float]] = {case: [] for case in cases}
            for round_ in range(1, args.rounds + 1):
                for (kind, label), (companies, backlog) in cases.items():
                    figures = deliver(
                        database_url,
                        args.events,
                        workers,
                        Path(scratch),
                        args.concurrency,
                        port,
                        companies=companies,
                        backlog=backlog,
                    )
                    rates[kind, label].append(figures["per_second"])
                    cpu[kind, label].append(figures["worker_cpu_ms"])
                    print(
                        f"{kind}, {workers} worker(s), {label}, round {round_}: "
                        + burst_line(figures, args.events),
                        flush=True,
                    )
            for (kind, label), values in rates.items():
                rounds = " ".join(f"{value:.0f}" for value in values)
                print(
                    f"{kind}, {workers} worker(s), {label}: median {statistics.median(values):.0f} "
                    f"deliveries/s (rounds: {rounds}), worker CPU "
                    f"{statistics.median(cpu[kind, label]):.2f} ms a delivery",
                    flush=True,
                )
        paced = deliver(
            database_url,
            args.paced_events,
            args.steady_workers,
            Path(scratch),
            args.concurrency,
            port,
            args.rate,
        )
        print(
            f"steady {args.rate:g} events/s ({paced['committed_per_second']:.0f}/s committed), "
            f"{args.steady_workers} worker(s): {int(paced['received'])} of {args.paced_events} delivered; "
            f"lag p50 {paced['p50'] * 1000:.0f} ms, p99 {paced['p99'] * 1000:.0f} ms"
        )
        if args.no_write_cost:
            return
        with receiver(port or free_port(), Path(scratch) / "write.log") as url:
            cost = write_cost(database_url, args.requests, url)
        queued = int(cost.pop("deliveries queued"))
        if "no event" in cost:
            print("(employee create records no event on this branch: this script records employee.created)")
        costs = ", ".join(f"{label} {ms:.2f} ms" for label, ms in cost.items())
        print(f"POST /client/employees, median of {args.requests}: {costs}; {queued} deliveries queued")


if __name__ == "__main__":
    main()
