"""Activity log latency at 1,000,000 events, on PostgreSQL, through the HTTP app (TestClient).

Creates a scratch database on BENCH_POSTGRES_URL (default postgresql://127.0.0.1:5432/postgres),
builds the schema with the migrations, and loads 1,000,000 events for the measured company and
100,000 for another, generated on the server (INSERT ... SELECT generate_series): every type of
section 13, 10,000 subjects, over a year. It then prints the median time of a first page, filtered
pages (type prefix, subject_id, since, and all three) and deep pages. The database is dropped.

    .venv/bin/python bench/events_log.py [--runs 21] [--events 1000000] [--plain-index]

`--plain-index` replaces the log's order index, `(company_id, created_at, id) INCLUDE (type,
subject_id)` as migration 0003 makes it, with the same columns and no INCLUDE, to show what the
INCLUDE buys a type- or subject-filtered page (docs/events.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from harness import scratch_postgres
from sqlalchemy import text
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.core.tokens import create_company, issue_token
from outfitter.db.session import make_engine
from outfitter.migrations import upgrade
from outfitter.models.events import EventType

SUBJECTS = 10_000

# Row g: type g % 22, subject g % 10,000 (its ids are md5-made uuids, so the bench can name one),
# a time spread over the year before now.
EVENTS_SQL = """
INSERT INTO events (id, company_id, type, subject_type, subject_id, actor, created_at, data)
SELECT gen_random_uuid(), CAST(:company_id AS uuid), t.types[(g % t.n) + 1],
       split_part(t.types[(g % t.n) + 1], '.', 1),
       CAST(md5('subject-' || (g % :subjects)) AS uuid), 'Bench API',
       now() - (random() * interval '365 days'),
       json_build_object('id', md5('subject-' || (g % :subjects)), 'title', 'Device ' || g)
FROM generate_series(1, CAST(:rows AS bigint)) AS g,
     (SELECT CAST(:types AS text[]) AS types, CAST(:n AS int) AS n) AS t
"""


def measure(client: TestClient, headers: dict[str, str], params: dict[str, Any], runs: int) -> float:
    for _ in range(3):
        response = client.get("/api/v2/client/events", params=params, headers=headers)
        assert response.status_code == 200, response.text
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get("/api/v2/client/events", params=params, headers=headers)
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    return statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--plain-index", action="store_true")
    args = parser.parse_args()
    admin_url = os.environ.get("BENCH_POSTGRES_URL", "postgresql://127.0.0.1:5432/postgres")
    with scratch_postgres(admin_url) as url:
        run(url, args.runs, args.events, args.plain_index)


PLAIN_INDEX_SQL = (
    "DROP INDEX ix_events_company_created;"
    " CREATE INDEX ix_events_company_created ON events (company_id, created_at, id)"
)


def run(url: str, runs: int, rows: int, plain_index: bool = False) -> None:
    engine = make_engine(url)
    try:
        upgrade(engine)
        with Session(engine) as session, session.begin():
            measured, other = create_company(session, "Bench"), create_company(session, "Other")
            token = issue_token(session, measured.id).token
            companies = [(str(measured.id), rows), (str(other.id), rows // 10)]
        types = [member.value for member in EventType]
        started = time.perf_counter()
        with engine.begin() as connection:
            for company_id, count in companies:
                connection.execute(
                    text(EVENTS_SQL),
                    {
                        "company_id": company_id,
                        "rows": count,
                        "subjects": SUBJECTS,
                        "types": types,
                        "n": len(types),
                    },
                )
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            if plain_index:
                connection.exec_driver_sql(PLAIN_INDEX_SQL)
            connection.execute(text("VACUUM ANALYZE events"))
            subject = connection.execute(text("SELECT CAST(md5('subject-7') AS uuid)")).scalar_one()
        print(
            f"loaded {sum(count for _, count in companies):,} events in {time.perf_counter() - started:.1f} s"
        )

        app = create_app(Settings(database_url=url, rate_limit="off"))
        headers = {"Authorization": f"Bearer {token}"}
        week_ago = (datetime.now(UTC) - timedelta(days=7)).isoformat()
        with TestClient(app) as client:
            first = client.get("/api/v2/client/events", headers=headers).json()["data"]
            prefix = client.get("/api/v2/client/events", params={"type": "equipment.*"}, headers=headers)
            prefix_last = prefix.json()["data"]["last_page"]
            cursor_first = {"limit": 15}
            deep = client.get("/api/v2/client/events", params=cursor_first, headers=headers).json()["data"]
            for _ in range(50):  # 50 pages in: a cursor page costs the same at any depth
                deep = client.get(
                    "/api/v2/client/events",
                    params={**cursor_first, "cursor": deep["next_cursor"]},
                    headers=headers,
                ).json()["data"]
            cases: dict[str, dict[str, Any]] = {
                "first page": {},
                "first page, cursor mode (no count)": cursor_first,
                "page 51, cursor mode": {**cursor_first, "cursor": deep["next_cursor"]},
                "type=equipment.*, cursor mode": {**cursor_first, "type": "equipment.*"},
                "type=equipment.*": {"type": "equipment.*"},
                "type=wallet.debited,order.*": {"type": "wallet.debited,order.*"},
                f"subject_id (~{rows // SUBJECTS} events)": {"subject_id": str(subject)},
                "since=7 days ago": {"since": week_ago},
                "type=equipment.*&since=7 days ago": {"type": "equipment.*", "since": week_ago},
                "page 1,000 (offset 15,000)": {"page": 1000},
                "middle page (the deepest)": {"page": first["last_page"] // 2},
                "last page": {"page": first["last_page"]},
                "type=equipment.*, middle page": {"type": "equipment.*", "page": prefix_last // 2},
            }
            results = {name: measure(client, headers, params, runs) for name, params in cases.items()}
        app.state.engine.dispose()
        print(f"\nmedian of {runs} requests, ms (TestClient in-process, per_page=15)")
        print(f"company total {first['total']:,}")
        for name, value in results.items():
            print(f"{name:<40}{value:>10.1f}")
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
