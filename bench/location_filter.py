"""The equipment list filtered by a location subtree, beside the unfiltered first page, on
PostgreSQL, through the HTTP app (TestClient, in-process).

Creates a scratch database on BENCH_POSTGRES_URL (default postgresql://127.0.0.1:5432/postgres),
builds the schema with the migrations, and gives one company a tree of locations (5 sites, 10
offices each, 10 rooms each: 555 locations) and `--devices` devices (default 100,000; the figure
docs/locations.md quotes is `--devices 1000000`), generated on the server (INSERT ... SELECT
generate_series): 40 % Assigned (with no location), the others Unassigned, In_Storage, Sold or
Archived, at a room or an office spread over the tree. Times (median of `--runs`) the unfiltered
first page, then `location_id=` a site (a fifth of the placed devices), an office (a fiftieth) and
a room (a five-hundredth), in page and cursor mode, and a location's answer with its counts. The
scratch database is dropped at the end.

    .venv/bin/python bench/location_filter.py [--devices 1000000] [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from typing import Any

from fastapi.testclient import TestClient
from harness import scratch_postgres
from sqlalchemy import text
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.db.session import make_engine
from outfitter.migrations import upgrade
from outfitter.models.locations import path_segment
from outfitter.tenants.tokens import create_company, issue_token

SITES, OFFICES, ROOMS = 5, 10, 10

LOCATION_SQL = """
INSERT INTO locations (id, company_id, name, kind, parent_id, path, depth, is_default_storage,
                       sibling_name, created_at, updated_at)
VALUES (:id, :company_id, :name, :kind, :parent_id, :path, :depth, false, :sibling, now(), now())
"""

# g numbers the devices; a placed device is at one of the places (rooms, then offices) by g.
EQUIPMENT_SQL = """
WITH rows AS (
    SELECT g, random() AS r_status, now() - (random() * interval '1095 days') AS created
    FROM generate_series(1, CAST(:devices AS bigint)) AS g
)
INSERT INTO equipment (id, company_id, title, year, make, model, type, state, source, status,
    purchase_price, currency_id, serial_number, description, other_details, specs, documents,
    location_id, home_location_id, status_changed_at, created_at, updated_at)
SELECT gen_random_uuid(), CAST(:company_id AS uuid), 'Device ' || r.g, '2023', 'Make', 'Model', 'Laptop',
    'Used', 'External', s.status, 999.990000, CAST(:currency_id AS uuid), 'SN-' || r.g, '', '[]',
    '{}', '[]',
    CASE WHEN s.status IN ('Unassigned', 'In_Storage') THEN p.place END, p.place,
    r.created, r.created, r.created
FROM rows r
CROSS JOIN LATERAL (SELECT CASE WHEN r.r_status < 0.40 THEN 'Assigned'
         WHEN r.r_status < 0.65 THEN 'Unassigned'
         WHEN r.r_status < 0.85 THEN 'In_Storage' WHEN r.r_status < 0.90 THEN 'Sold'
         ELSE 'Archived' END AS status) s
CROSS JOIN LATERAL (SELECT (CAST(:places AS uuid[]))[(r.g % CAST(:place_count AS int)) + 1] AS place) p
"""


def load_tree(session: Session, company_id: uuid.UUID) -> dict[str, Any]:
    """The tree's rows; answers a site, an office and a room of it, and the places devices go."""
    rows: list[dict[str, Any]] = []

    def add(name: str, kind: str, parent: dict[str, Any] | None) -> dict[str, Any]:
        location_id = uuid.uuid4()
        row = {
            "id": location_id,
            "company_id": company_id,
            "name": name,
            "kind": kind,
            "parent_id": parent["id"] if parent else None,
            "path": (parent["path"] if parent else "/") + path_segment(location_id),
            "depth": parent["depth"] + 1 if parent else 1,
            "sibling": f"{parent['id'].hex if parent else 'root'}:{name.lower()}",
        }
        rows.append(row)
        return row

    rooms, offices, sites = [], [], []
    for site_index in range(SITES):
        site = add(f"Site {site_index}", "Site", None)
        sites.append(site)
        for office_index in range(OFFICES):
            office = add(f"Office {office_index}", "Office", site)
            offices.append(office)
            rooms += [add(f"Room {room_index}", "Room", office) for room_index in range(ROOMS)]
    session.execute(text(LOCATION_SQL), rows)
    return {"site": sites[0], "office": offices[0], "room": rooms[0], "places": rooms + offices}


def measure(
    client: TestClient, path: str, headers: dict[str, str], params: dict[str, Any], runs: int
) -> float:
    for _ in range(3):
        response = client.get(path, params=params, headers=headers)
        assert response.status_code == 200, response.text
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get(path, params=params, headers=headers)
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    return statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    admin_url = os.environ.get("BENCH_POSTGRES_URL", "postgresql://127.0.0.1:5432/postgres")
    with scratch_postgres(admin_url) as url:
        run(url, args.devices, args.runs)


def run(url: str, devices: int, runs: int) -> None:
    engine = make_engine(url)
    try:
        upgrade(engine)
        with Session(engine) as session, session.begin():
            company_id = create_company(session, "Bench").id
            token = issue_token(session, company_id).token
            tree = load_tree(session, company_id)
            currency_id = session.execute(text("SELECT id FROM currencies WHERE code = 'USD'")).scalar_one()
        started = time.perf_counter()
        with engine.begin() as connection:
            places = [str(place["id"]) for place in tree["places"]]
            connection.execute(
                text(EQUIPMENT_SQL),
                {
                    "devices": devices,
                    "company_id": str(company_id),
                    "currency_id": str(currency_id),
                    "places": places,
                    "place_count": len(places),
                },
            )
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("VACUUM ANALYZE equipment"))
            connection.execute(text("VACUUM ANALYZE locations"))
        print(f"loaded {devices:,} devices in {time.perf_counter() - started:.1f} s", flush=True)

        app = create_app(Settings(database_url=url, rate_limit="off"))
        headers = {"Authorization": f"Bearer {token}"}
        equipment = "/api/v2/client/equipment"
        cases: list[tuple[str, str, dict[str, Any]]] = [
            ("unfiltered first page", equipment, {}),
            ("unfiltered first page, cursor mode", equipment, {"limit": 15}),
        ]
        for level in ("site", "office", "room"):
            location_id = str(tree[level]["id"])
            cases += [
                (f"location_id=<{level}>", equipment, {"location_id": location_id}),
                (f"location_id=<{level}>, cursor mode", equipment, {"location_id": location_id, "limit": 15}),
                (
                    f"location_id=<{level}>&status=In_Storage",
                    equipment,
                    {"location_id": location_id, "status": "In_Storage"},
                ),
            ]
        cases.append(
            (
                "GET /client/locations/<site> (counts beneath)",
                f"/api/v2/client/locations/{tree['site']['id']}",
                {},
            )
        )
        with TestClient(app) as client:
            totals = {
                level: client.get(
                    equipment, params={"location_id": str(tree[level]["id"])}, headers=headers
                ).json()["total"]
                for level in ("site", "office", "room")
            }
            results = [(name, measure(client, path, headers, params, runs)) for name, path, params in cases]
        app.state.engine.dispose()
        print(
            f"\n{devices:,} devices; devices beneath: " + ", ".join(f"{k} {v:,}" for k, v in totals.items())
        )
        print(f"median of {runs} requests, ms (TestClient in-process, 15 per page)")
        for name, value in results:
            print(f"{name:<55}{value:>10.1f}")
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
