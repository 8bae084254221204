"""Test set-up.

Which database a test runs on. Every test that uses `app`, `client` or `engine` (through the
session-scoped `database_url`) runs on SQLite and on PostgreSQL, unless it says otherwise:
- `@pytest.mark.one_database` (on a test, or `pytestmark` for a module): its behaviour does not
  depend on the storage (routing, the input guard, validation messages, the OpenAPI document, CLI
  parsing, conventions...), so it runs once, on SQLite; `one_database("postgresql")` runs it on
  PostgreSQL instead (the contract and fuzz runs: the stricter storage finds more 500s).
- a test that takes the `postgres_only` fixture runs on PostgreSQL only.
Storage-sensitive tests (tenancy writes, bulk and COPY, migrations, concurrency, sync, search,
money, locking) carry no marker: both databases is the default, so a new test is never proven on
one database by accident.

Isolation. A test starts from the reference data (countries, currencies, the default fee
schedules) and nothing else, but nothing is truncated: before each test that uses the database,
one query asks which tables hold a row, and only those are emptied with DELETE, children first
(`DatabaseState.reset`); the fee schedules are compared with what was seeded and seeded again only
if a test changed them. TRUNCATE of the ~30 tables cost about a second per test on PostgreSQL; a
rolled-back transaction cannot isolate these tests, as the app writes through its own pooled
connections (and reads through asyncpg on PostgreSQL) and the concurrency tests need real commits.
The demo catalog (`demo_catalog`) is loaded once and kept while the tests that ask for it run in a
row, unless one changed it; any other test starts without it.

The app. `app` is built once per database, and its lifespan (the asyncpg pool, the engine's
pool) is entered once (`RunningApp`): each test's `client` is a fresh TestClient (its own cookies
and headers) sending through that running app's event loop. A test may still enter `TestClient(app)`
itself; the running app notices that its pool was replaced and starts again.

PostgreSQL: OUTFITTER_TEST_POSTGRES_URL (default postgresql://127.0.0.1:5432/test) names a server
and a database to connect to; the suite creates its own database there (one per pytest process)
and drops it at the end. Without a reachable server those tests skip with a message, except under
CI=true, where they fail: CI must prove the PostgreSQL behaviour.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, Table, create_engine, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.db.session import make_engine
from outfitter.migrations import upgrade
from outfitter.models import metadata
from outfitter.payments.fees import ensure_default_fee_schedules
from tests.factories import Api, CompanyFactory, load_demo_catalog

POSTGRES_URL = os.environ.get("OUTFITTER_TEST_POSTGRES_URL", "postgresql://127.0.0.1:5432/test")
REFERENCE_TABLES = {"countries", "currencies", "alembic_version"}
SEEDED_TABLE = "fee_schedules"  # its default rows are reference data too, unless a test changed them
CATALOG_TABLES = {"categories", "asset_models", "assets", "asset_specifications", "asset_pricing"}
DATABASES = ("sqlite", "postgresql")
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "one_database(name='sqlite'): behaviour that does not depend on the database; runs on one "
        "(tests/conftest.py)",
    )
    config.addinivalue_line(
        "markers",
        "runs_long: takes tens of seconds; runs first among its database's tests (tests/conftest.py)",
    )


def databases_for(item: pytest.Function | pytest.Metafunc) -> tuple[str, ...]:
    """The databases a test runs on: see the module's docstring."""
    fixtures = item.fixturenames
    definition = item.definition if isinstance(item, pytest.Metafunc) else item
    if "postgres_only" in fixtures:
        return ("postgresql",)
    marker = definition.get_closest_marker("one_database")
    if marker is None:
        return DATABASES
    name = marker.args[0] if marker.args else marker.kwargs.get("name", "sqlite")
    assert name in DATABASES, f"one_database takes one of {DATABASES}, not {name!r}"
    return (name,)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "database_url" in metafunc.fixturenames:
        metafunc.parametrize("database_url", databases_for(metafunc), indirect=True, scope="session")


def _runs_long(item: pytest.Item) -> bool:
    """Marked `runs_long`, or a browser journey (a test_browser*.py module: Playwright, a server)."""
    return item.get_closest_marker("runs_long") is not None or item.path.name.startswith("test_browser")


def _database_of(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("database_url") if callspec is not None else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long tests first within each database's run of tests (pytest has grouped the tests by
    database, so that each database and app is set up once). `make test` splits the list in two,
    one half for each xdist worker, and a worker that is done takes tests from the end of the
    other's list: with the long ones at the start, what is left at the end is short, and neither
    worker waits long for the other. The order of the rest, and of the long ones among themselves,
    is kept (a module's tests stay together)."""
    runs: list[tuple[str | None, list[pytest.Item]]] = []
    for item in items:
        database = _database_of(item)
        if runs and database in (None, runs[-1][0]):
            runs[-1][1].append(item)
        elif runs and runs[-1][0] is None:
            runs[-1] = (database, [*runs[-1][1], item])
        else:
            runs.append((database, [item]))
    items[:] = [item for _, run in runs for item in sorted(run, key=lambda item: not _runs_long(item))]


def _psycopg_url(url: str) -> str:
    return Settings(database_url=url).database_url


def _create_postgres_database() -> tuple[str, Engine] | None:
    admin_url = _psycopg_url(POSTGRES_URL)
    name = f"outfitter_test_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    try:
        admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # the server is down or refuses us
        message = f"PostgreSQL at {POSTGRES_URL} is not reachable ({type(exc).__name__}: {exc})"
        if IN_CI:
            pytest.fail(f"{message}; CI must run the PostgreSQL tests", pytrace=False)
        pytest.skip(f"{message}; set OUTFITTER_TEST_POSTGRES_URL to run the PostgreSQL tests")
    return str(make_url(admin_url).set(database=name).render_as_string(hide_password=False)), admin


@contextmanager
def postgres_database() -> Iterator[str]:
    """The URL of a database of its own on the suite's PostgreSQL server, dropped afterwards."""
    created = _create_postgres_database()
    assert created is not None
    url, admin = created
    try:
        yield url
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Parametrized by `pytest_generate_tests` (sqlite, postgresql, or one of them)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('db') / 'outfitter.db'}"
        return
    with postgres_database() as url:
        yield url


@pytest.fixture(scope="session")
def engine(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url)
    upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def settings(database_url: str) -> Settings:
    return Settings(
        database_url=database_url, rate_limit="off", scim_rate_limit="off", public_url="http://testserver"
    )


class RunningApp:
    """The app with its lifespan entered once (its asyncpg pool and engine pool kept between
    tests), in an event loop of its own that every test's `client` sends through."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._runner: TestClient | None = None

    def portal(self) -> BlockingPortal:
        if self._runner is None or not self._serving(self._runner):
            self.stop()
            self._runner = TestClient(self.app, base_url="http://testserver")
            self._runner.__enter__()
        assert self._runner.portal is not None
        return self._runner.portal

    def _serving(self, runner: TestClient) -> bool:
        """False once a test's own `with TestClient(app)` ran a second lifespan, which replaced the
        asyncpg pool and closed it on the way out."""
        reads = self.app.state.reads
        if reads is None:
            return True

        async def serves() -> bool:
            return bool(reads.serves_this_loop())

        assert runner.portal is not None
        return runner.portal.call(serves)

    def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            runner.__exit__(None, None, None)


@pytest.fixture(scope="session")
def app(settings: Settings, engine: Engine) -> Iterator[FastAPI]:
    application = create_app(settings)
    yield application
    application.state.engine.dispose()


@pytest.fixture(scope="session")
def running_app(app: FastAPI) -> Iterator[RunningApp]:
    running = RunningApp(app)
    yield running
    running.stop()


class DatabaseState:
    """Brings a database back to its reference data, touching only the tables a test wrote."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        tables = [table for table in metadata.sorted_tables if table.name not in REFERENCE_TABLES]
        self.children_first: list[Table] = list(reversed(tables))
        self.seeded = metadata.tables[SEEDED_TABLE]
        probed = [table for table in tables if table.name != SEEDED_TABLE]
        # One round trip: which tables hold a row (an EXISTS stops at the first).
        self.probe = text("SELECT " + ", ".join(f'EXISTS (SELECT 1 FROM "{table.name}")' for table in probed))
        self.probed = [table.name for table in probed]
        catalog = [metadata.tables[name] for name in sorted(CATALOG_TABLES)]
        self.catalog_fingerprint = select(
            *(
                item
                for table in catalog
                for item in (
                    select(func.count()).select_from(table).scalar_subquery(),
                    select(func.max(table.c.updated_at)).scalar_subquery(),
                )
            )
        )
        self.seeded_rows: list[Any] = []
        self.catalog: tuple[Any, ...] | None = None  # the fingerprint of the demo catalog, loaded
        self.reset(with_catalog=False)

    def _read(self, statement: Any) -> list[Any]:
        with self.engine.connect() as connection:
            return list(connection.execute(statement))

    def _written(self) -> set[str]:
        [row] = self._read(self.probe)
        return {name for name, filled in zip(self.probed, row, strict=True) if filled}

    def _seeded_now(self) -> list[Any]:
        return self._read(select(self.seeded).order_by(self.seeded.c.currency_code))

    def reset(self, with_catalog: bool) -> None:
        written = self._written()
        keep_catalog = (
            with_catalog
            and self.catalog is not None
            and tuple(self._read(self.catalog_fingerprint)[0]) == self.catalog
        )
        if keep_catalog:
            written -= CATALOG_TABLES
        reseed = self._seeded_now() != self.seeded_rows
        # A DELETE may write elsewhere (the event count triggers on PostgreSQL): look again.
        for _ in range(3):
            if not written and not reseed:
                break
            with self.engine.begin() as connection:
                for table in self.children_first:
                    if table.name in written or (reseed and table is self.seeded):
                        connection.execute(table.delete())
            if reseed:
                with Session(self.engine) as session, session.begin():
                    ensure_default_fee_schedules(session)
                self.seeded_rows, reseed = self._seeded_now(), False
            written = self._written() - (CATALOG_TABLES if keep_catalog else set())
        assert not written, f"tables still hold rows after the reset: {sorted(written)}"
        if not keep_catalog:
            self.catalog = None
        if with_catalog and not keep_catalog:
            load_demo_catalog(self.engine)
            self.catalog = tuple(self._read(self.catalog_fingerprint)[0])


@pytest.fixture(scope="session")
def database_state(engine: Engine) -> DatabaseState:
    return DatabaseState(engine)


@pytest.fixture(autouse=True)
def _clean_database(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test that uses the database starts from reference data only (and the demo catalog
    when it asks for `demo_catalog`)."""
    if "engine" in request.fixturenames:
        state: DatabaseState = request.getfixturevalue("database_state")
        state.reset(with_catalog="demo_catalog" in request.fixturenames)
    yield


@pytest.fixture
def demo_catalog(engine: Engine, _clean_database: None) -> None:
    """The demo catalog (src/outfitter/demo/catalog.json) in the database: loaded by the reset."""


@pytest.fixture
def is_postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


@pytest.fixture
def postgres_only(engine: Engine) -> None:
    """Runs the test on PostgreSQL only (`databases_for`); the skip is for a direct request."""
    if engine.dialect.name != "postgresql":
        pytest.skip("proves locking under real concurrency: PostgreSQL only")


@pytest.fixture
def client(app: FastAPI, running_app: RunningApp) -> Iterator[TestClient]:
    """A TestClient of its own (cookies, headers) sending through the running app."""
    test_client = TestClient(app, base_url="http://testserver")
    test_client.portal = running_app.portal()
    yield test_client
    test_client.close()


@pytest.fixture
def db(engine: Engine) -> Iterator[Session]:
    """A session for arranging data and for reading what the API wrote."""
    with Session(engine, expire_on_commit=False) as session:
        yield session


@pytest.fixture
def companies(engine: Engine, client: TestClient) -> CompanyFactory:
    return CompanyFactory(engine, client)


@pytest.fixture
def api(companies: CompanyFactory) -> Api:
    """A client of a fresh company, with a read-write token."""
    return companies.create("Acme Ltd")


@pytest.fixture
def other_api(companies: CompanyFactory) -> Api:
    """A client of a second company: it must never see the first one's records."""
    return companies.create("Globex Corp")


@pytest.fixture(scope="session")
def demo_catalog_path() -> Path:
    return Path(__file__).parents[1] / "src" / "outfitter" / "demo" / "catalog.json"
