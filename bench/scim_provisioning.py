"""Benchmark: users provisioned per second through SCIM (POST /scim/v2/Users, one user a request,
as Okta and Entra ID push them; and Okta's lookup-then-create pair), beside the REST API's single
create one by one and its bulk endpoint (1,000 employees in one request).

Runs the app under uvicorn on 127.0.0.1 against a fresh SQLite file and a scratch PostgreSQL
database (created and dropped here). Rounds are interleaved (bulk, SCIM, lookup+create, ...), and
the medians are printed.

    .venv/bin/python bench/scim_provisioning.py [--count 1000] [--rounds 3]
        [--postgres postgresql://127.0.0.1:5432/postgres] [--no-postgres]
"""

from __future__ import annotations

import argparse
import statistics
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
from outfitter.scim.settings import change_settings
from outfitter.tenants.tokens import create_company, issue_token

SCIM_JSON = "application/scim+json"


def scim_user(run: str, index: int) -> dict[str, Any]:
    """A user as Okta sends it by default (no address: the company's default country applies)."""
    email = f"{run}.{index}@bench.example.com"
    return {
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
        "userName": email,
        "name": {"givenName": "Bench", "familyName": f"User {index}"},
        "emails": [{"primary": True, "value": email, "type": "work"}],
        "displayName": f"Bench User {index}",
        "externalId": f"{run}-{index}",
        "active": True,
    }


def employee(run: str, index: int) -> dict[str, Any]:
    return {
        "first_name": "Bench",
        "last_name": f"Employee {index}",
        "email": f"{run}.{index}@bench.example.com",
        "country_id": "NG",
        "phone": "+234 801 234 5678",
        "address": "12 Marina Road, Lagos",
    }


@contextmanager
def serve(database_url: str) -> Iterator[tuple[str, str, str]]:
    """Migrate, create a company (default SCIM country NG) with an API and a SCIM token, serve the
    app; yields (base URL, API token, SCIM token)."""
    engine = make_engine(Settings(database_url=database_url).database_url)
    upgrade(engine)
    with Session(engine) as session, session.begin():
        company = create_company(session, "Bench Ltd")
        api_token = issue_token(session, company.id, None).token
        scim_token = issue_token(session, company.id, ["scim"]).token
        change_settings(session, company.id, default_country="NG")
    engine.dispose()
    app = create_app(Settings(database_url=database_url, rate_limit="off"))
    with serving(app, free_port()) as url:
        yield url, api_token, scim_token


def measure(database_url: str, count: int, rounds: int) -> dict[str, list[float]]:
    """Seconds per round for each way of provisioning `count` people."""
    times: dict[str, list[float]] = {"bulk": [], "single": [], "scim": [], "okta": []}
    with serve(database_url) as (url, api_token, scim_token):
        api = httpx.Client(
            base_url=f"{url}/api/v2", headers={"Authorization": f"Bearer {api_token}"}, timeout=120
        )
        scim_headers = {"Authorization": f"Bearer {scim_token}", "Content-Type": SCIM_JSON}
        scim = httpx.Client(base_url=f"{url}/scim/v2", headers=scim_headers, timeout=120)
        with api, scim:
            api.get("/client/employees").raise_for_status()  # warm up: connections, token stamps
            scim.get("/Users", params={"count": 1}).raise_for_status()
            for round_ in range(rounds):
                batch = [employee(f"bulk{round_}", index) for index in range(count)]
                started = time.perf_counter()
                response = api.post("/client/employees/bulk", json={"employees": [batch]})
                times["bulk"].append(time.perf_counter() - started)
                assert response.status_code == 201, response.text[:300]

                started = time.perf_counter()
                for index in range(count):
                    single = api.post("/client/employees", json=employee(f"single{round_}", index))
                    assert single.status_code == 201, single.text[:300]
                times["single"].append(time.perf_counter() - started)

                started = time.perf_counter()
                for index in range(count):
                    created = scim.post("/Users", json=scim_user(f"scim{round_}", index))
                    assert created.status_code == 201, created.text[:300]
                times["scim"].append(time.perf_counter() - started)

                started = time.perf_counter()
                for index in range(count):
                    user = scim_user(f"okta{round_}", index)
                    lookup = scim.get("/Users", params={"filter": f'userName eq "{user["userName"]}"'})
                    assert lookup.json()["totalResults"] == 0, lookup.text[:300]
                    created = scim.post("/Users", json=user)
                    assert created.status_code == 201, created.text[:300]
                times["okta"].append(time.perf_counter() - started)
            total = api.get("/client/employees").json()["data"]["total"]
            assert total == 4 * count * rounds, total
    return times


def report(backend: str, count: int, times: dict[str, list[float]]) -> None:
    rates = {name: count / statistics.median(seconds) for name, seconds in times.items()}
    print(
        f"{backend:<10} SCIM POST /Users: {rates['scim']:7.0f} users/s | "
        f"Okta lookup+create: {rates['okta']:7.0f} users/s | "
        f"POST /client/employees one by one: {rates['single']:5.0f}/s | "
        f"bulk endpoint: {rates['bulk']:7.0f} employees/s | "
        f"bulk/SCIM {rates['bulk'] / rates['scim']:5.1f}x  "
        f"(medians of {len(times['scim'])} rounds of {count})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres", default="postgresql://127.0.0.1:5432/postgres")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory:
        sqlite_url = f"sqlite:///{Path(directory) / 'bench.db'}"
        report("SQLite", args.count, measure(sqlite_url, args.count, args.rounds))
    if not args.no_postgres:
        with scratch_postgres(args.postgres) as postgres_url:
            report("PostgreSQL", args.count, measure(postgres_url, args.count, args.rounds))


if __name__ == "__main__":
    main()
