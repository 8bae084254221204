"""Cursor pages at depth, on PostgreSQL, through the HTTP app (TestClient, in-process).

Creates a scratch database on BENCH_POSTGRES_URL (default postgresql://127.0.0.1:5432/postgres),
builds the schema with the migrations and loads 1,000,000 devices into ONE company (plus 100,000
in another, so that tenancy filters something), with their history, 2,000 employees holding the
Assigned ones, and times, interleaved (first, deep, first, deep...) so that the shared machine's
noise falls on both alike:

- the first cursor page and one 99% deep in the list, for the default order, sort=name,
  sort=-updated_at and an updated_since walk (every status, oldest change first);
- for comparison, the first page of page mode and a page at the same depth (offset 990,000),
  and the search q (trigram) on its first page.

A deep cursor is the one the list would give after its 990,000th row: the keyset of that row,
signed for the same query (`core.cursors.encode_cursor`, the fingerprint taken from a real
first-page cursor). Prints the median of N per case and the ratio deep / first. The scratch
database is dropped at the end.

    .venv/bin/python bench/cursor_pages.py [--runs 31] [--rows 1000000] [--url URL]

`--url` names a database to use instead of a scratch one: loaded on the first run, reused (and
kept) on the next ones, since loading takes minutes.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import time
from typing import Any

from fastapi.testclient import TestClient
from harness import scratch_postgres
from sqlalchemy import text
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.core.cursors import encode_cursor
from outfitter.db.session import make_engine
from outfitter.http.pagination import cursor_key
from outfitter.migrations import upgrade
from outfitter.tenants.tokens import create_company, issue_token

DEPTH = 0.99
EMPLOYEES = 2_000

EMPLOYEES_SQL = """
INSERT INTO employees (id, company_id, first_name, last_name, email, phone, country_id, address,
                       created_at, updated_at)
SELECT gen_random_uuid(), CAST(:company_id AS uuid), 'First' || g, 'Last' || g,
       'staff' || g || '@bench.example', '+100000000', CAST(:country_id AS uuid), '1 Main Street',
       now(), now()
FROM generate_series(1, :employees) AS g
"""

# Statuses as a fleet has them; created over three years, updated since, names from a small set
# (so sort=name has long runs of ties that the id breaks).
EQUIPMENT_SQL = """
WITH people AS (SELECT array_agg(id ORDER BY id) AS ids FROM employees
                WHERE company_id = CAST(:company_id AS uuid)),
rows AS (
    SELECT g, random() AS r, now() - (random() * interval '1095 days') AS created
    FROM generate_series(1, CAST(:rows AS bigint)) AS g
)
INSERT INTO equipment (id, company_id, title, year, make, model, type, state, source, status,
    purchase_date, purchase_price, currency_id, country_id, assignee_id, serial_number,
    description, other_details, specs, memory_key, storage_key, documents, status_changed_at,
    created_at, updated_at)
SELECT gen_random_uuid(), CAST(:company_id AS uuid),
    (ARRAY['MacBook Pro 14', 'ThinkPad T14', 'Dell XPS 13', 'iPhone 15', 'Pixel 8'])[(r.g % 5) + 1]
        || ' #' || (r.g % 1000),
    '2023', 'Make', 'Model', 'Laptop', 'Used', 'External', s.status,
    r.created, 999.99, CAST(:currency_id AS uuid), CAST(:country_id AS uuid),
    CASE WHEN s.status = 'Assigned' THEN p.ids[(r.g % :employees) + 1] END,
    'SN-' || r.g, '', '[]', '{"memory": "16 GB", "storage": "512 GB"}', '16gb', '512gb', '[]',
    r.created, r.created, r.created + (random() * interval '30 days')
FROM rows r CROSS JOIN people p
CROSS JOIN LATERAL (SELECT CASE WHEN r.r < 0.45 THEN 'Assigned' WHEN r.r < 0.70 THEN 'Unassigned'
    WHEN r.r < 0.90 THEN 'In_Storage' WHEN r.r < 0.95 THEN 'Sold' ELSE 'Archived' END AS status) s
"""

HISTORY_SQL = """
INSERT INTO equipment_history (id, company_id, equipment_id, event_type, event_date, seq, actor)
SELECT gen_random_uuid(), company_id, id, 'equipment_added', created_at, 1, 'system'
FROM equipment WHERE company_id = CAST(:company_id AS uuid)
"""

# The row after which the deep cursor starts, per order (the list's keyset of that row).
DEEP_ROW = {
    "default": ("SELECT created_at, id FROM equipment WHERE company_id = :c AND status <> 'Archived'"
                " ORDER BY created_at DESC, id DESC OFFSET :n LIMIT 1"),
    "sort=name": ("SELECT title, id FROM equipment WHERE company_id = :c AND status <> 'Archived'"
                  " ORDER BY title, id OFFSET :n LIMIT 1"),
    "sort=-updated_at": ("SELECT updated_at, id FROM equipment WHERE company_id = :c"
                         " AND status <> 'Archived' ORDER BY updated_at DESC, id DESC OFFSET :n LIMIT 1"),
    "updated_since": ("SELECT updated_at, id FROM equipment WHERE company_id = :c"
                      " ORDER BY updated_at, id OFFSET :n LIMIT 1"),
}  # fmt: skip
QUERIES: dict[str, dict[str, Any]] = {
    "default": {},
    "sort=name": {"sort": "name"},
    "sort=-updated_at": {"sort": "-updated_at"},
    "updated_since": {"updated_since": "2000-01-01T00:00:00Z"},
}


def fingerprint(cursor: str) -> str:
    payload = cursor.split(".")[0]
    query: str = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))[0]
    return query


def timed(client: TestClient, headers: dict[str, str], params: dict[str, Any]) -> float:
    started = time.perf_counter()
    response = client.get("/api/v2/client/equipment", params=params, headers=headers)
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, response.text
    return elapsed


def interleaved(
    client: TestClient, headers: dict[str, str], first: dict[str, Any], deep: dict[str, Any], runs: int
) -> tuple[float, float]:
    for _ in range(3):
        timed(client, headers, first), timed(client, headers, deep)
    firsts, deeps = [], []
    for run in range(runs):
        pair = (first, deep) if run % 2 == 0 else (deep, first)
        times = [timed(client, headers, params) for params in pair]
        firsts.append(times[0] if run % 2 == 0 else times[1])
        deeps.append(times[1] if run % 2 == 0 else times[0])
    return statistics.median(firsts), statistics.median(deeps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=31)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--url", help="a database to load once and keep")
    args = parser.parse_args()
    if args.url:
        run(args.url, args.rows, args.runs)
        return
    admin_url = os.environ.get("BENCH_POSTGRES_URL", "postgresql://127.0.0.1:5432/postgres")
    with scratch_postgres(admin_url) as url:
        run(url, args.rows, args.runs)


def loaded(url: str) -> tuple[str, str] | None:
    """A token and the measured company of a database loaded by an earlier run, or None."""
    engine = make_engine(url)
    try:
        with Session(engine) as session, session.begin():
            company = session.execute(text("SELECT id FROM companies WHERE name = 'Bench'")).scalar()
            if company is None:
                return None
            return issue_token(session, company).token, str(company)
    except Exception:  # not migrated yet
        return None
    finally:
        engine.dispose()


def load(url: str, rows: int) -> tuple[str, str]:
    engine = make_engine(url)
    upgrade(engine)
    with Session(engine) as session, session.begin():
        measured, other = create_company(session, "Bench"), create_company(session, "Other")
        token = issue_token(session, measured.id).token
        company_ids = [(str(measured.id), rows), (str(other.id), rows // 10)]
    started = time.perf_counter()
    with engine.begin() as connection:
        country = connection.execute(text("SELECT id FROM countries WHERE code = 'NG'")).scalar_one()
        currency = connection.execute(text("SELECT id FROM currencies WHERE code = 'USD'")).scalar_one()
        for company_id, count in company_ids:
            values = {"company_id": company_id, "country_id": str(country), "employees": EMPLOYEES}
            connection.execute(text(EMPLOYEES_SQL), values)
            connection.execute(text(EQUIPMENT_SQL), values | {"rows": count, "currency_id": str(currency)})
            connection.execute(text(HISTORY_SQL), {"company_id": company_id})
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        for table in ("equipment", "equipment_history", "employees"):
            connection.execute(text(f"VACUUM ANALYZE {table}"))
    print(f"loaded {rows:,} + {rows // 10:,} devices in {time.perf_counter() - started:.0f} s", flush=True)
    engine.dispose()
    return token, company_ids[0][0]


def run(url: str, rows: int, runs: int) -> None:
    token, company_id = loaded(url) or load(url, rows)
    engine = make_engine(url)
    app = create_app(Settings(database_url=url, rate_limit="off"))
    headers = {"Authorization": f"Bearer {token}"}
    results: list[tuple[str, float, float]] = []
    with engine.connect() as connection:
        live = connection.execute(
            text("SELECT count(*) FROM equipment WHERE company_id = :c AND status <> 'Archived'"),
            {"c": company_id},
        ).scalar_one()
        deep_rows = {
            name: connection.execute(
                text(sql), {"c": company_id, "n": int((rows if name == "updated_since" else live) * DEPTH)}
            ).one()
            for name, sql in DEEP_ROW.items()
        }
    with TestClient(app) as client:
        for name, query in QUERIES.items():
            first = {**query, "limit": 15}
            answer = client.get("/api/v2/client/equipment", params=first, headers=headers).json()
            deep = {
                **first,
                "cursor": encode_cursor(
                    cursor_key(), fingerprint(answer["next_cursor"]), tuple(deep_rows[name])
                ),
            }
            deep_page = client.get("/api/v2/client/equipment", params=deep, headers=headers).json()
            assert len(deep_page["data"]["data"]) == 15, deep_page
            results.append((f"cursor, {name}", *interleaved(client, headers, first, deep, runs)))
        total = client.get("/api/v2/client/equipment", headers=headers).json()["total"]
        deep_page = int(total * DEPTH) // 15
        results.append(("page mode, default", *interleaved(client, headers, {}, {"page": deep_page}, runs)))
        searched = {"q": "staff1999@"}
        results.append(
            ("search q (first page) vs first page", *interleaved(client, headers, {}, searched, runs))
        )
    app.state.engine.dispose()
    engine.dispose()
    print(
        f"\nmedian of {runs} interleaved requests, ms (TestClient in-process, 15 a page); deep = {DEPTH:.0%}"
    )
    print(f"{'case':<40}{'first':>10}{'deep':>10}{'deep/first':>12}")
    for name, first_ms, deep_ms in results:
        print(f"{name:<40}{first_ms:>10.1f}{deep_ms:>10.1f}{deep_ms / first_ms:>12.2f}")


if __name__ == "__main__":
    main()
