"""Benchmark: 1,000 employees created with one bulk request versus 1,000 single requests.

Runs the app under uvicorn on 127.0.0.1 (a free port) against a fresh SQLite file and a scratch
PostgreSQL database (created and dropped here), and prints both times and their ratio.

    .venv/bin/python bench/bulk_employees.py [--count 1000] [--postgres postgresql://127.0.0.1:5432/postgres]
    (--no-postgres to run SQLite only)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from harness import free_port, scratch_postgres, serving
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.db.session import make_engine
from outfitter.migrations import upgrade
from outfitter.tenants.tokens import create_company, issue_token


def employee(run: str, index: int) -> dict[str, Any]:
    return {
        "first_name": "Bench",
        "last_name": f"Employee {index}",
        "email": f"{run}.{index}@bench.example.com",
        "country_id": ("NG", "Kenya", "za")[index % 3],
        "phone": "+234 801 234 5678",
        "address": "12 Marina Road, Lagos",
    }


@contextmanager
def serve(database_url: str) -> Iterator[tuple[str, str]]:
    """Migrate, create a company and a token, serve the app; yields (base URL, token)."""
    engine = make_engine(Settings(database_url=database_url).database_url)
    upgrade(engine)
    with Session(engine) as session, session.begin():
        company = create_company(session, "Bench Ltd")
        token = issue_token(session, company.id, None).token
    engine.dispose()
    app = create_app(Settings(database_url=database_url, rate_limit="off"))
    with serving(app, free_port()) as url:
        yield f"{url}/api/v2", token


def measure(database_url: str, count: int) -> tuple[float, float]:
    with serve(database_url) as (base_url, token):
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base_url, headers=headers, timeout=120) as client:
            client.get("/client/employees").raise_for_status()  # warm up: connection, token stamp

            batch = [employee("bulk", index) for index in range(count)]
            started = time.perf_counter()
            response = client.post("/client/employees/bulk", json={"employees": [batch]})
            bulk_seconds = time.perf_counter() - started
            assert response.status_code == 201, response.text[:300]
            assert len(response.json()["data"][0]) == count

            started = time.perf_counter()
            for index in range(count):
                single = client.post("/client/employees", json=employee("single", index))
                assert single.status_code == 201, single.text[:300]
            single_seconds = time.perf_counter() - started

            total = client.get("/client/employees").json()["data"]["total"]
            assert total == 2 * count, total
    return bulk_seconds, single_seconds


def report(backend: str, count: int, bulk_seconds: float, single_seconds: float) -> None:
    print(
        f"{backend:<10} bulk: {count} employees in 1 request {bulk_seconds:8.3f} s | "
        f"single: {count} requests {single_seconds:8.3f} s | "
        f"ratio single/bulk {single_seconds / bulk_seconds:6.1f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--postgres", default="postgresql://127.0.0.1:5432/postgres")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory:
        sqlite_url = f"sqlite:///{Path(directory) / 'bench.db'}"
        report("SQLite", args.count, *measure(sqlite_url, args.count))
    if not args.no_postgres:
        with scratch_postgres(args.postgres) as postgres_url:
            report("PostgreSQL", args.count, *measure(postgres_url, args.count))


if __name__ == "__main__":
    main()
