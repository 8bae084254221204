"""Test set-up: every test that uses `app`, `client` or `engine` runs on SQLite and on PostgreSQL.

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

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.db.session import make_engine
from outfitter.migrations import upgrade
from outfitter.models import metadata
from outfitter.payments.fees import ensure_default_fee_schedules
from tests.factories import Api, CompanyFactory

POSTGRES_URL = os.environ.get("OUTFITTER_TEST_POSTGRES_URL", "postgresql://127.0.0.1:5432/test")
REFERENCE_TABLES = {"countries", "currencies", "alembic_version"}
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


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


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
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


@pytest.fixture(scope="session")
def app(settings: Settings, engine: Engine) -> Iterator[FastAPI]:
    application = create_app(settings)
    yield application
    application.state.engine.dispose()


def _empty_tables(engine: Engine) -> None:
    tables = [table for table in reversed(metadata.sorted_tables) if table.name not in REFERENCE_TABLES]
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            names = ", ".join(f'"{table.name}"' for table in tables)
            connection.execute(text(f"TRUNCATE {names} CASCADE"))
        else:
            for table in tables:
                connection.execute(table.delete())
    with Session(engine) as session, session.begin():
        ensure_default_fee_schedules(session)


@pytest.fixture(autouse=True)
def _clean_database(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test that uses the database starts from reference data only."""
    if "engine" in request.fixturenames:
        _empty_tables(request.getfixturevalue("engine"))
    yield


@pytest.fixture
def is_postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


@pytest.fixture
def postgres_only(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("proves locking under real concurrency: PostgreSQL only")


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, base_url="http://testserver") as test_client:
        yield test_client


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
