"""Custom field filters at scale, on PostgreSQL, through the HTTP app (TestClient, in-process).

Creates a scratch database on BENCH_POSTGRES_URL (default postgresql://127.0.0.1:5432/postgres),
builds the schema with the migrations, defines four device fields for the measured company (one of
ten: it holds a tenth of the rows) and loads `--rows` devices (default 100,000; the issue's figure is
`--rows 1000000`), generated on the server (INSERT ... SELECT generate_series), each with values:
`imei` (unique), `site` (one of 10), `ram` (one of 4) and `rugged` (half). Then it prints the median
of `--runs` requests of the first page unfiltered beside the first page of each filter, and, for
`cf_imei=...` by SQL alone, the storage this change chose (a GIN `jsonb_path_ops` index, `@>`)
beside an expression index on the one key (`(custom_fields ->> 'imei')`), which would need an
index per field. The scratch database is dropped at the end.

    .venv/bin/python bench/custom_fields.py [--rows 1000000] [--runs 21]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient
from harness import scratch_postgres
from sqlalchemy import Connection, Engine, text
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.db.session import make_engine
from outfitter.migrations import upgrade
from outfitter.tenants.tokens import create_company, issue_token

COMPANIES = 10
SITES = ["HQ", "Lagos", "Nairobi", "Accra", "Cairo", "Kigali", "Lisbon", "Berlin", "Paris", "London"]
FIELDS = [
    {"entity": "device", "key": "imei", "label": "IMEI", "type": "text"},
    {"entity": "device", "key": "site", "label": "Site", "type": "choice", "choices": SITES},
    {"entity": "device", "key": "ram", "label": "RAM (GB)", "type": "number"},
    {"entity": "device", "key": "rugged", "label": "Rugged", "type": "boolean"},
]

# g numbers the rows; the company is g % 10 (the measured company is index 0).
EQUIPMENT_SQL = """
INSERT INTO equipment (id, company_id, title, description, source, status, other_details, specs, documents,
    custom_fields, sensitive_fields, status_changed_at, created_at, updated_at)
SELECT gen_random_uuid(), (CAST(:company_ids AS uuid[]))[(g % 10) + 1], 'Device ' || g, '', 'External',
    CASE WHEN (g / 10) % 10 = 9 THEN 'Archived' ELSE 'Unassigned' END, '[]', '{}', '[]',
    jsonb_build_object('imei', lpad(g::text, 15, '0'), 'site', (CAST(:sites AS text[]))[(g / 10) % 10 + 1],
                       'ram', 8 * ((g / 100) % 4 + 1), 'rugged', (g / 10) % 2 = 0),
    '{}', created, created, created
FROM generate_series(1, CAST(:rows AS bigint)) AS g
CROSS JOIN LATERAL (SELECT now() - (g * interval '1 second') AS created) AS t
"""


def timed(call: Callable[[], Any], runs: int) -> float:
    for _ in range(3):
        call()
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


def http_cases(
    client: TestClient, headers: dict[str, str], imei: str, runs: int
) -> dict[str, tuple[float, int]]:
    cases = {
        "first page, unfiltered": {},
        f"cf_imei={imei} (one device)": {"cf_imei": imei},
        "cf_site=Lagos (a tenth)": {"cf_site": "Lagos"},
        "cf_ram=16 (a quarter)": {"cf_ram": "16"},
        "cf_rugged=true (half)": {"cf_rugged": "true"},
        "cf_ram__gte=32 (a range: no index)": {"cf_ram__gte": "32"},
    }
    results = {}
    for name, params in cases.items():

        def get(params: dict[str, Any] = params) -> int:
            response = client.get("/api/v2/client/equipment", params=params, headers=headers)
            assert response.status_code == 200, response.text
            return int(response.json()["total"])

        results[name] = (timed(get, runs), get())
    return results


PAGE_SQL = """
SELECT id FROM equipment WHERE company_id = :company AND status != 'Archived' AND {condition}
ORDER BY created_at DESC, id DESC LIMIT 15
"""


def sql_cases(engine: Engine, company: str, imei: str, runs: int) -> dict[str, float]:
    """`cf_imei=...`'s first page by SQL alone: GIN containment, then an expression index."""
    results = {}
    with engine.connect() as connection:

        def page(condition: str, value: str) -> Callable[[], Any]:
            statement = text(PAGE_SQL.format(condition=condition))
            return lambda: connection.execute(statement, {"company": company, "value": value}).all()

        containment = page("custom_fields @> CAST(:value AS jsonb)", f'{{"imei": "{imei}"}}')
        results["GIN jsonb_path_ops, custom_fields @> '{\"imei\": ...}'"] = timed(containment, runs)
        by_key = page("custom_fields ->> 'imei' = :value", imei)
        results["no index on the key, custom_fields ->> 'imei' = ..."] = timed(by_key, max(3, runs // 5))
        connection.commit()
        started = time.perf_counter()
        connection.execute(
            text("CREATE INDEX bench_imei ON equipment (company_id, (custom_fields ->> 'imei'))")
        )
        connection.execute(text("ANALYZE equipment"))
        connection.commit()
        built = time.perf_counter() - started
        results[f"expression index on the key (built in {built:.1f} s), ->> = ..."] = timed(by_key, runs)
        connection.execute(text("DROP INDEX bench_imei"))
        connection.commit()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, default=100_000, help="devices in all (1000000 for the issue's figure)"
    )
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    admin_url = os.environ.get("BENCH_POSTGRES_URL", "postgresql://127.0.0.1:5432/postgres")
    with scratch_postgres(admin_url) as url:
        run(url, args.rows, args.runs)


def load(connection: Connection, company_ids: list[str], rows: int) -> None:
    connection.execute(text(EQUIPMENT_SQL), {"company_ids": company_ids, "sites": SITES, "rows": rows})


def run(url: str, rows: int, runs: int) -> None:
    engine = make_engine(url)
    try:
        started = time.perf_counter()
        upgrade(engine)
        with Session(engine) as session, session.begin():
            companies = [create_company(session, f"Bench {index}") for index in range(COMPANIES)]
            token = issue_token(session, companies[0].id).token
            company_ids = [str(company.id) for company in companies]
        app = create_app(Settings(database_url=url, rate_limit="off"))
        headers = {"Authorization": f"Bearer {token}"}
        with TestClient(app) as client:
            for field in FIELDS:
                client.post("/api/v2/client/custom-fields", json=field, headers=headers).raise_for_status()
            loading = time.perf_counter()
            with engine.begin() as connection:
                load(connection, company_ids, rows)
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                connection.execute(text("VACUUM ANALYZE equipment"))
            print(f"loaded {rows:,} devices with values in {time.perf_counter() - loading:.1f} s", flush=True)
            middle = rows // 2 - (rows // 2) % 100  # the measured company's (g % 10 == 0), not Archived
            imei = f"{middle:015d}"
            report = http_cases(client, headers, imei, runs)
        app.state.engine.dispose()
        sql = sql_cases(engine, company_ids[0], imei, runs)
        print(
            f"\n{rows:,} devices, {COMPANIES} companies; "
            f"median of {runs} requests, ms (TestClient, per_page=15)"
        )
        for name, (median, total) in report.items():
            print(f"  {name:<45}{median:>9.1f} ms   total {total:,}")
        print("\ncf_imei=... first page by SQL alone (median, ms)")
        for name, median in sql.items():
            print(f"  {name:<70}{median:>9.2f}")
        print(f"\ntotal run time {time.perf_counter() - started:.0f} s")
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
