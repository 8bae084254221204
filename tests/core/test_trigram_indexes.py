"""The trigram indexes serve the case-insensitive searches and nothing else (db.base.trigram_index):
an equality on the column itself is the unique btree's, whatever PostgreSQL's statistics say.

Each test loads a company's rows set-based and analyzes the table without vacuuming it, the state
in which PostgreSQL priced a trigram index of the column below the unique btree (autovacuum
analyzes new rows long before it vacuums them)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, select, text
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.db.session import make_engine
from outfitter.equipment.filters import EquipmentFilters, conditions
from outfitter.migrations import upgrade
from outfitter.models import Equipment
from outfitter.people.repository import EmployeeRepository
from tests.conftest import postgres_database
from tests.factories import Api, CompanyFactory, assert_error

DEVICES = 30_000
EMPLOYEES = 20_000


@pytest.fixture
def grown(is_postgres: bool) -> Iterator[tuple[Api, Engine]]:
    """A client of a company in a database of its own, and the app's engine, with autovacuum held
    off the two tables. Of its own: the statistics these tests leave (one company holding every
    row) would mislead the plans of the suite's later tests, and TRUNCATE does not clear them."""
    if not is_postgres:
        pytest.skip("PostgreSQL's planner and its trigram indexes: PostgreSQL only")
    with postgres_database() as url:
        migrated = make_engine(url)
        upgrade(migrated)
        with migrated.begin() as connection:
            for table in ("equipment", "employees"):
                connection.exec_driver_sql(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        app = create_app(Settings(database_url=url, rate_limit="off", public_url="http://testserver"))
        try:
            with TestClient(app, base_url="http://testserver") as client:
                yield CompanyFactory(migrated, client).create("Grown Ltd"), app.state.engine
        finally:
            app.state.engine.dispose()
            migrated.dispose()


def _loaded(engine: Engine, statement: str, company_id: uuid.UUID, table: str) -> None:
    with engine.begin() as connection:
        connection.execute(text(statement), {"company": company_id})
    with engine.begin() as connection:  # committed: an ANALYZE rolled back keeps no statistics
        connection.exec_driver_sql(f"ANALYZE {table}")


def _load_devices(engine: Engine, company_id: uuid.UUID) -> None:
    """DEVICES devices with serial numbers shaped like a client's (`1a2b3c4d-17`)."""
    _loaded(
        engine,
        f"""
        INSERT INTO equipment (id, company_id, title, type, source, status, serial_number,
            description, other_details, specs, documents, status_changed_at, created_at, updated_at)
        SELECT gen_random_uuid(), :company, 'Loaded device ' || n, 'Laptop', 'External', 'Unassigned',
            substr(md5((n / 1000)::text), 1, 8) || '-' || (n % 1000), '', '[]', '{{}}', '[]',
            now(), now(), now()
        FROM generate_series(1, {DEVICES}) AS n
        """,
        company_id,
        "equipment",
    )


def _plan(engine: Engine, statement: str, parameters: Any) -> str:
    with engine.connect() as connection:
        return "\n".join(row[0] for row in connection.exec_driver_sql(f"EXPLAIN {statement}", parameters))


@contextmanager
def _statements(engine: Engine, marker: str) -> Iterator[list[tuple[str, Any]]]:
    """The statements the engine runs meanwhile whose text holds `marker`, with their parameters."""
    caught: list[tuple[str, Any]] = []

    def listen(_connection: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if marker in statement:
            caught.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", listen)
    try:
        yield caught
    finally:
        event.remove(engine, "before_cursor_execute", listen)


def test_a_batchs_serial_numbers_are_looked_up_in_the_unique_index(grown: tuple[Api, Engine]) -> None:
    """With an index of `serial_number` itself, the check of a batch's serial numbers looked each
    up in the trigram index, reading its pending list every time: 4 s for 1,000."""
    api, engine_of_app = grown
    _load_devices(engine_of_app, api.company_id)
    with engine_of_app.connect() as connection:
        taken, holder, status = connection.execute(
            text("SELECT serial_number, id, status FROM equipment LIMIT 1")
        ).one()
    items: list[dict[str, Any]] = [{"title": "New", "serial_number": f"NEW-{n}"} for n in range(1000)]
    items[500]["serial_number"] = taken
    with _statements(engine_of_app, "JOIN unnest") as checks:
        body = assert_error(api.post("/client/equipment/bulk", {"equipment": items}), 422)
    message = (
        f"Equipment with serial number {taken!r} already exists in this company: device {holder} ({status})."
    )
    assert body["errors"] == {"equipment.500.serial_number": [message]}
    [(statement, parameters)] = checks
    plan = _plan(engine_of_app, statement, parameters)
    assert "uq_equipment_company_id_serial_number" in plan and "trgm" not in plan, plan


def test_the_equipment_search_finds_any_case_through_the_trigram_indexes(grown: tuple[Api, Engine]) -> None:
    api, engine_of_app = grown
    _load_devices(engine_of_app, api.company_id)
    found = api.get("/client/equipment", q="LOADED DEVICE 12345").json()["data"]
    assert [device["title"] for device in found["data"]] == ["Loaded device 12345"]
    by_serial = api.get("/client/equipment", q="-999").json()["data"]
    assert by_serial["total"] == DEVICES // 1000 and all(
        device["serial_number"].endswith("-999") for device in by_serial["data"]
    )
    # the list's own conditions (it reads on the asyncpg pool, which the engine's events do not see)
    filters = EquipmentFilters(search="loaded device 12345")
    own = Equipment.company_id == api.company_id
    statement = select(Equipment.id).where(own, *conditions(filters.shape()))
    compiled = statement.compile(engine_of_app)
    plan = _plan(engine_of_app, str(compiled), compiled.construct_params(filters.parameters()))
    assert "ix_equipment_title_trgm" in plan and "ix_equipment_serial_number_trgm" in plan, plan


def test_the_employee_search_finds_any_case_through_the_trigram_indexes(grown: tuple[Api, Engine]) -> None:
    api, engine_of_app = grown
    _loaded(
        engine_of_app,
        f"""
        INSERT INTO employees (id, company_id, first_name, last_name, email, phone, country_id,
            address, created_at, updated_at)
        SELECT gen_random_uuid(), :company, 'Person' || n, 'Family' || n, 'p' || n || '@acme.io',
            '+254 700 000000', (SELECT id FROM countries WHERE code = 'KE'), '1 Moi Avenue', now(), now()
        FROM generate_series(1, {EMPLOYEES}) AS n
        """,
        api.company_id,
        "employees",
    )
    found = api.get("/client/employees", search="FAMILY12345").json()["data"]
    assert [(person["first_name"], person["email"]) for person in found["data"]] == [
        ("Person12345", "p12345@acme.io")
    ]
    with Session(engine_of_app) as session:
        statement = EmployeeRepository(session).listing(None, None, "FAMILY12345")
    compiled = statement.compile(engine_of_app)
    plan = _plan(engine_of_app, str(compiled), compiled.construct_params())
    assert "ix_employees_last_name_trgm" in plan, plan
