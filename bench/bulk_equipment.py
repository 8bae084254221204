"""Benchmark of bulk equipment work, against the app under uvicorn on 127.0.0.1 (a free port):

1. 1,000 devices registered with one bulk request versus single requests, in short rounds of
   one bulk request and 200 singles (the medians, and the ratio of each round);
2. a 10,000-row CSV import of equipment (and of employees);
3. the CSV export of 100,000 devices (loaded set-based with one INSERT ... SELECT
   generate_series on PostgreSQL): time, and peak memory, measured twice: the Python heap's peak
   during the export (tracemalloc, in a second run, since tracing slows it down) and the process's
   peak RSS before and after. The same for 10,000 rows shows whether memory stays constant.

    .venv/bin/python bench/bulk_equipment.py [--count 1000] [--rounds 25] [--singles 200]
        [--import-rows 10000] [--export-rows 100000] [--postgres postgresql://127.0.0.1:5432/postgres]
        [--no-sqlite] [--export-only | --no-export] [--preload 300000]

--preload N gives the company N devices, each with its history row and event, before step 1 on
PostgreSQL (set-based, ~40 s for 300,000): the batches then land in tables and indexes of a
company's working size rather than in nearly empty ones.

Steps 1 and 2 run on SQLite and PostgreSQL, step 3 on PostgreSQL only (set-based load).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from harness import free_port, scratch_postgres, serving
from sqlalchemy import text
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.db.session import make_engine
from outfitter.migrations import upgrade
from outfitter.tenants.tokens import create_company, issue_token


def device(run: str, index: int) -> dict[str, Any]:
    return {
        "title": f"Bench device {index}",
        "serial_number": f"{run}-{index}",
        "type": "Laptop",
        "country": ("NG", "Kenya", "za")[index % 3],
        "currency": "USD",
        "purchase_price": "1299.99",
        "specs": {"memory": "16GB", "storage": "512 GB"},
        "status": ("Unassigned", "In_Storage")[index % 2],
    }


@contextmanager
def serve(database_url: str) -> Iterator[tuple[str, str, uuid.UUID]]:
    """Migrate, create a company and a token, serve the app; yields (base URL, token, company id)."""
    engine = make_engine(Settings(database_url=database_url).database_url)
    upgrade(engine)
    with Session(engine) as session, session.begin():
        company = create_company(session, "Bench Ltd")
        token, company_id = issue_token(session, company.id, None).token, company.id
    engine.dispose()
    app = create_app(Settings(database_url=database_url, rate_limit="off"))
    with serving(app, free_port()) as url:
        yield f"{url}/api/v2", token, company_id


def bulk_versus_single(client: httpx.Client, count: int, rounds: int, singles: int) -> str:
    """`rounds` rounds, each one bulk request of `count` devices then `singles` single requests
    (new serial numbers every time), after one bulk request to warm up. A round's ratio is the time
    `count` singles take at that round's pace (its singles' time, times count / singles) over its
    bulk request's. Short rounds put both through the same spells of a shared machine's noise: with
    rounds of one bulk and 1,000 singles (five seconds), one noisy spell could fall on a bulk
    request alone, and the ratio of one run ranged from 26x to 41x. Printed: the medians of the
    wall times, of the process's CPU time (the server's and the client's: one process) and of the
    rounds' ratios."""
    assert client.post("/client/equipment/bulk", json={"equipment": [device("warm", 0)]}).status_code == 201
    bulk: list[tuple[float, float]] = []
    single: list[tuple[float, float]] = []
    for round_ in range(rounds):
        body = {"equipment": [device(f"bulk{round_}", i) for i in range(count)]}
        started, cpu = time.perf_counter(), time.process_time()
        response = client.post("/client/equipment/bulk", json=body)
        bulk.append((time.perf_counter() - started, time.process_time() - cpu))
        assert response.status_code == 201, response.text[:300]
        started, cpu = time.perf_counter(), time.process_time()
        for index in range(singles):
            answer = client.post("/client/equipment", json=device(f"single{round_}", index))
            assert answer.status_code == 201, answer.text[:300]
        # at this round's pace, the time of `count` singles
        single.append(
            ((time.perf_counter() - started) * count / singles, (time.process_time() - cpu) * count / singles)
        )
    bulk_seconds, bulk_cpu = (statistics.median(figure) for figure in zip(*bulk, strict=True))
    single_seconds, single_cpu = (statistics.median(figure) for figure in zip(*single, strict=True))
    ratios = sorted(s[0] / b[0] for b, s in zip(bulk, single, strict=True))
    return (
        f"register {count}, {rounds} rounds of 1 bulk request and {singles} singles (medians): bulk "
        f"{bulk_seconds:6.3f} s (CPU {bulk_cpu:5.3f} s) | single {single_seconds / count * 1000:4.2f} ms "
        f"each (CPU {single_cpu / count * 1000:4.2f} ms) | single/bulk per round: median "
        f"{statistics.median(ratios):5.1f}x, quartiles {ratios[len(ratios) // 4]:.1f}-"
        f"{ratios[(3 * len(ratios)) // 4]:.1f}x (CPU, medians: {single_cpu / bulk_cpu:5.1f}x)"
    )


def csv_imports(client: httpx.Client, rows: int) -> str:
    devices = "title,serial_number,type,country,currency,purchase_price,specs.memory,status\n" + "".join(
        f"Imported {i},imp-{i},Laptop,NG,USD,999.50,8GB,{('Unassigned', 'In_Storage')[i % 2]}\n"
        for i in range(rows)
    )
    people = "first_name,last_name,email,country_id,phone,address\n" + "".join(
        f"Bench,Person {i},p{i}@bench.example.com,Kenya,+254 700 000000,1 Moi Avenue\n" for i in range(rows)
    )
    figures = []
    for path, body in (("/client/equipment/import", devices), ("/client/employees/import", people)):
        headers = {"Content-Type": "text/csv"}
        started = time.perf_counter()
        dry = client.post(path, content=body.encode(), headers=headers, params={"dry_run": "true"})
        dry_seconds = time.perf_counter() - started
        assert dry.status_code == 200 and dry.json()["data"]["count"] == rows, dry.text[:300]
        started, cpu = time.perf_counter(), time.process_time()
        done = client.post(path, content=body.encode(), headers=headers)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert done.status_code == 200 and done.json()["data"]["count"] == rows, done.text[:300]
        size = len(body.encode()) / 1024 / 1024
        figures.append(
            f"import {path.split('/')[2]} {rows} rows ({size:.1f} MiB): "
            f"dry run {dry_seconds:6.2f} s, import {seconds:6.2f} s (CPU {cpu:5.2f} s)"
        )
    return "\n  ".join(figures)


LOAD = text(
    """
    INSERT INTO equipment (id, company_id, title, type, source, status, serial_number, description,
        other_details, specs, memory_key, storage_key, documents, purchase_price, status_changed_at,
        created_at, updated_at)
    SELECT gen_random_uuid(), :company_id, 'Loaded device ' || n, 'Laptop', 'External', 'Unassigned',
        'LOAD-' || n, 'A device, "quoted", loaded for the export benchmark', '["charger"]'::json,
        '{"memory": "16GB", "storage": "512 GB", "color": "=grey"}'::json, '16gb', '512gb', '[]'::json,
        1299.99, now(), now() - n * interval '1 second', now()
    FROM generate_series(CAST(:first AS integer), CAST(:last AS integer)) AS n
    """
)


# What a registration writes besides the device: its history row and its event (data of the
# size a device's answer has).
LOAD_HISTORY_AND_EVENTS = (
    text(
        """
        INSERT INTO equipment_history (id, company_id, equipment_id, event_type, event_date, seq, actor)
        SELECT gen_random_uuid(), company_id, id, 'equipment_added', created_at, 1, 'Bench'
        FROM equipment WHERE company_id = :company_id
        """
    ),
    text(
        """
        INSERT INTO events (id, company_id, type, subject_type, subject_id, actor, created_at, data)
        SELECT gen_random_uuid(), company_id, 'equipment.added', 'equipment', id, 'Bench', created_at,
            json_build_object('id', id, 'title', title, 'description', repeat('x', 1500))
        FROM equipment WHERE company_id = :company_id
        """
    ),
)


def load_devices(
    database_url: str, company_id: uuid.UUID, first: int, last: int, with_history: bool = False
) -> None:
    """Devices number `first` to `last`, in one INSERT ... SELECT; with their history rows and
    events if asked."""
    engine = make_engine(Settings(database_url=database_url).database_url)
    with engine.begin() as connection:
        connection.execute(LOAD, {"company_id": company_id, "first": first, "last": last})
        for statement in LOAD_HISTORY_AND_EVENTS if with_history else ():
            connection.execute(statement, {"company_id": company_id})
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("ANALYZE"))
        connection.execute(text("CHECKPOINT"))  # the load's dirty pages written before timing
    engine.dispose()


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def export_once(client: httpx.Client, traced: bool) -> tuple[float, int, int, float]:
    """(seconds, rows, bytes, the Python heap's peak in MiB while exporting, if traced)."""
    if traced:
        tracemalloc.start()
        tracemalloc.reset_peak()
    size = lines = 0
    started = time.perf_counter()
    with client.stream("GET", "/client/equipment/export") as response:
        assert response.status_code == 200, response.read()[:300]
        for piece in response.iter_bytes():  # read and dropped: the client holds no file
            size += len(piece)
            lines += piece.count(b"\n")  # no cell of the loaded rows holds a line break
    seconds = time.perf_counter() - started
    peak = 0.0
    if traced:
        peak = tracemalloc.get_traced_memory()[1] / 1024 / 1024
        tracemalloc.stop()
    return seconds, lines - 1, size, peak


def export_figures(database_url: str, rows_list: list[int]) -> str:
    figures = []
    with (
        serve(database_url) as (base_url, token, company_id),
        httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=600) as client,
    ):
        loaded = 0
        for rows in rows_list:
            load_devices(database_url, company_id, loaded + 1, rows)
            loaded = rows
            export_once(client, traced=False)  # warm up
            rss_before = peak_rss_mib()
            seconds, written, size, _ = export_once(client, traced=False)
            rss_after = peak_rss_mib()
            _, _, _, heap_peak = export_once(client, traced=True)
            assert written == rows, (written, rows)
            figures.append(
                f"export {rows} rows ({size / 1024 / 1024:.1f} MiB): {seconds:6.2f} s "
                f"({rows / seconds:,.0f} rows/s) | Python heap peak exporting {heap_peak:6.1f} MiB | "
                f"process peak RSS {rss_before:.0f} -> {rss_after:.0f} MiB"
            )
    return "\n  ".join(figures)


def measure(
    database_url: str, count: int, import_rows: int, rounds: int, singles: int, preload: int = 0
) -> str:
    with (
        serve(database_url) as (base_url, token, company_id),
        httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=600) as client,
    ):
        loaded = ""
        if preload:
            load_devices(database_url, company_id, 1, preload, with_history=True)
            loaded = f"the company holding {preload:,} devices with their history and events first\n  "
        client.get("/client/equipment").raise_for_status()  # warm up: connection, token stamp
        return (
            loaded
            + bulk_versus_single(client, count, rounds, singles)
            + "\n  "
            + csv_imports(client, import_rows)
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=25, help="rounds of bulk versus single requests")
    parser.add_argument("--singles", type=int, default=200, help="single requests per round")
    parser.add_argument("--import-rows", type=int, default=10_000)
    parser.add_argument("--export-rows", type=int, default=100_000)
    parser.add_argument("--postgres", default="postgresql://127.0.0.1:5432/postgres")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--export-only", action="store_true")
    parser.add_argument("--no-export", action="store_true")
    parser.add_argument("--preload", type=int, default=0, help="devices the company holds first (PostgreSQL)")
    args = parser.parse_args()

    if not args.no_sqlite and not args.export_only:
        with tempfile.TemporaryDirectory() as directory:
            print(
                "SQLite\n  "
                + measure(
                    f"sqlite:///{Path(directory) / 'bench.db'}",
                    args.count,
                    args.import_rows,
                    args.rounds,
                    args.singles,
                )
            )
    if not args.export_only:
        with scratch_postgres(args.postgres) as postgres_url:
            print(
                "PostgreSQL\n  "
                + measure(postgres_url, args.count, args.import_rows, args.rounds, args.singles, args.preload)
            )
    if args.no_export:
        return
    with scratch_postgres(args.postgres) as postgres_url:
        rows = sorted({args.export_rows // 10, args.export_rows})
        print("PostgreSQL\n  " + export_figures(postgres_url, rows))


if __name__ == "__main__":
    main()
