"""The migrations build exactly the schema the models describe, on both databases."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from fastapi.testclient import TestClient
from sqlalchemy import JSON, Engine, String, Uuid, column, func, insert, inspect, select, table, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from outfitter import migrations
from outfitter.app import create_app
from outfitter.catalog.reference import sync_reference_data
from outfitter.config import Settings, get_settings
from outfitter.core.sealing import SEALED, unseal
from outfitter.db.base import Money, UTCDateTime
from outfitter.db.schema_version import HEAD_REVISION, at_head
from outfitter.db.session import make_engine
from outfitter.migrations import built_here, head_revisions, is_current, migrating, upgrade
from outfitter.models import (
    ConsoleRole,
    ConsoleUser,
    Country,
    Department,
    Employee,
    Equipment,
    EquipmentHistory,
    FeeSchedule,
    metadata,
)
from outfitter.tenants.tokens import create_company, issue_token
from tests.conftest import postgres_database
from tests.equipment.helpers import add_to_department, make_employee
from tests.factories import all_at_once

# Columns of revision 0003, as its code wrote them.
MONEY = (
    "amount",
    "insurance",
    "gateway_fee",
    "onboarding_fee",
    "device_config_fee",
    "platform_fee",
    "total_amount",
)
FEE_COLUMNS = (
    "insurance_percent",
    "platform_percent",
    "gateway_percent",
    "onboarding_fee_per_device",
    "device_config_fee_per_device",
)


@pytest.mark.one_database
def test_the_cli_knows_the_head_without_alembic(engine: Engine) -> None:
    """db.schema_version answers the CLI's check without importing Alembic: it must name the head
    of the scripts (a new migration updates it), and say yes only to a database at it."""
    assert head_revisions() == {HEAD_REVISION}
    assert at_head(engine)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0020'"))
    try:
        assert not at_head(engine)
    finally:
        with engine.begin() as connection:
            back = text("UPDATE alembic_version SET version_num = :head")
            connection.execute(back, {"head": HEAD_REVISION})


# The trigram indexes are PostgreSQL's only (db.base.trigram_index), which alembic cannot tell on
# SQLite: it skips the expression on both sides there, and compares it on PostgreSQL.
@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based index")
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_migrated_schema_matches_the_models(engine: Engine) -> None:
    with engine.connect() as connection:
        differences = compare_metadata(
            MigrationContext.configure(
                connection,
                opts={"compare_type": True, "include_object": built_here(connection.dialect.name)},
            ),
            metadata,
        )
    assert differences == []


def test_upgrade_is_idempotent_and_current(engine: Engine) -> None:
    upgrade(engine)  # a second run changes nothing and fails on nothing
    assert is_current(engine)


@contextmanager
def _fresh_database(database_url: str, tmp_path: Path) -> Iterator[str]:
    """An empty database of the same kind as the suite's, dropped afterwards."""
    if database_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    with postgres_database() as url:
        yield url


def _migrate(engine: Engine, revision: str, *, down: bool = False) -> None:
    with migrating(engine) as config:
        (command.downgrade if down else command.upgrade)(config, revision)


@contextmanager
def _database_at(database_url: str, tmp_path: Path, revision: str) -> Iterator[tuple[str, Engine]]:
    """A fresh database of the suite's kind, migrated to `revision` only; dropped afterwards."""
    with _fresh_database(database_url, tmp_path) as url:
        old = make_engine(url)
        try:
            _migrate(old, revision)
            yield url, old
        finally:
            old.dispose()


@contextmanager
def _client_of(url: str, token: str) -> Iterator[Callable[[str], Any]]:
    """GET through the app on the database at `url`, as the holder of `token`: answers `data`."""
    application = create_app(Settings(database_url=url, rate_limit="off", public_url="http://testserver"))
    with TestClient(application) as client:
        yield lambda path: client.get(f"/api/v2{path}", headers={"Authorization": f"Bearer {token}"}).json()[
            "data"
        ]
    application.state.engine.dispose()


def test_0005_gives_existing_orders_a_kind_a_status_and_a_first_stage(
    database_url: str, tmp_path: Path
) -> None:
    """An order written by the code of revision 0003 reads back through the API after the upgrade:
    in_progress, its kind from its transaction's, each item at order_placed since the order's time."""
    with _database_at(database_url, tmp_path, "0003") as (url, old):
        with Session(old) as session, session.begin():
            sync_reference_data(session)
            company_id = create_company(session, "Old Co").id
            token = issue_token(session, company_id).token
            country_id = session.scalars(select(Country.id).where(Country.code == "NG")).one()
        created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
        ids = {name: uuid.uuid4() for name in ("transaction", "order", "item")}
        money, when, key = Money(24, 6), UTCDateTime(), Uuid()
        transactions = table(
            "transactions",
            *(column(name, key) for name in ("id", "company_id", "country_id")),
            *(
                column(name, String())
                for name in ("tx_ref", "kind", "payment_method", "status", "currency_code")
            ),
            *(column(name, money) for name in MONEY),
            *(column(name, when) for name in ("created_at", "updated_at", "expires_at")),
        )
        orders = table(
            "orders",
            *(column(name, key) for name in ("id", "company_id", "transaction_id", "country_id")),
            *(column(name, String()) for name in ("tx_ref", "status", "payment_method", "currency_code")),
            column("total_amount", money),
            *(column(name, when) for name in ("created_at", "updated_at")),
        )
        items = table(
            "order_items",
            *(column(name, key) for name in ("id", "company_id", "order_id")),
            column("employee_name", String()),
            column("price", money),
        )
        fees = table(
            "fee_schedules",
            column("id", key),
            column("currency_code", String()),
            *(column(name, money) for name in FEE_COLUMNS),
            *(column(name, when) for name in ("created_at", "updated_at")),
        )
        common = {"company_id": company_id, "created_at": created, "updated_at": created}
        with old.begin() as connection:
            connection.execute(
                transactions.insert().values(
                    id=ids["transaction"],
                    country_id=country_id,
                    tx_ref="OTF-OLD",
                    kind="catalog",
                    payment_method="Credit",
                    status="Fulfilled",
                    currency_code="NGN",
                    expires_at=created,
                    **dict.fromkeys(MONEY, Decimal("100")),
                    **common,
                )
            )
            connection.execute(
                orders.insert().values(
                    id=ids["order"],
                    transaction_id=ids["transaction"],
                    country_id=country_id,
                    tx_ref="OTF-OLD",
                    status="Completed",
                    payment_method="Credit",
                    currency_code="NGN",
                    total_amount=Decimal("700"),
                    **common,
                )
            )
            connection.execute(
                items.insert().values(
                    id=ids["item"],
                    company_id=company_id,
                    order_id=ids["order"],
                    employee_name="Old Hand",
                    price=1,
                )
            )
            connection.execute(
                fees.insert().values(
                    id=uuid.uuid4(),
                    currency_code="USD",
                    created_at=created,
                    updated_at=created,
                    **dict.fromkeys(FEE_COLUMNS, Decimal("9")),
                )
            )
        upgrade(old)
        assert is_current(old)
        with Session(old) as session:
            usd = session.scalars(select(FeeSchedule).where(FeeSchedule.currency_code == "USD")).one()
            assert usd.onboarding_fee_per_device == Decimal("9")  # the operator's value stays
            assert (usd.retrieval_fee_per_device, usd.storage_fee_per_device) == (
                Decimal("40"),
                Decimal("30"),
            )

        with _client_of(url, token) as get:
            order = get(f"/client/orders/{ids['order']}")
            listed = get("/client/transactions")["data"]
        assert (order["kind"], order["status"]) == ("purchase", "in_progress")
        assert order["items"][0]["stage"] == "order_placed"
        assert order["items"][0]["stages"] == [
            {"stage": "order_placed", "at": "2026-01-02T03:04:05.000000Z", "note": None}
        ]
        assert listed[0]["kind"] == "catalog" and listed[0]["retrieval_fee"] == "0.00"


EVENT_COUNT_TRIGGERS = {"events_count_inserted", "events_count_deleted", "events_count_truncated"}


def _event_count_triggers(engine: Engine) -> set[str]:
    """PostgreSQL's triggers on `events`, which compare_metadata does not see (migration 0010)."""
    with engine.connect() as connection:
        rows = connection.execute(
            text("SELECT tgname FROM pg_trigger WHERE tgrelid = 'events'::regclass AND NOT tgisinternal")
        )
        return {name for (name,) in rows}


def test_the_migrated_postgresql_schema_has_the_event_count_triggers(
    engine: Engine, is_postgres: bool
) -> None:
    if is_postgres:
        assert _event_count_triggers(engine) == EVENT_COUNT_TRIGGERS


def test_0010_counts_the_existing_events_and_downgrades(database_url: str, tmp_path: Path) -> None:
    """Events written before 0010 are counted by it: the log's total through the API is exact."""
    with _database_at(database_url, tmp_path, "0009") as (url, old):
        with Session(old) as session, session.begin():
            companies = [create_company(session, name).id for name in ("Old Co", "Other Co")]
            token = issue_token(session, companies[0]).token
        events = table(
            "events",
            *(column(name, Uuid()) for name in ("id", "company_id", "subject_id")),
            *(column(name, String()) for name in ("type", "subject_type", "actor")),
            column("created_at", UTCDateTime()),
            column("data", JSON()),
        )
        created = datetime(2026, 1, 2, tzinfo=UTC)
        with old.begin() as connection:
            for company, count in zip(companies, (3, 2), strict=True):
                connection.execute(
                    events.insert(),
                    [
                        {
                            "id": uuid.uuid4(),
                            "company_id": company,
                            "subject_id": uuid.uuid4(),
                            "type": "employee.created",
                            "subject_type": "employee",
                            "actor": "Old Co API",
                            "created_at": created,
                            "data": {},
                        }
                        for _ in range(count)
                    ],
                )
        upgrade(old)
        with _client_of(url, token) as get:
            page = get("/client/events?per_page=2")
        assert (page["total"], page["last_page"], len(page["data"])) == (3, 2, 2)
        postgresql = old.dialect.name == "postgresql"
        if postgresql:
            with old.connect() as connection:
                counts = dict(connection.execute(text("SELECT company_id, events FROM event_counts")).all())
            assert counts == {companies[0]: 3, companies[1]: 2}
            assert _event_count_triggers(old) == EVENT_COUNT_TRIGGERS
        _migrate(old, "0009", down=True)
        if postgresql:
            assert _event_count_triggers(old) == set()
        upgrade(old)
        assert is_current(old)


def _index_definitions(engine: Engine, table_name: str) -> dict[str, str]:
    """Each index of `table_name` by name, with the database's own text of it (compare_metadata
    does not compare a partial index's WHERE)."""
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            query = "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = :table"
        else:
            query = "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = :table"
        rows = connection.execute(text(query), {"table": table_name})
        return {name: definition or "" for name, definition in rows}


def test_0011_leaves_the_write_path_fewer_index_entries_and_downgrades(
    database_url: str, tmp_path: Path
) -> None:
    """0011 drops the single-column indexes on company_id and created_at that the composite ones
    cover, keeps only set values in the equipment's assignee and order indexes, and undoes both."""
    single = {"ix_equipment_company_id", "ix_equipment_created_at"}
    set_only = ("ix_equipment_assignee_id", "ix_equipment_asset_order_id")
    with _database_at(database_url, tmp_path, "0010") as (_url, old):
        before = _index_definitions(old, "equipment")
        assert single <= set(before)
        assert not any("IS NOT NULL" in before[name] for name in set_only)
        upgrade(old)
        after = _index_definitions(old, "equipment")
        assert not single & set(after)
        assert {"ix_equipment_company_created", "ix_equipment_company_updated"} <= set(after)
        for name, column in zip(set_only, ("assignee_id", "asset_order_id"), strict=True):
            unbracketed = after[name].replace("(", "").replace(")", "")  # PostgreSQL brackets the WHERE
            assert unbracketed.endswith(f"WHERE {column} IS NOT NULL"), after[name]
        assert "ix_events_company_id" not in _index_definitions(old, "events")
        _migrate(old, "0010", down=True)
        assert _index_definitions(old, "equipment") == before
        assert "ix_events_company_id" in _index_definitions(old, "events")
        upgrade(old)
        assert is_current(old)


TRIGRAM_INDEXES = {
    "equipment": ("title", "serial_number"),
    "employees": ("first_name", "last_name", "email"),
}


def test_0012_makes_the_trigram_indexes_of_the_lower_cased_columns_and_downgrades(
    database_url: str, tmp_path: Path
) -> None:
    """0012 builds the trigram indexes of `lower(column)` on PostgreSQL (SQLite had plain ones,
    which it drops), so that `column = value` is left to the unique btree; and undoes it."""
    with _database_at(database_url, tmp_path, "0011") as (_url, old):
        before = {table: _index_definitions(old, table) for table in TRIGRAM_INDEXES}
        upgrade(old)
        postgresql = old.dialect.name == "postgresql"
        for table, columns in TRIGRAM_INDEXES.items():
            after = _index_definitions(old, table)
            for column in columns:
                name = f"ix_{table}_{column}_trgm"
                if postgresql:
                    assert f"gin (lower(({column})::text) gin_trgm_ops)" in after[name], after[name]
                else:
                    assert name not in after
        _migrate(old, "0011", down=True)
        assert {table: _index_definitions(old, table) for table in TRIGRAM_INDEXES} == before
        upgrade(old)
        assert is_current(old)


ANALYZED_BY_ROWS = ("equipment", "employees", "departments", "orders", "transactions", "events")


def _table_options(engine: Engine) -> dict[str, list[str]]:
    with engine.connect() as connection:
        rows = connection.execute(
            text("SELECT relname, reloptions FROM pg_class WHERE relname = ANY(:tables) AND relkind = 'r'"),
            {"tables": list(ANALYZED_BY_ROWS)},
        )
        return {name: sorted(options or []) for name, options in rows}


def test_0013_has_the_company_tables_analyzed_every_5000_rows_and_downgrades(
    database_url: str, tmp_path: Path
) -> None:
    """A company that grows by tens of thousands of rows in a large table is in the statistics
    within an autovacuum round, not once a tenth of the table has changed (PostgreSQL only)."""
    if not database_url.startswith("postgresql"):
        pytest.skip("per-table autovacuum settings: PostgreSQL only")
    with _database_at(database_url, tmp_path, "0012") as (_url, old):
        assert _table_options(old) == {table: [] for table in ANALYZED_BY_ROWS}
        upgrade(old)
        every_5000 = ["autovacuum_analyze_scale_factor=0", "autovacuum_analyze_threshold=5000"]
        assert _table_options(old) == {table: every_5000 for table in ANALYZED_BY_ROWS}
        _migrate(old, "0012", down=True)
        assert _table_options(old) == {table: [] for table in ANALYZED_BY_ROWS}
        upgrade(old)
        assert is_current(old)


def _delivery_indexes(engine: Engine) -> set[str]:
    with engine.connect() as connection:
        names = connection.scalars(
            text("SELECT indexname FROM pg_indexes WHERE tablename = :table"), {"table": "webhook_deliveries"}
        )
        return set(names)


def test_0014_indexes_the_pending_deliveries_by_endpoint_and_downgrades(
    database_url: str, tmp_path: Path
) -> None:
    """PostgreSQL's claim takes each endpoint's due deliveries in turn from a partial index of the
    pending ones; the index of (status, next_attempt_at), which its planner chose instead, goes."""
    if not database_url.startswith("postgresql"):
        pytest.skip("the claim by endpoint is PostgreSQL's: SQLite keeps its index")
    by_endpoint, by_status = "ix_webhook_deliveries_pending_endpoint_due", "ix_webhook_deliveries_status_due"
    with _database_at(database_url, tmp_path, "0013") as (_url, old):
        assert by_status in _delivery_indexes(old) and by_endpoint not in _delivery_indexes(old)
        upgrade(old)
        assert by_endpoint in _delivery_indexes(old) and by_status not in _delivery_indexes(old)
        _migrate(old, "0013", down=True)
        assert by_status in _delivery_indexes(old) and by_endpoint not in _delivery_indexes(old)
        upgrade(old)
        assert is_current(old)


def _employee_indexes(engine: Engine) -> set[str]:
    sql = (
        "SELECT indexname FROM pg_indexes WHERE tablename = 'employees'"
        if engine.dialect.name == "postgresql"
        else "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'employees'"
    )
    with engine.connect() as connection:
        return set(connection.scalars(text(sql)))


def old_row(session: Session, model: Any, **values: Any) -> uuid.UUID:
    """A row of `model`'s table as the code of an older revision wrote it: only the columns given
    (the model's later ones, such as custom_fields of 0023, do not exist yet)."""
    now = datetime.now(UTC)
    values = {"id": uuid.uuid4(), "created_at": now, "updated_at": now, **values}
    columns = model.__table__.c
    written = table(model.__tablename__, *(column(name, columns[name].type) for name in values))
    session.execute(insert(written).values(**values))
    row_id: uuid.UUID = values["id"]
    return row_id


def old_employee(session: Session, **values: Any) -> uuid.UUID:
    return old_row(session, Employee, **values)


def test_0015_makes_one_scim_identity_per_employee_refusing_twins_and_downgrades(
    database_url: str, tmp_path: Path
) -> None:
    """An employee made through the REST API whose email is another's userName (which 0014 let in)
    stops the upgrade, naming it; once renamed, the index comes, and goes on a downgrade."""
    identity = "uq_employees_company_scim_identity"
    with _database_at(database_url, tmp_path, "0014") as (_url, old):
        with Session(old) as session, session.begin():
            company = create_company(session, "Acme Ltd").id
            country = Country(name="Nigeria", code="NG", currency_code="NGN")
            session.add(country)
            session.flush()
            for email, user_name in (("gina.w@acme.com", "gina@acme.com"), ("gina@acme.com", None)):
                old_employee(
                    session,
                    company_id=company,
                    first_name="Gina",
                    last_name="W",
                    email=email,
                    user_name=user_name,
                    phone="+2348012345678",
                    address="1 Road",
                    country_id=country.id,
                )
        with pytest.raises(
            RuntimeError, match=r"held by two employees of a company.*: gina@acme\.com\. Change"
        ):
            upgrade(old)
        assert identity not in _employee_indexes(old)
        with old.begin() as connection:
            connection.execute(
                text("UPDATE employees SET email = 'gina.twin@acme.com' WHERE email = 'gina@acme.com'")
            )
        upgrade(old)
        assert identity in _employee_indexes(old)
        _migrate(old, "0014", down=True)
        assert identity not in _employee_indexes(old)
        upgrade(old)
        assert is_current(old)


REFERRING = {  # rows that refer to the employee, each read as it was written
    "equipment": "SELECT assignee_id FROM equipment",
    "equipment_history": "SELECT assignee_id FROM equipment_history",
    "departments": "SELECT head_id FROM departments",
    "user_departments": "SELECT user_id FROM user_departments",
}


def _referring(engine: Engine) -> dict[str, list[str | None]]:
    with engine.connect() as connection:
        return {
            name: [value and str(uuid.UUID(str(value))) for value in connection.scalars(text(sql))]
            for name, sql in REFERRING.items()
        }


def test_a_downgrade_and_an_upgrade_keep_the_rows_referring_to_the_tables_they_copy(
    database_url: str, tmp_path: Path
) -> None:
    """On SQLite, 0008's downgrade copies `employees` (and `departments`) to drop columns: with the
    foreign keys on, dropping the old copy set every device's assignee to NULL and deleted the
    memberships. `migrating` turns them off for the migration and checks them before it commits."""
    with _database_at(database_url, tmp_path, "head") as (url, old):
        upgrade(old)  # the countries
        with Session(old, expire_on_commit=False) as session:
            company = create_company(session, "Acme Ltd").id
            employee = make_employee(session, company)  # commits
            add_to_department(session, employee, "Design")
            session.execute(update(Department).values(head_id=employee.id))
            device = Equipment(
                company_id=company,
                title="ThinkPad X1",
                type="Laptop",
                source="External",
                status="Assigned",
                assignee_id=employee.id,
                status_changed_at=datetime.now(UTC),
            )
            session.add(device)
            session.flush()
            session.add(
                EquipmentHistory(
                    company_id=company,
                    equipment_id=device.id,
                    event_type="assigned",
                    seq=1,
                    assignee_id=employee.id,
                )
            )
            session.commit()
            written = str(employee.id)
        expected = {name: [written] for name in REFERRING}
        assert _referring(old) == expected
        _migrate(old, "0005", down=True)
        assert _referring(old) == expected
        upgrade(old)
        assert _referring(old) == expected
        assert is_current(old)
        if old.dialect.name == "sqlite":  # the connection the migrations ran on checks the keys again
            single = make_engine(url, pool_size=1, max_overflow=0)
            try:
                upgrade(single)
                with single.connect() as connection:
                    assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
                    with pytest.raises(IntegrityError):
                        connection.execute(
                            text("UPDATE equipment SET assignee_id = :no"), {"no": uuid.uuid4().hex}
                        )
            finally:
                single.dispose()


def test_an_upgrade_cut_short_while_it_seeds_leaves_the_database_as_it_was(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The countries, currencies and fees were loaded in a transaction of their own, after the
    schema's: an upgrade cut short between the two (a lost connection, a killed process) left the
    schema at the newest revision with no reference data, which every check took for ready."""

    def connection_lost(_session: Session) -> None:
        raise ConnectionError("the connection was lost")

    with _fresh_database(database_url, tmp_path) as url:
        engine = make_engine(url)
        try:
            monkeypatch.setattr(migrations, "ensure_default_fee_schedules", connection_lost)
            with pytest.raises(ConnectionError):
                upgrade(engine)
            assert not is_current(engine)
            with engine.connect() as connection:
                assert MigrationContext.configure(connection).get_current_heads() == ()
                assert not inspect(connection).has_table(Country.__tablename__)
            monkeypatch.undo()
            assert upgrade(engine) == frozenset()  # the next run starts from the empty database
            with Session(engine) as session:
                assert session.scalar(select(func.count()).select_from(Country)) > 200
                assert session.scalar(select(func.count()).select_from(FeeSchedule)) > 0
        finally:
            engine.dispose()


def test_a_sqlite_migration_that_leaves_a_row_referring_to_nothing_is_undone(tmp_path: Path) -> None:
    """The keys are off while SQLite migrates, so they are checked before it commits: a row that
    refers to nothing (here one written while they were off) refuses the migration, which keeps
    nothing of it."""
    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}", pool_size=1, max_overflow=0)
    try:
        _migrate(engine, "0013")
        with Session(engine) as session, session.begin():
            company = create_company(session, "Acme Ltd").id
        with engine.connect() as connection:
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")  # type: ignore[union-attr]
            connection.execute(
                text(
                    "INSERT INTO user_departments (id, company_id, user_id, department_id, status, "
                    "created_at, updated_at) VALUES (:id, :company, :nobody, :nothing, 'active', :now, :now)"
                ),
                {
                    "id": uuid.uuid4().hex,
                    "company": company.hex,
                    "nobody": uuid.uuid4().hex,
                    "nothing": uuid.uuid4().hex,
                    "now": datetime.now(UTC),
                },
            )
            connection.commit()
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=ON")  # type: ignore[union-attr]
        with pytest.raises(RuntimeError, match="rows referring to nothing"):
            _migrate(engine, "0005", down=True)
        with engine.connect() as connection:
            assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0013"
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        engine.dispose()


def test_upgrades_and_catalog_imports_started_at_once_run_one_after_another(
    postgres_only: None, database_url: str, tmp_path: Path, demo_catalog_path: Path
) -> None:
    """Every host's start script may run `db upgrade` at once, and two operators a catalog import:
    on a fresh PostgreSQL database, three of each started together all succeed (the later ones wait,
    then find the work done), instead of all but one failing on a unique key."""
    from outfitter.catalog.importer import import_catalog, load_catalog_file
    from outfitter.models import Asset, Category

    catalog = load_catalog_file(demo_catalog_path)
    with _fresh_database(database_url, tmp_path) as url:
        engines = [make_engine(url) for _ in range(3)]
        try:
            # each says what it found once its turn came: the first an empty database, the others
            # the schema it left (so `db upgrade` says "up to date" rather than "migrated")
            found = all_at_once([functools.partial(upgrade, engine) for engine in engines])
            assert sorted(found, key=len) == [frozenset(), head_revisions(), head_revisions()]
            assert _all_at_once(engines, lambda engine: _import(engine, catalog, import_catalog)) == []
            assert is_current(engines[0])
            with Session(engines[0]) as session:
                assert session.scalar(select(func.count()).select_from(Asset)) == len(catalog.assets)
                names = list(session.scalars(select(Category.name)))
                assert len(names) == len(set(names))
        finally:
            for engine in engines:
                engine.dispose()


def _all_at_once(engines: list[Engine], work: Callable[[Engine], Any]) -> list[Exception]:
    """`work` on each engine, in a thread each, released together; what each raised."""
    results = all_at_once([functools.partial(work, engine) for engine in engines])
    return [result for result in results if isinstance(result, Exception)]


def _import(engine: Engine, catalog: Any, import_catalog: Callable[..., Any]) -> None:
    with Session(engine) as session, session.begin():
        import_catalog(session, catalog)


def test_0021_gives_employees_without_a_status_the_status_active(database_url: str, tmp_path: Path) -> None:
    """Employees created through the API before every create wrote `Active` read back `Active`;
    one SCIM offboarded keeps `Offboarded`."""
    with _database_at(database_url, tmp_path, "0020") as (url, old):
        with Session(old, expire_on_commit=False) as session, session.begin():
            sync_reference_data(session)
            company_id = create_company(session, "Old Co").id
            token = issue_token(session, company_id).token
        with Session(old, expire_on_commit=False) as session, session.begin():
            nigeria = session.scalars(select(Country.id).where(Country.code == "NG")).one()
            employee = {"company_id": company_id, "last_name": "Obi", "phone": "+2348000000000",
                        "country_id": nigeria, "address": "1 Marina, Lagos"}  # fmt: skip
            created = old_employee(
                session, first_name="Ada", email="ada@example.com", **employee
            )  # no status
            offboarded = old_employee(
                session, first_name="Bola", email="bola@example.com", status="Offboarded", **employee
            )
        upgrade(old)
        with _client_of(url, token) as get:
            assert get(f"/client/employees/{created}")["status"] == "Active"
            assert get(f"/client/employees/{offboarded}")["status"] == "Offboarded"


def test_0022_seals_the_totp_keys_kept_in_clear_and_downgrades(database_url: str, tmp_path: Path) -> None:
    """A TOTP key stored in clear before 0022 is sealed by it (and still opens to the same key);
    the downgrade opens it again."""
    with _database_at(database_url, tmp_path, "0021") as (_url, old):
        with Session(old, expire_on_commit=False) as session, session.begin():
            company_id = create_company(session, "Old Co").id
            session.add(ConsoleUser(company_id=company_id, email="ada@example.com", role=ConsoleRole.ADMIN))
        keys = table("console_users", column("totp_secret"))
        with old.begin() as connection:
            connection.execute(update(keys).values(totp_secret="JBSWY3DPEHPK3PXP"))
        upgrade(old)
        with old.connect() as connection:
            stored = connection.execute(select(keys.c.totp_secret)).scalar_one()
        assert stored.startswith(SEALED) and "JBSWY3DPEHPK3PXP" not in stored
        assert unseal(stored, tuple(get_settings().secret_keys)) == "JBSWY3DPEHPK3PXP"
        _migrate(old, "0021", down=True)
        with old.connect() as connection:
            assert connection.execute(select(keys.c.totp_secret)).scalar_one() == "JBSWY3DPEHPK3PXP"


def test_0023_adds_the_custom_fields_and_downgrades(database_url: str, tmp_path: Path) -> None:
    """The definitions table and the value columns come (with the GIN index on PostgreSQL), and go
    on a downgrade; rows written before keep reading, with no values."""
    with _database_at(database_url, tmp_path, "0023") as (_url, engine):
        columns = {
            table: {c["name"] for c in inspect(engine).get_columns(table)}
            for table in ("equipment", "employees")
        }
        assert all({"custom_fields", "sensitive_fields"} <= names for names in columns.values())
        assert "custom_field_definitions" in inspect(engine).get_table_names()
        indexes = {index["name"] for index in inspect(engine).get_indexes("equipment")}
        assert ("ix_equipment_custom_fields" in indexes) == (engine.dialect.name == "postgresql")
        _migrate(engine, "0022", down=True)
        inspector = inspect(engine)
        assert "custom_field_definitions" not in inspector.get_table_names()
        assert "custom_fields" not in {c["name"] for c in inspector.get_columns("equipment")}
        upgrade(engine)
        assert is_current(engine)


def test_0025_adds_the_operator_tables_and_suspensions_and_downgrades(
    database_url: str, tmp_path: Path
) -> None:
    """The operator console's tables arrive empty beside a company of before; the downgrade drops
    them (and a suspension with them) and leaves the company, which a second upgrade keeps."""
    with _database_at(database_url, tmp_path, "0024") as (_url, old):
        with Session(old, expire_on_commit=False) as session, session.begin():
            company_id = create_company(session, "Old Co").id
        _migrate(old, "0025")
        with old.begin() as connection:
            connection.execute(
                metadata.tables["company_suspensions"].insert(),
                {"company_id": company_id, "suspended_at": datetime.now(UTC), "suspended_by": "operator:olu"},
            )
        tables = set(inspect(old).get_table_names())
        assert {"operator_users", "operator_sessions", "company_suspensions"} <= tables
        _migrate(old, "0024", down=True)
        tables = set(inspect(old).get_table_names())
        assert not {"operator_users", "operator_sessions", "company_suspensions"} & tables
        upgrade(old)
        with old.connect() as connection:
            assert connection.execute(text("SELECT name FROM companies")).scalars().all() == ["Old Co"]
            assert connection.execute(text("SELECT count(*) FROM company_suspensions")).scalar() == 0
