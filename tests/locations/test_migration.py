"""Migration 0024 on a database with devices: they come through with no location, the
new columns and table take rows, and the downgrade removes them, keeping the devices."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import JSON, String, Uuid, column, insert, inspect, table, text
from sqlalchemy.orm import Session

from outfitter.catalog.reference import sync_reference_data
from outfitter.db.base import UTCDateTime
from outfitter.migrations import upgrade
from outfitter.tenants.tokens import create_company, issue_token
from tests.core.test_migrations import _client_of, _database_at, _migrate
from tests.equipment.helpers import make_employee

REVISION = "0024"


def test_0024_adds_locations_to_existing_devices_and_downgrades(database_url: str, tmp_path: Path) -> None:
    with _database_at(database_url, tmp_path, "0023") as (url, old):
        with Session(old, expire_on_commit=False) as session, session.begin():
            sync_reference_data(session)
            company_id = create_company(session, "Old Co").id
            token = issue_token(session, company_id).token
        with Session(old) as session:
            make_employee(session, company_id)  # commits
        # The table as 0023 left it: the model has columns it has not.
        old_equipment = table(
            "equipment",
            *(column(name, Uuid()) for name in ("id", "company_id")),
            *(column(name, String()) for name in ("title", "source", "status", "description")),
            *(column(name, JSON()) for name in ("other_details", "specs", "documents")),
            *(column(name, UTCDateTime()) for name in ("status_changed_at", "created_at", "updated_at")),
        )
        now = datetime(2026, 1, 1, tzinfo=UTC)
        with old.begin() as connection:
            connection.execute(
                insert(old_equipment).values(
                    id=uuid.uuid4(),
                    company_id=company_id,
                    title="Old laptop",
                    source="External",
                    status="Unassigned",
                    description="",
                    other_details=[],
                    specs={},
                    documents=[],
                    status_changed_at=now,
                    created_at=now,
                    updated_at=now,
                )
            )
        upgrade(old)  # through 0024, to the head the app serves
        with _client_of(url, token) as get:
            devices = get("/client/equipment")["data"]
            assert [(d["title"], d["location_id"], d["home_location_id"]) for d in devices] == [
                ("Old laptop", None, None)
            ]
            assert get("/client/locations/tree") == []
        _migrate(old, "0023", down=True)
        inspector = inspect(old)
        assert "locations" not in inspector.get_table_names()
        assert not {"location_id", "home_location_id"} & {
            c["name"] for c in inspector.get_columns("equipment")
        }
        with old.connect() as connection:
            assert connection.execute(text("SELECT title FROM equipment")).scalars().all() == ["Old laptop"]
        _migrate(old, REVISION)  # and up again
