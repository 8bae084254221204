"""Start-up checks of the `outfitter` command, run as an operator meets them (the installed
command, a fresh environment): settings validated first, one `error:` line per bad setting; `serve`
and `worker` refuse a database whose schema is behind, naming it; /readyz says so; the SQLite
default lives in the user's data directory, not in the current one."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.db.base import Base
from outfitter.db.session import make_engine
from outfitter.migrations import upgrade
from tests.conftest import POSTGRES_URL

OUTFITTER = Path(sys.executable).parent / "outfitter"


def clean_env(**settings: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OUTFITTER_")}
    env.update(settings)
    return env


def outfitter(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(OUTFITTER), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def assert_one_error_line(done: subprocess.CompletedProcess[str], expected: str) -> None:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [expected]


# --- item 20: every setting checked at start, one line each -----------------------------------

BAD_SETTINGS = {
    "OUTFITTER_RATE_LIMIT": (
        "lots",
        "expected 'off' or numbers (at least 1) of requests per period, separated by ';', "
        "e.g. 100/second;3000/minute or 120/minute; got 'lots'",
    ),
    "OUTFITTER_SCIM_RATE_LIMIT": (
        "0/second",
        "expected 'off' or numbers (at least 1) of requests per period, separated by ';', "
        "e.g. 100/second;3000/minute or 120/minute; got '0/second'",
    ),
    # Values that would start a service no request gets through.
    "OUTFITTER_MAX_BODY_BYTES": ("0", "expected a number of at least 1024; got '0'"),
    "OUTFITTER_TRANSACTION_TTL_HOURS": ("-1", "expected a number of at least 1; got '-1'"),
    "OUTFITTER_IDEMPOTENCY_TTL_HOURS": ("0", "expected a number of at least 1; got '0'"),
    "OUTFITTER_DB_POOL_SIZE": ("many", "expected a whole number; got 'many'"),
    "OUTFITTER_WORKER_POLL_SECONDS": ("0", "expected a number greater than 0; got '0'"),
    "OUTFITTER_GATEWAY": ("paypal", "expected 'sandbox' or 'flutterwave'; got 'paypal'"),
    "OUTFITTER_EMBEDDED_WORKER": ("maybe", "expected true or false; got 'maybe'"),
    "OUTFITTER_REDIS_URL": ("localhost:6379", "expected a redis://, rediss:// or unix:// URL"),
    "OUTFITTER_PUBLIC_URL": ("example.com", "expected an http:// or https:// URL; got 'example.com'"),
}


@pytest.mark.parametrize("command", [["serve"], ["worker", "--once"], ["db", "upgrade"], ["company", "list"]])
def test_each_bad_setting_is_one_error_line_for_every_command(command: list[str], tmp_path: Path) -> None:
    env = clean_env(
        OUTFITTER_DATABASE_URL=f"sqlite:///{tmp_path / 'x.db'}",
        **{name: value for name, (value, _) in BAD_SETTINGS.items()},
    )
    done = outfitter(env, *command)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert sorted(done.stderr.strip().splitlines()) == sorted(
        f"error: invalid configuration: {name}: {message}" for name, (_, message) in BAD_SETTINGS.items()
    )


def test_a_rate_limit_of_no_requests_is_refused(tmp_path: Path) -> None:
    env = clean_env(OUTFITTER_DATABASE_URL=f"sqlite:///{tmp_path / 'x.db'}", OUTFITTER_RATE_LIMIT="0/minute")
    message = BAD_SETTINGS["OUTFITTER_RATE_LIMIT"][1].replace("'lots'", "'0/minute'")
    assert_one_error_line(
        outfitter(env, "serve", "--port", "1"),
        f"error: invalid configuration: OUTFITTER_RATE_LIMIT: {message}",
    )


def test_a_bad_rate_limit_alone_stops_serve_with_one_line(tmp_path: Path) -> None:
    env = clean_env(OUTFITTER_DATABASE_URL=f"sqlite:///{tmp_path / 'x.db'}", OUTFITTER_RATE_LIMIT="lots")
    assert_one_error_line(
        outfitter(env, "serve", "--port", "1"),
        f"error: invalid configuration: OUTFITTER_RATE_LIMIT: {BAD_SETTINGS['OUTFITTER_RATE_LIMIT'][1]}",
    )


_REDIS_URL_SHAPE = (
    "expected a URL such as redis://host:6379/0: a port from 1 to 65535 if one is given, and a "
    "database number if one is given"
)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis://127.0.0.1:notaport/7", _REDIS_URL_SHAPE),
        ("redis://127.0.0.1:99999/7", _REDIS_URL_SHAPE),
        ("redis://127.0.0.1:6379/notadb", _REDIS_URL_SHAPE),
        ("redis://:s3cret@127.0.0.1:6379/7?foo=s3cret", "the Redis client takes no option 'foo' after '?'"),
        (
            "redis://:s3cret@127.0.0.1:6379/7?socket_timeout=s3cret",
            "the Redis client cannot read the value of 'socket_timeout'",
        ),
    ],
)
def test_a_redis_url_the_client_cannot_read_stops_serve_before_it_listens(
    url: str, problem: str, tmp_path: Path
) -> None:
    """A port that is no port stopped each server process with a traceback once its socket was
    bound (with --workers, restarted for ever while clients hung); an option the client does not
    take made every request a 500; a database that is no number was silently database 0. Now one
    line, before anything listens, for every command, naming no value."""
    env = clean_env(OUTFITTER_DATABASE_URL=f"sqlite:///{tmp_path / 'x.db'}", OUTFITTER_REDIS_URL=url)
    for command in (["serve", "--port", "1", "--workers", "2"], ["company", "list"]):
        done = outfitter(env, *command)
        assert_one_error_line(done, f"error: invalid configuration: OUTFITTER_REDIS_URL: {problem}")
        assert "s3cret" not in done.stderr


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        (
            "sqlite://outfitter.db",
            "expected sqlite:///relative/path.db or sqlite:////absolute/path.db (three slashes before the "
            "path)",
        ),
        (
            "sqlite:///outfitter.db?timeout=soon",
            "could not convert string to float: 'soon' (an option after '?')",
        ),
        (
            "sqlite:///outfitter.db?journal=wal",
            "unknown option(s) journal (the options after '?' are those of Python's sqlite3 driver: timeout, "
            "detect_types, check_same_thread, cached_statements, isolation_level, uri)",
        ),
        (
            "postgresql://ops:s3cret@s3cret@127.0.0.1:1/outfitter",
            "its password holds an '@' that is not percent-encoded: write it as %40 (and ':' as %3A, '/' "
            "as %2F), or give the password as ?password=...",
        ),
        (
            "postgresql://ops:s3cret@127.0.0.1:1/outfitter?foo=bar",
            "invalid connection option \"foo\" (the options after '?' are libpq's connection parameters)",
        ),
        (
            "postgresql://ops:s3cret@127.0.0.1:1/outfitter?connect_timeout=soon",
            "bad value for connect_timeout: 'soon' (the options after '?' are libpq's connection parameters)",
        ),
    ],
)
def test_a_database_url_the_driver_would_refuse_is_one_line_at_start(url: str, problem: str) -> None:
    """Two slashes before a SQLite path, or an option the driver cannot read, were each a traceback
    of hundreds of lines at the first connection (an unknown SQLite option was ignored with a
    warning); a password's bare '@' was "failed to resolve host" naming the rest of the password."""
    done = outfitter(clean_env(OUTFITTER_DATABASE_URL=url), "company", "list")
    assert_one_error_line(done, f"error: invalid configuration: OUTFITTER_DATABASE_URL: {problem}")
    assert "s3cret" not in done.stderr


@pytest.mark.parametrize("uri", ["true", "1"])
def test_sqlite_uri_parameters_are_taken_when_the_driver_takes_them(uri: str, tmp_path: Path) -> None:
    """With `uri` on (as the driver reads it: true, 1, yes...) the other options are SQLite's own."""
    url = f"sqlite:///{tmp_path / 'uri.db'}?uri={uri}&mode=rwc"
    done = outfitter(clean_env(OUTFITTER_DATABASE_URL=url), "db", "upgrade")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("database migrated to revision")


def test_a_secret_is_never_echoed_in_a_configuration_error(tmp_path: Path) -> None:
    env = clean_env(
        OUTFITTER_DATABASE_URL="mysql://admin:hunter2@db.example.com/outfitter",
        OUTFITTER_REDIS_URL="redis-cluster://:hunter2@cache",
    )
    done = outfitter(env, "company", "list")
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 2, done.stderr
    assert "hunter2" not in done.stderr


_FLUTTERWAVE = {
    "OUTFITTER_GATEWAY": "flutterwave",
    "OUTFITTER_FLUTTERWAVE_SECRET_KEY": "FLWSECK-live",
    "OUTFITTER_FLUTTERWAVE_WEBHOOK_HASH": "a-hash",
}


def test_production_refuses_to_start_on_published_development_secrets(tmp_path: Path) -> None:
    """The cursor key has a development default; production needs its own."""
    env = clean_env(
        OUTFITTER_ENVIRONMENT="production",
        OUTFITTER_DATABASE_URL="postgresql://127.0.0.1:1/outfitter",
        **_FLUTTERWAVE,
    )
    assert_one_error_line(
        outfitter(env, "company", "list"),
        "error: invalid configuration: production configuration is missing: OUTFITTER_CURSOR_SECRET, "
        "OUTFITTER_SECRET_KEYS",
    )
    given = {"OUTFITTER_CURSOR_SECRET": "x" * 32, "OUTFITTER_SECRET_KEYS": f"{'y' * 32},{'z' * 40}"}
    configured = outfitter({**env, **given}, "company", "list")
    assert "invalid configuration" not in configured.stderr, configured.stderr


def test_production_refuses_the_sandbox_gateway_and_names_the_real_one() -> None:
    """The sandbox is the default gateway: production left at it would take no money while its
    page let anyone mark a payment paid. Production names its gateway and that gateway's secrets."""
    env = clean_env(
        OUTFITTER_ENVIRONMENT="production",
        OUTFITTER_DATABASE_URL="postgresql://127.0.0.1:1/outfitter",
        OUTFITTER_CURSOR_SECRET="x" * 32,
        OUTFITTER_SECRET_KEYS="y" * 32,
        OUTFITTER_SANDBOX_WEBHOOK_SECRET="whsec_" + "c2VjcmV0" * 4,
    )
    refusal = (
        "error: invalid configuration: production configuration is not allowed: OUTFITTER_GATEWAY=sandbox "
        "(the sandbox takes no money and its checkout page lets anyone mark a payment paid: set "
        "OUTFITTER_GATEWAY=flutterwave and its secrets)"
    )
    for given in ({}, {"OUTFITTER_GATEWAY": "sandbox"}):
        assert_one_error_line(outfitter({**env, **given}, "serve", "--port", "1"), refusal)
    assert_one_error_line(
        outfitter({**env, "OUTFITTER_GATEWAY": "flutterwave"}, "company", "list"),
        "error: invalid configuration: production configuration is missing: "
        "OUTFITTER_FLUTTERWAVE_SECRET_KEY and OUTFITTER_FLUTTERWAVE_WEBHOOK_HASH",
    )


def test_production_serves_no_sandbox_page_or_webhook(tmp_path: Path) -> None:
    """In production the sandbox's checkout pages are not routes and its webhook names no gateway
    (404), whatever transactions an older release made through it."""
    settings = Settings(
        environment="production",
        database_url="postgresql://127.0.0.1:1/outfitter",
        cursor_secret="x" * 32,
        secret_keys=["y" * 32],
        gateway="flutterwave",
        flutterwave_secret_key="FLWSECK-live",
        flutterwave_webhook_hash="a-hash",
    )
    embedded = Settings(database_url=f"sqlite:///{tmp_path / 'embedded.db'}")
    upgrade(make_engine(embedded.database_url))
    with TestClient(create_app(settings)) as client, TestClient(create_app(embedded)) as control:
        for method, path in (("GET", "/sandbox/checkout/OTF-1"), ("POST", "/sandbox/checkout/OTF-1/pay")):
            page = client.request(method, path)
            assert page.status_code == 404 and page.json()["message"].startswith("No such endpoint"), (
                page.text
            )
            assert control.request(method, path).headers["content-type"].startswith("text/html")
        notice = client.post("/api/v2/webhooks/payments/sandbox", json={})
        assert notice.status_code == 404, notice.text
        assert notice.json()["message"] == "Payment gateway not found."
        assert control.post("/api/v2/webhooks/payments/sandbox", json={}).status_code == 401


def test_production_refuses_secrets_too_weak_to_be_keys() -> None:
    """A one-character key or the published development value would be accepted as set."""
    env = clean_env(
        OUTFITTER_ENVIRONMENT="production",
        OUTFITTER_DATABASE_URL="postgresql://127.0.0.1:1/outfitter",
        OUTFITTER_CURSOR_SECRET="a",
        OUTFITTER_SECRET_KEYS=f"{'y' * 32},outfitter-secrets-at-rest-development-key",
        **_FLUTTERWAVE,
    )
    assert_one_error_line(
        outfitter(env, "company", "list"),
        "error: invalid configuration: production configuration is too weak: OUTFITTER_CURSOR_SECRET (at "
        "least 32 characters, not the published development key: openssl rand -hex 32 makes one), "
        "OUTFITTER_SECRET_KEYS (each at least 32 characters, not the published development key: "
        "openssl rand -hex 32 makes one)",
    )


@pytest.mark.parametrize("secret", ["notwhsec", "whsec_c2VjcmV0", "whsec_not base64!", "c2VjcmV0" * 4])
def test_a_sandbox_secret_that_is_not_a_standard_webhooks_one_is_refused(secret: str) -> None:
    env = clean_env(OUTFITTER_SANDBOX_WEBHOOK_SECRET=secret, OUTFITTER_DATABASE_URL="sqlite:///:memory:")
    assert_one_error_line(
        outfitter(env, "company", "list"),
        "error: invalid configuration: OUTFITTER_SANDBOX_WEBHOOK_SECRET: expected a Standard Webhooks "
        "secret: whsec_ then 24 to 64 random bytes in base64 (echo whsec_$(openssl rand -base64 32) "
        "makes one)",
    )
    assert secret not in outfitter(env, "company", "list").stderr


# --- item 19: the schema must be at the head revision -----------------------------------------


def schema_behind(database: str) -> str:
    return f"error: the database schema is not up to date in {database}: run 'outfitter db upgrade' first"


@pytest.fixture
def empty_postgres() -> Iterator[str]:
    """A PostgreSQL database with no tables, its URL with a password (ignored by trust auth)."""
    admin_url = Settings(database_url=POSTGRES_URL).database_url
    name = f"outfitter_empty_{uuid.uuid4().hex[:8]}"
    try:
        admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:
        pytest.skip(f"PostgreSQL at {POSTGRES_URL} is not reachable: {exc}")
    url = make_url(admin_url).set(database=name, password="s3cret-pw")
    url = url.set(username=url.username or os.environ.get("USER") or "postgres")
    yield url.set(drivername="postgresql").render_as_string(hide_password=False)
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["worker"], ["worker", "--once"]])
def test_serve_and_worker_refuse_an_unmigrated_sqlite_database(command: list[str], tmp_path: Path) -> None:
    database = tmp_path / "empty.db"
    env = clean_env(OUTFITTER_DATABASE_URL=f"sqlite:///{database}", OUTFITTER_RATE_LIMIT="off")
    assert_one_error_line(outfitter(env, *command), schema_behind(f"sqlite:///{database}"))


@pytest.mark.parametrize(
    "command", [["serve", "--port", "0", "--workers", "2"], ["worker"], ["company", "list"]]
)
@pytest.mark.parametrize("password_in", ["authority", "query"])
def test_serve_and_worker_refuse_an_unmigrated_postgres_database_naming_it_without_password(
    command: list[str], password_in: str, empty_postgres: str
) -> None:
    shown = empty_postgres.replace(":s3cret-pw@", "@")
    given = empty_postgres
    if password_in == "query":  # libpq's other place for it, handy when it holds an `@`
        given = f"{shown}?sslpassword=key-pw&password=s3cret-pw&connect_timeout=5"
        shown = f"{shown}?connect_timeout=5"
    env = clean_env(OUTFITTER_DATABASE_URL=given, OUTFITTER_RATE_LIMIT="off")
    done = outfitter(env, *command)
    assert_one_error_line(done, schema_behind(shown))
    assert "s3cret-pw" not in done.stderr and "key-pw" not in done.stderr


def uvicorn_asgi(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`uvicorn outfitter.asgi:app`, as an operator who does not use `outfitter serve` runs it."""
    command = [sys.executable, "-m", "uvicorn", "outfitter.asgi:app", "--port", "0"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def assert_startup_failed_with(done: subprocess.CompletedProcess[str], expected: str) -> None:
    """uvicorn logs the lifespan's one line, then gives up with status 3 before it listens."""
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
    assert errors == [f"ERROR:    {expected}", "ERROR:    Application startup failed. Exiting."]
    assert "Uvicorn running on" not in done.stderr


def test_uvicorn_on_the_asgi_module_refuses_an_unmigrated_database(tmp_path: Path) -> None:
    """It used to listen, and answer every request with a 500 (no such table)."""
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    done = uvicorn_asgi(clean_env(OUTFITTER_DATABASE_URL=url, OUTFITTER_RATE_LIMIT="off"))
    assert_startup_failed_with(done, schema_behind(url).removeprefix("error: "))


def test_uvicorn_on_the_asgi_module_names_an_unmigrated_postgres_database_without_password(
    empty_postgres: str,
) -> None:
    done = uvicorn_asgi(clean_env(OUTFITTER_DATABASE_URL=empty_postgres, OUTFITTER_RATE_LIMIT="off"))
    shown = empty_postgres.replace(":s3cret-pw@", "@")
    assert_startup_failed_with(done, schema_behind(shown).removeprefix("error: "))
    assert "s3cret-pw" not in done.stderr


def test_uvicorn_on_the_asgi_module_refuses_a_database_it_cannot_reach(empty_postgres: str) -> None:
    missing = make_url(empty_postgres).set(database="outfitter_no_such_database")
    url = missing.render_as_string(hide_password=False)
    done = uvicorn_asgi(clean_env(OUTFITTER_DATABASE_URL=url, OUTFITTER_RATE_LIMIT="off"))
    expected = (
        'the database cannot be reached: connection failed: connection to server at "127.0.0.1", '
        'port 5432 failed: FATAL:  database "outfitter_no_such_database" does not exist'
    )
    assert_startup_failed_with(done, expected)


def test_uvicorn_on_the_asgi_module_serves_a_migrated_database(tmp_path: Path) -> None:
    """The control: the same command on a migrated database starts and answers."""
    url = f"sqlite:///{tmp_path / 'migrated.db'}"
    env = clean_env(OUTFITTER_DATABASE_URL=url, OUTFITTER_RATE_LIMIT="off")
    assert outfitter(env, "db", "upgrade").returncode == 0
    command = [sys.executable, "-m", "uvicorn", "outfitter.asgi:app", "--port", "0"]
    server = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        for line in server.stderr:
            if "Uvicorn running on" in line:
                address = line.split("running on ")[1].split()[0]
                break
        else:
            pytest.fail("uvicorn ended without listening")
        with httpx.Client(base_url=address) as client:
            response = client.get("/readyz")
        assert response.status_code == 200, response.text
        assert response.json()["data"] == {
            "database": "ok",
            "migrations": "current",
            "redis": "not configured",
            "worker": "ok",
        }
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_readyz_is_503_while_the_schema_is_behind(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'empty.db'}", rate_limit="off")
    with TestClient(create_app(settings)) as client:
        response = client.get("/readyz")
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"] == "2"
    assert response.json() == {
        "success": False,
        "message": "The database schema is behind this release: run 'outfitter db upgrade'.",
        "data": {"database": "ok", "migrations": "behind", "redis": "not configured", "worker": "unknown"},
    }


@pytest.fixture(scope="module")
def migrated_ahead(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A SQLite database a newer release migrated (at revision 9999), as after a rollback; and
    the message every command gives for it."""
    from outfitter.migrations import head_revisions

    path = tmp_path_factory.mktemp("ahead") / "ahead.db"
    url = f"sqlite:///{path}"
    done = outfitter(clean_env(OUTFITTER_DATABASE_URL=url), "db", "upgrade")
    assert done.returncode == 0, done.stderr
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    message = (
        f"error: the database schema in {url} is at a revision this release does not know (9999; this "
        f"release ends at {', '.join(sorted(head_revisions()))}): a newer release migrated it, or another "
        "application's migrations share its alembic_version table; run the release that migrated it, or "
        "restore a backup taken before"
    )
    return url, message


@pytest.mark.parametrize(
    "command",
    [["db", "upgrade"], ["demo"], ["serve", "--port", "1"], ["worker", "--once"], ["token", "list"]],
)
def test_a_database_a_newer_release_migrated_is_one_line_for_every_command(
    migrated_ahead: tuple[str, str], command: list[str]
) -> None:
    """Alembic's own answer was a 265-line traceback (`db upgrade`, `demo`), and the others told the
    operator to run `db upgrade`, the command that failed."""
    url, message = migrated_ahead
    assert_one_error_line(outfitter(clean_env(OUTFITTER_DATABASE_URL=url), *command), message)


def test_readyz_says_the_schema_is_ahead_of_this_release(
    migrated_ahead: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(database_url=migrated_ahead[0], rate_limit="off")
    app = create_app(settings)
    with TestClient(app) as client:
        response = client.get("/readyz")
    app.state.engine.dispose()
    logged = f"readiness: the database schema in {migrated_ahead[0]} is ahead of this release"
    assert logged in caplog.messages
    assert response.status_code == 503, response.text
    assert response.json() == {
        "success": False,
        "message": "The database schema is newer than this release: run the release that migrated it.",
        "data": {"database": "ok", "migrations": "ahead", "redis": "not configured", "worker": "unknown"},
    }


def test_db_upgrade_says_what_it_did(tmp_path: Path) -> None:
    from outfitter.migrations import head_revisions

    env = clean_env(OUTFITTER_DATABASE_URL=f"sqlite:///{tmp_path / 'new.db'}")
    head = ", ".join(sorted(head_revisions()))
    first, again = outfitter(env, "db", "upgrade"), outfitter(env, "db", "upgrade")
    assert first.stdout.strip() == f"database migrated to revision {head} (from an empty database)"
    assert again.stdout.strip() == f"database is up to date (revision {head})"


def test_db_upgrade_refuses_our_tables_without_a_revision_in_one_line(tmp_path: Path) -> None:
    """A restore that left `alembic_version` out: migrating from the start would fail on the first
    table after a page of traceback; the operator is told what is wrong, and nothing changes."""
    database = tmp_path / "restored.db"
    env = clean_env(OUTFITTER_DATABASE_URL=f"sqlite:///{database}")
    assert outfitter(env, "db", "upgrade").returncode == 0
    with closing(sqlite3.connect(database)) as connection:
        connection.execute("DELETE FROM alembic_version")
        connection.commit()
    assert_one_error_line(
        outfitter(env, "db", "upgrade"),
        f"error: the database sqlite:///{database} holds {len(Base.metadata.tables)} of Outfitter's tables "
        "(api_tokens, asset_models, asset_pricing, ...) but no schema revision (its alembic_version table "
        "is missing or empty), so it cannot be migrated: restore the backup with its alembic_version "
        "table, or start from an empty database",
    )
    with closing(sqlite3.connect(database)) as connection:  # left as it was
        assert connection.execute("SELECT count(*) FROM companies").fetchone() == (0,)
        assert connection.execute("SELECT count(*) FROM alembic_version").fetchone() == (0,)


# --- item 19: the SQLite default is anchored in the user's data directory ----------------------


def test_the_default_database_lives_in_the_data_directory_whatever_the_current_one(tmp_path: Path) -> None:
    """XDG_DATA_HOME moves the data directory (platformdirs), as on any Linux desktop or server."""
    data_home, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = clean_env(XDG_DATA_HOME=str(data_home))
    database = data_home / "outfitter" / "outfitter.db"
    done = outfitter(env, "worker", "--once", cwd=elsewhere)
    assert_one_error_line(done, schema_behind(f"sqlite:///{database}"))
    assert outfitter(env, "db", "upgrade", cwd=tmp_path).returncode == 0
    done = outfitter(env, "worker", "--once", cwd=elsewhere)
    assert done.returncode == 0 and "attempted 0" in done.stdout, done.stderr
    assert database.is_file() and not list(elsewhere.iterdir())
