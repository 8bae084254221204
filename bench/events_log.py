"""Activity log latency at 1,000,000 events, on PostgreSQL, through the HTTP app (TestClient).

Creates a scratch database on BENCH_POSTGRES_URL (default postgresql://127.0.0.1:5432/postgres),
builds the schema with the migrations, and loads 1,000,000 events for the measured company and
100,000 for another, generated on the server (INSERT ... SELECT generate_series): every type of
section 13, 10,000 subjects, over a year. It then prints the median time of a first page, filtered
pages (type prefix, subject_id, since, and all three) and deep pages; then, interleaved (A B B A),
the unfiltered pages with their total from the kept count (events.counts) against the same pages
counting the log as before it, the cost the counting triggers add to an INSERT of one event and to
an INSERT of 25 (triggers enabled against disabled), and a fold of 10,000 deltas. The database is
dropped.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from unittest import mock

from fastapi.testclient import TestClient
from harness import scratch_postgres
from sqlalchemy import Engine, func, select, text
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.db.session import make_engine
from outfitter.events.counts import fold_event_counts
from outfitter.events.repository import EventRepository
from outfitter.migrations import upgrade
from outfitter.models.events import Event, EventType
from outfitter.tenants.tokens import create_company, issue_token

SUBJECTS = 10_000
T = TypeVar("T")

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


@contextmanager
def counting_the_log() -> Iterator[None]:
    """The page mode as it was before the kept count: every total counts the company's index."""

    def counted(self: EventRepository, conditions: list[Any]) -> Any:
        return select(func.count()).select_from(Event).where(*conditions)

    with mock.patch.object(EventRepository, "_total", counted):
        yield


def interleaved(before: Callable[[], T], after: Callable[[], T], rounds: int = 2) -> tuple[list[T], list[T]]:
    """A B B A ...: `rounds` measures of each."""
    firsts: list[T] = []
    seconds: list[T] = []
    for round_number in range(rounds):
        order = [(before, firsts), (after, seconds)]
        for measure_one, results in order if round_number % 2 == 0 else reversed(order):
            results.append(measure_one())
    return firsts, seconds


WRITE_SQL = (
    "EXPLAIN (ANALYZE, FORMAT JSON)"
    " INSERT INTO events (id, company_id, type, subject_type, subject_id, actor, created_at, data)"
    " SELECT gen_random_uuid(), %s::uuid, 'employee.created', 'employee', gen_random_uuid(), 'Bench API',"
    " now(), '{}' FROM generate_series(1, %s)"
)


def write_cost(engine: Engine, company_id: str, triggers: bool, statements: int = 200) -> list[float]:
    """PostgreSQL's own timing (EXPLAIN ANALYZE, ms, medians) of an INSERT of 1 event and of 25 (the
    triggers see a COPY's rows as an INSERT's): [execution 1, trigger 1, execution 25, trigger 25],
    in a transaction rolled back."""
    with engine.connect() as connection:
        driver = connection.connection.driver_connection
        assert driver is not None
        with driver.cursor() as cursor:
            cursor.execute(f"ALTER TABLE events {'ENABLE' if triggers else 'DISABLE'} TRIGGER USER")
            driver.commit()
            medians = []
            for rows in (1, 25):
                executions, trigger_times = [], []
                for _ in range(statements):
                    cursor.execute(WRITE_SQL, (company_id, rows))
                    row = cursor.fetchone()
                    assert row is not None
                    (plan,) = row[0]
                    executions.append(plan["Execution Time"])
                    trigger_times.append(sum(trigger["Time"] for trigger in plan.get("Triggers", [])))
                medians += [statistics.median(executions), statistics.median(trigger_times)]
            driver.rollback()
            cursor.execute("ALTER TABLE events ENABLE TRIGGER USER")
            driver.commit()
    return medians


# The unfiltered total before, and as events.counts.kept_total reads it.
TOTALS_SQL = {
    "counting the log": "SELECT count(*) FROM events WHERE company_id = %s",
    "kept count": (
        "SELECT coalesce((SELECT events FROM event_counts WHERE company_id = %s), 0)"
        " + coalesce((SELECT CAST(sum(delta) AS bigint) FROM event_count_deltas WHERE company_id = %s), 0)"
    ),
}


def total_cost(engine: Engine, company_id: str, kept: bool, runs: int) -> float:
    """PostgreSQL's own timing (EXPLAIN ANALYZE, ms, median of `runs`) of the unfiltered total."""
    sql = TOTALS_SQL["kept count" if kept else "counting the log"]
    with engine.connect() as connection:
        driver = connection.connection.driver_connection
        assert driver is not None
        with driver.cursor() as cursor:
            timings = []
            for _ in range(runs):
                cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", [company_id] * sql.count("%s"))
                row = cursor.fetchone()
                assert row is not None
                timings.append(row[0][0]["Execution Time"])
            driver.rollback()
    return float(statistics.median(timings))


def fold_time(engine: Engine, company_id: str, deltas: int = 10_000) -> float:
    """ms to fold `deltas` deltas of one company (as many single-event writes leave)."""
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO event_count_deltas (company_id, delta)"
                " SELECT CAST(:company AS uuid), 0 FROM generate_series(1, :deltas)"
            ),
            {"company": company_id, "deltas": deltas},
        )
    started = time.perf_counter()
    with engine.begin() as connection:
        fold_event_counts(connection)
    return (time.perf_counter() - started) * 1000


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
            compared = {
                name: cases[name] for name in ("first page", "page 1,000 (offset 15,000)", "last page")
            }

            def paged(params: dict[str, Any], counting: bool) -> Callable[[], float]:
                def run() -> float:
                    if not counting:
                        return measure(client, headers, params, runs)
                    with counting_the_log():
                        return measure(client, headers, params, runs)

                return run

            versus = {
                name: interleaved(paged(params, counting=True), paged(params, counting=False))
                for name, params in compared.items()
            }
            # The floor: a cursor page counts nothing.
            cursor_versus = interleaved(paged(cursor_first, counting=False), paged({}, counting=False))
        app.state.engine.dispose()
        print(f"\nmedian of {runs} requests, ms (TestClient in-process, per_page=15)")
        print(f"company total {first['total']:,}")
        for name, value in results.items():
            print(f"{name:<40}{value:>10.1f}")
        print("\nunfiltered pages, A B B A (each a median of the runs), ms: counting the log | kept count")
        for name, (before, after) in versus.items():
            ratio = statistics.median(before) / statistics.median(after)
            print(f"{name:<40}{_series(before):>20} | {_series(after):<20} {ratio:.1f}x")
        cursor_label, (cursor_pages, kept_pages) = "first page: cursor mode | page mode", cursor_versus
        print(f"{cursor_label:<40}{_series(cursor_pages):>20} | {_series(kept_pages)}")
        measured_id = companies[0][0]
        totals = interleaved(
            lambda: total_cost(engine, measured_id, kept=False, runs=runs),
            lambda: total_cost(engine, measured_id, kept=True, runs=runs),
        )
        print(
            f"{'the total alone (EXPLAIN ANALYZE)':<40}{_series(totals[0], 3):>20} | {_series(totals[1], 3)}"
        )
        writes = interleaved(
            lambda: write_cost(engine, measured_id, triggers=False),
            lambda: write_cost(engine, measured_id, triggers=True),
        )
        print("\nINSERTs, A B B A (PostgreSQL's EXPLAIN ANALYZE, median ms): triggers disabled | enabled")
        labels = (
            "1 event: execution",
            "1 event: of which triggers (FK + count)",
            "25 events: execution",
            "25 events: of which triggers (FK + count)",
        )
        for index, label in enumerate(labels):
            before, after = ([measured[index] for measured in side] for side in writes)
            print(f"{label:<40}{_series(before, 3):>20} | {_series(after, 3)}")
        print(f"\nfold of 10,000 deltas: {fold_time(engine, measured_id):.1f} ms")
    finally:
        engine.dispose()


def _series(values: list[float], digits: int = 1) -> str:
    return " ".join(f"{value:.{digits}f}" for value in values)


if __name__ == "__main__":
    main()
