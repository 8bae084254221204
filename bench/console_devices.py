"""The console's devices pages at a 100,000-device company, on PostgreSQL, through the app
(TestClient, in-process, signed in as an admin).

Creates a scratch database on BENCH_POSTGRES_URL (default postgresql://127.0.0.1:5432/postgres),
builds the schema with the migrations, and loads one company of 100,000 devices (with their
history) and 200 employees, generated on the server as bench/equipment_list.py does. Then times
each page N times and prints p50/p95 (ms) and the page's weight (KB). The scratch database is
dropped at the end.

    .venv/bin/python bench/console_devices.py [--runs 50]
"""

from __future__ import annotations

import argparse
import os
import re
import time
import uuid
from typing import Any

from equipment_list import EMPLOYEES_PER_COMPANY, EMPLOYEES_SQL, load_rows
from fastapi.testclient import TestClient
from harness import scratch_postgres
from sqlalchemy import text
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.console import accounts
from outfitter.db.session import make_engine
from outfitter.db.tenancy import TenantSession, across_companies
from outfitter.migrations import upgrade
from outfitter.models import ConsoleRole
from outfitter.tenants.tokens import create_company

DEVICES = 100_000
COUNTRIES = ["NG", "KE", "GH", "ZA", "US", "GB", "DE", "FR", "EG", "RW"]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def measure(
    client: TestClient, method: str, path: str, runs: int, **kwargs: Any
) -> tuple[float, float, float]:
    """p50 and p95 in ms, and the answer's size in KB."""
    for _ in range(3):
        response = client.request(method, path, **kwargs)
        assert response.status_code in (200, 303), (path, response.status_code, response.text[:500])
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.request(method, path, **kwargs)
        timings.append((time.perf_counter() - started) * 1000)
    return min(timings), percentile(timings, 0.5), percentile(timings, 0.95), len(response.content) / 1024


def load(url: str) -> tuple[str, str]:
    """The company with its devices; answers its id and a signed-in console session's id."""
    engine = make_engine(url)
    upgrade(engine)
    with Session(engine) as session, session.begin():
        company = create_company(session, "Bench console")
        company_id = str(company.id)
    with engine.begin() as connection:
        countries = dict(connection.execute(text("SELECT code, id FROM countries")).all())
        currency_id = connection.execute(text("SELECT id FROM currencies WHERE code = 'USD'")).scalar_one()
        connection.execute(
            text(EMPLOYEES_SQL),
            {
                "company_ids": [company_id],
                "country_id": countries["NG"],
                "per_company": EMPLOYEES_PER_COMPANY,
            },
        )
        employees = [
            str(e) for e in connection.execute(text("SELECT id FROM employees ORDER BY id")).scalars()
        ]
        # The loader spreads rows over ten companies (g % 10): ten times the same one.
        ids = {
            "company_ids": [company_id] * 10,
            "country_ids": [str(countries[code]) for code in COUNTRIES],
            "employee_ids": employees * 10,
            "currency_id": str(currency_id),
        }
        load_rows(connection, ids, 1, DEVICES)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("VACUUM ANALYZE equipment"))
        connection.execute(text("VACUUM ANALYZE equipment_history"))
        connection.execute(text("VACUUM ANALYZE employees"))
    with across_companies(TenantSession(engine)) as session, session.begin():
        invite = accounts.invite(session, uuid.UUID(company_id), "admin@bench.example", ConsoleRole.ADMIN)
        who = accounts.invited(session, invite.token)
        assert who is not None
        accounts.accept_invite(session, who, "a long bench passphrase")
        session_id = accounts.open_session(session, who.user_id, who.company_id)
    engine.dispose()
    return company_id, session_id


def run(url: str, runs: int) -> None:
    started = time.perf_counter()
    _, session_id = load(url)
    print(f"loaded {DEVICES:,} devices in {time.perf_counter() - started:.1f} s", flush=True)
    app = create_app(Settings(database_url=url, rate_limit="off"))
    with TestClient(app, base_url="http://testserver", follow_redirects=False) as client:
        client.cookies.set("outfitter_session", session_id)
        first = client.get("/console/devices", params={"per_page": "100"}).text
        after = re.search(r'rel="next" href="[^"]*after=([^"&]+)', first)
        assert after, "the first page has a Next link"
        one = re.search(r'href="/console/devices/([0-9a-f-]{36})"', first)
        assert one
        token = re.search(r'name="csrf_token" value="([^"]+)"', first)
        assert token
        cases: list[tuple[str, str, str, dict[str, Any]]] = [
            ("devices, 100 a page (first page)", "GET", "/console/devices?per_page=100", {}),
            (
                "devices, 100 a page, all columns",
                "GET",
                "/console/devices?per_page=100&"
                + "&".join(
                    f"cols={name}"
                    for name in (
                        "serial",
                        "type",
                        "status",
                        "assignee",
                        "country",
                        "make",
                        "specs",
                        "purchase",
                        "price",
                        "created",
                        "updated",
                    )
                ),
                {},
            ),
            (
                "devices, 100 a page (next page, cursor)",
                "GET",
                f"/console/devices?per_page=100&after={after.group(1)}",
                {},
            ),
            (
                "devices, status=In_Storage&type=Phones&country=NG",
                "GET",
                "/console/devices?per_page=100&status=In_Storage&type=Phones&country=NG",
                {},
            ),
            ("devices, search q=Device 4242", "GET", "/console/devices?per_page=100&q=Device+4242", {}),
            ("a device with its timeline", "GET", f"/console/devices/{one.group(1)}", {}),
            ("dashboard", "GET", "/console/", {}),
            (
                "bulk preview: archive all of a filter (<= 1,000)",
                "POST",
                "/console/devices/bulk",
                {
                    "data": {
                        "csrf_token": token.group(1),
                        "step": "preview",
                        "action": "Archived",
                        "scope": "matching",
                        "view": "q=Device 1234",
                    },
                },
            ),
            ("register form", "GET", "/console/devices/new", {}),
        ]
        machine_load = os.getloadavg()[0]
        print(f"\n{runs} requests each, in-process, PostgreSQL, {DEVICES:,} devices, load {machine_load:.1f}")
        print(f"{'page':<55}{'min ms':>9}{'p50 ms':>9}{'p95 ms':>9}{'KB':>8}")
        for name, method, path, kwargs in cases:
            fastest, p50, p95, size = measure(client, method, path, runs, **kwargs)
            print(f"{name:<55}{fastest:>9.1f}{p50:>9.1f}{p95:>9.1f}{size:>8.1f}", flush=True)
    app.state.engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    admin_url = os.environ.get("BENCH_POSTGRES_URL", "postgresql://127.0.0.1:5432/postgres")
    with scratch_postgres(admin_url) as url:
        run(url, args.runs)


if __name__ == "__main__":
    main()
