"""Equipment list latency at scale, on PostgreSQL, through the HTTP app (TestClient, in-process).

Creates a scratch database on BENCH_POSTGRES_URL (default postgresql://127.0.0.1:5432/postgres),
builds the schema with the migrations, and loads ten companies; the measured one holds a tenth of
the table. Stage 1: 10,000 equipment rows (1,000 of the company); stage 2: 1,000,000 rows
(100,000 of the company). Rows are generated on the server (INSERT ... SELECT generate_series).
For each stage it times the first page, the last page and three filtered pages (median of N runs)
and prints them. The scratch database is dropped at the end.

    .venv/bin/python bench/equipment_list.py [--runs 21]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from fastapi.testclient import TestClient
from harness import scratch_postgres
from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.db.session import make_engine
from outfitter.migrations import upgrade
from outfitter.tenants.tokens import create_company, issue_token

COMPANIES = 10
EMPLOYEES_PER_COMPANY = 200
COUNTRIES = ["NG", "KE", "GH", "ZA", "US", "GB", "DE", "FR", "EG", "RW"]
STAGES = (10_000, 1_000_000)

EMPLOYEES_SQL = """
INSERT INTO employees (id, company_id, first_name, last_name, email, phone, country_id, address,
                       created_at, updated_at)
SELECT gen_random_uuid(), c.id, 'First' || g, 'Last' || g, 'staff' || g || '@' || c.id || '.example',
       '+100000000', :country_id, '1 Main Street', now(), now()
FROM unnest(CAST(:company_ids AS uuid[])) AS c(id), generate_series(1, :per_company) AS g
"""

# g numbers the rows of the stage; the company is g % 10 (the measured company is index 0).
EQUIPMENT_SQL = """
WITH params AS (
    SELECT CAST(:company_ids AS uuid[]) AS companies, CAST(:country_ids AS uuid[]) AS countries,
           CAST(:employee_ids AS uuid[]) AS employees, CAST(:currency_id AS uuid) AS currency
), rows AS (
    SELECT g, (g % 10) + 1 AS company_index, random() AS r_status, floor(random() * 20) AS kind,
           floor(random() * 4)::int AS mem, floor(random() * 3)::int AS disk,
           floor(random() * 10)::int AS place,
           now() - (random() * interval '1095 days') AS created
    FROM generate_series(CAST(:first AS bigint), CAST(:last AS bigint)) AS g
)
INSERT INTO equipment (id, company_id, title, year, make, model, type, state, source, status,
    purchase_date, purchase_price, currency_id, country_id, assignee_id, serial_number, hash_code,
    image_url, description, other_details, specs, memory_key, storage_key, documents,
    status_changed_at, created_at, updated_at)
SELECT gen_random_uuid(), p.companies[r.company_index], 'Device ' || r.g, '2023', 'Make', 'Model',
    CASE WHEN r.kind < 6 THEN 'Laptop' WHEN r.kind < 8 THEN 'Workstation'
         WHEN r.kind < 10 THEN 'Laptop/Workstation' WHEN r.kind < 15 THEN 'Phones'
         WHEN r.kind < 18 THEN 'Accessories' ELSE 'Tablet' END,
    'Used', 'External', s.status,
    r.created - interval '30 days', 999.990000, p.currency, p.countries[r.place + 1],
    CASE WHEN s.status = 'Assigned'
         THEN p.employees[(r.company_index - 1) * CAST(:per_company AS int)
                          + (r.g % CAST(:per_company AS int))::int + 1] END,
    'SN-' || r.g, :tag, NULL, '', '[]',
    json_build_object('memory', (ARRAY['8 GB','16 GB','32 GB','64 GB'])[r.mem + 1],
                      'storage', (ARRAY['256 GB','512 GB','1 TB'])[r.disk + 1], 'color', 'Grey'),
    (ARRAY['8gb','16gb','32gb','64gb'])[r.mem + 1], (ARRAY['256gb','512gb','1tb'])[r.disk + 1],
    '[]', r.created, r.created, r.created
FROM rows r CROSS JOIN params p
CROSS JOIN LATERAL (SELECT CASE WHEN r.r_status < 0.40 THEN 'Assigned'
         WHEN r.r_status < 0.65 THEN 'Unassigned'
         WHEN r.r_status < 0.85 THEN 'In_Storage' WHEN r.r_status < 0.90 THEN 'Sold'
         ELSE 'Archived' END AS status) s
"""

HISTORY_SQL = """
INSERT INTO equipment_history (id, company_id, equipment_id, event_type, event_date, seq, assignee_id,
                               assignee_name, actor, payload)
SELECT gen_random_uuid(), e.company_id, e.id, 'equipment_added', e.created_at, 1, NULL, NULL, 'system',
       CAST(NULL AS json)
FROM equipment e WHERE e.hash_code = :tag
UNION ALL
SELECT gen_random_uuid(), e.company_id, e.id, 'assigned', e.created_at, 2, e.assignee_id, 'First Last',
       'system', NULL
FROM equipment e WHERE e.hash_code = :tag AND e.status = 'Assigned'
"""


def load_rows(connection: Connection, ids: dict[str, Any], first: int, last: int) -> None:
    tag = f"bench-{last}"  # hash_code marks the rows of one stage, so their history can follow
    params = {**ids, "first": first, "last": last, "per_company": EMPLOYEES_PER_COMPANY, "tag": tag}
    connection.execute(text(EQUIPMENT_SQL), params)
    connection.execute(text(HISTORY_SQL), {"tag": tag})


def measure(client: TestClient, headers: dict[str, str], params: dict[str, Any], runs: int) -> float:
    for _ in range(3):
        response = client.get("/api/v2/client/equipment", params=params, headers=headers)
        assert response.status_code == 200, response.text
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get("/api/v2/client/equipment", params=params, headers=headers)
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    return statistics.median(timings)


def run_stage(client: TestClient, headers: dict[str, str], runs: int) -> dict[str, float]:
    first = client.get("/api/v2/client/equipment", headers=headers).json()
    cases: dict[str, dict[str, Any]] = {
        "first page": {},
        "last page": {"page": first["last_page"]},
        "status=In_Storage": {"status": "In_Storage"},
        "type=Phones&country=NG": {"type": "Phones", "country": "NG"},
        "type=Laptop/Workstation&memory=16gb&status=Assigned": {
            "type": "Laptop/Workstation",
            "memory": "16gb",
            "status": "Assigned",
        },
    }
    results = {name: measure(client, headers, params, runs) for name, params in cases.items()}
    results["(company total, non-archived)"] = float(first["total"])
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    admin_url = os.environ.get("BENCH_POSTGRES_URL", "postgresql://127.0.0.1:5432/postgres")
    with scratch_postgres(admin_url) as url:
        run(url, args.runs)


def run(url: str, runs: int) -> None:
    engine = make_engine(url)
    try:
        started = time.perf_counter()
        upgrade(engine)
        with Session(engine) as session, session.begin():
            companies = [create_company(session, f"Bench {index}") for index in range(COMPANIES)]
            token = issue_token(session, companies[0].id).token
            company_ids = [str(company.id) for company in companies]
        with engine.begin() as connection:
            countries = dict(connection.execute(text("SELECT code, id FROM countries")).all())
            currency_id = connection.execute(
                text("SELECT id FROM currencies WHERE code = 'USD'")
            ).scalar_one()
            connection.execute(
                text(EMPLOYEES_SQL),
                {
                    "company_ids": company_ids,
                    "country_id": countries["NG"],
                    "per_company": EMPLOYEES_PER_COMPANY,
                },
            )
            employees = connection.execute(
                text(
                    "SELECT e.id FROM employees e"
                    " ORDER BY array_position(CAST(:ids AS uuid[]), e.company_id), e.id"
                ),
                {"ids": company_ids},
            ).scalars()
            ids = {
                "company_ids": company_ids,
                "country_ids": [str(countries[code]) for code in COUNTRIES],
                "employee_ids": [str(employee) for employee in employees],
                "currency_id": str(currency_id),
            }
        app = create_app(Settings(database_url=url, rate_limit="off"))
        headers = {"Authorization": f"Bearer {token}"}
        loaded = 0
        report: dict[int, dict[str, float]] = {}
        with TestClient(app) as client:
            for rows in STAGES:
                stage_started = time.perf_counter()
                with engine.begin() as connection:
                    load_rows(connection, ids, loaded + 1, rows)
                with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                    connection.execute(text("VACUUM ANALYZE equipment"))
                    connection.execute(text("VACUUM ANALYZE equipment_history"))
                loaded = rows
                print(
                    f"loaded {rows:,} equipment rows in {time.perf_counter() - stage_started:.1f} s",
                    flush=True,
                )
                report[rows] = run_stage(client, headers, runs)
        app.state.engine.dispose()
        print(f"\nmedian of {runs} requests, ms (TestClient in-process, per_page=15)")
        print(f"{'case':<55}" + "".join(f"{rows:>14,}" for rows in STAGES))
        for case in report[STAGES[0]]:
            print(f"{case:<55}" + "".join(f"{report[rows][case]:>14.1f}" for rows in STAGES))
        baseline = report[STAGES[0]]["first page"]
        worst = max(
            value for rows in STAGES for case, value in report[rows].items() if not case.startswith("(")
        )
        print(f"\nworst / first page at {STAGES[0]:,} rows: {worst / baseline:.2f}x")
        print(f"total run time {time.perf_counter() - started:.0f} s")
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
