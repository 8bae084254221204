"""Setting Outfitter up and running it: `db upgrade`, `serve`, `demo` and `worker`."""

from __future__ import annotations

import uuid
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from outfitter.cli.common import app, fail, require_current_schema, unit_of_work, upgrade_schema

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")

# src/outfitter/demo/catalog.json: this module sits one folder below outfitter/.
DEMO_CATALOG = Path(__file__).parent.parent / "demo" / "catalog.json"
DEMO_COMPANY = "Demo Company"


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Migrate the schema to the newest revision and load reference data."""
    from outfitter.config import get_settings
    from outfitter.db.session import make_engine
    from outfitter.migrations import current_revisions

    engine = make_engine(get_settings().database_url)
    try:
        before = upgrade_schema(engine)  # as found once its turn came: a concurrent one is done
        after = current_revisions(engine)
    finally:
        engine.dispose()
    if before == after:
        typer.echo(f"database is up to date (revision {', '.join(sorted(after))})")
    else:
        was = ", ".join(sorted(before)) or "an empty database"
        typer.echo(f"database migrated to revision {', '.join(sorted(after))} (from {was})")


@app.command("serve")
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    workers: Annotated[int, typer.Option(help="Worker processes")] = 1,
) -> None:
    """Serve the HTTP API (uvicorn; TCP_NODELAY on every connection, workers end with this process)."""
    from outfitter.config import get_settings
    from outfitter.db.session import make_engine
    from outfitter.server import ServeError
    from outfitter.server import serve as run_server

    engine = make_engine(get_settings().database_url)
    try:
        require_current_schema(engine)  # before a socket or a worker exists
    finally:
        engine.dispose()
    try:
        run_server(host, port, workers)
    except ServeError as exc:
        fail(str(exc))


@app.command("demo")
def demo(
    port: Annotated[
        int | None,
        typer.Option(help="The port 'serve' will take next: checked free before anything is written"),
    ] = None,
    reset: Annotated[
        bool, typer.Option("--reset", help="Delete the default SQLite database first, and start afresh")
    ] = False,
) -> None:
    """Migrate, load the demo catalog, create a demo company and print its token (the same token
    on every run while it is live: it is kept in the data directory, readable by this user only)."""
    from sqlalchemy import select

    from outfitter.catalog.importer import import_catalog, load_catalog_file
    from outfitter.config import get_settings
    from outfitter.db.session import make_engine
    from outfitter.models import Company
    from outfitter.tenants.tokens import create_company

    if port is not None:
        _require_free_port(port)
    settings = get_settings()
    if reset:
        _reset_embedded_database(settings.database_url)
    engine = make_engine(settings.database_url)
    try:
        upgrade_schema(engine)
    finally:
        engine.dispose()
    with unit_of_work() as session:
        import_catalog(session, load_catalog_file(DEMO_CATALOG))
        company = session.scalars(select(Company).where(Company.name == DEMO_COMPANY)).first()
        if company is None:
            company = create_company(session, DEMO_COMPANY)
            _demo_wallet(session, company.id)
        token, token_id, reused = _demo_token(session, company.id, settings.database_url)
        console = _demo_console_admin(session, company.id, settings.public_url)
    base = settings.public_url.rstrip("/")
    kept = "the same as last time; " if reused else ""
    typer.echo(
        f"Demo company {company.id} is ready.\n"
        f"Token: {token} (id {token_id}; {kept}revoke it with 'outfitter token revoke')\n"
        f"Try:   curl -H 'Authorization: Bearer {token}' "
        f"'{base}/api/v2/client/assets?country_id=NG&currency_code=NGN'\n"
        f"Docs:  {base}/api/v2/docs\n"
        f"Console: {console}\n"
        f"Data:  {_where(settings.database_url)}"
    )


def _require_free_port(port: int) -> None:
    """Exit with one line, before anything is written, when `serve` could not take the port."""
    import socket

    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds it
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            fail(
                f"port {port} is taken ({exc.strerror}): an 'outfitter serve' may be running already; "
                "stop it, or run on another port (make run PORT=9000). No token was made."
            )


def _where(database_url: str) -> str:
    from outfitter.config.database_url import display_database_url

    return display_database_url(database_url)


def _reset_embedded_database(database_url: str) -> None:
    """Delete the SQLite file the URL names (and its journal), and the demo token kept for it. Only
    a SQLite file: a PostgreSQL database is the operator's to drop."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        fail(f"--reset deletes a SQLite file only; {_where(database_url)} is not one: drop it yourself")
    database = Path(url.database)
    for end in ("", "-wal", "-shm", "-journal"):
        database.with_name(database.name + end).unlink(missing_ok=True)
    _forget_demo_token(database_url)
    typer.echo(f"deleted {database}")


DEMO_TOKEN_NAME = "Demo token"


def _demo_tokens_file() -> Path:
    from outfitter.config.database_url import data_dir

    return data_dir() / "demo-tokens.json"


def _database_key(database_url: str) -> str:
    import hashlib

    return hashlib.sha256(database_url.encode()).hexdigest()


def _kept_tokens() -> dict[str, str]:
    import json

    try:
        kept = json.loads(_demo_tokens_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return (
        {key: value for key, value in kept.items() if isinstance(value, str)}
        if isinstance(kept, dict)
        else {}
    )


def _keep_tokens(tokens: dict[str, str]) -> None:
    import json
    import os

    file = _demo_tokens_file()
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            json.dump(tokens, stream)
    except OSError as exc:  # the token works all the same; the next run makes another
        typer.echo(f"warning: cannot keep the demo token in {file}: {exc.strerror}", err=True)


def _forget_demo_token(database_url: str) -> None:
    tokens = _kept_tokens()
    if tokens.pop(_database_key(database_url), None) is not None:
        _keep_tokens(tokens)


def _demo_token(session: Session, company_id: uuid.UUID, database_url: str) -> tuple[str, uuid.UUID, bool]:
    """The demo company's token kept by an earlier run, while it is live in this database, else a
    new one kept for the next run: the token, its id, and whether it was kept."""
    from sqlalchemy import select

    from outfitter.db.base import utcnow
    from outfitter.models import ApiToken
    from outfitter.tenants.tokens import hash_token, issue_token, token_is_live

    tokens = _kept_tokens()
    key = _database_key(database_url)
    kept = tokens.get(key)
    if kept is not None:
        record = session.scalars(
            select(ApiToken).where(ApiToken.token_hash == hash_token(kept), ApiToken.company_id == company_id)
        ).first()
        if record is not None and token_is_live(record, utcnow()) is None:
            return kept, record.id, True
    issued = issue_token(session, company_id, name=DEMO_TOKEN_NAME)
    _keep_tokens({**tokens, key: issued.token})
    return issued.token, issued.record.id, False


DEMO_ADMIN = "admin@demo.example"


def _demo_console_admin(session: Session, company_id: uuid.UUID, public_url: str) -> str:
    """The demo admin's link to set a password and sign in (a new one each run), or, once they have
    one, the console's sign-in page."""
    from outfitter.console.accounts import InviteRefused, invite, sign_in_link
    from outfitter.models import ConsoleRole

    try:
        invited = invite(session, company_id, DEMO_ADMIN, ConsoleRole.ADMIN)
    except InviteRefused:
        return f"{public_url.rstrip('/')}/console/sign-in (as {DEMO_ADMIN})"
    return f"{sign_in_link(public_url, invited.token)} (sets {DEMO_ADMIN}'s password, valid 72 h)"


def _demo_wallet(session: Session, company_id: uuid.UUID) -> None:
    """Give the demo company some credit when the payments module is present."""
    from outfitter.db.tenancy import bind_company

    try:
        from outfitter.payments.wallet import credit_wallet
    except ImportError:
        return
    bind_company(session, company_id)
    credit_wallet(session, "NGN", Decimal("50000000"), "Demo credit")
    credit_wallet(session, "USD", Decimal("50000"), "Demo credit")


# --- the worker (issue 10) --------------------------------------------------------------------


@app.command("worker")
def worker(
    concurrency: Annotated[
        int | None, typer.Option(help="Sends at once (default OUTFITTER_WORKER_CONCURRENCY)", min=1, max=64)
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Do what is due now, then exit")] = False,
) -> None:
    """Send webhook deliveries and run the periodic jobs (expiry, reconciliation) until SIGTERM/SIGINT.

    Any number of workers may run against one PostgreSQL database: they share the work."""
    import logging
    import signal

    from outfitter.config import get_settings
    from outfitter.db.session import make_engine, make_sessionmaker
    from outfitter.db.tenancy import TenantSession
    from outfitter.worker import Worker

    settings = get_settings()
    size = (concurrency or settings.worker_concurrency) + 2
    engine = make_engine(settings.database_url, pool_size=size, max_overflow=0)
    try:
        require_current_schema(engine)
        # The worker's own log (what it sent, released, expired), not the libraries' chatter.
        if settings.log_format == "json":
            from outfitter.core.logs import log_as_json

            log_as_json("outfitter")
        else:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            logging.getLogger("outfitter").addHandler(handler)
            logging.getLogger("outfitter").setLevel(logging.INFO)
        if settings.metrics_token:  # counted where the servers' scrape sees them: docs/operations.md
            from outfitter.core import metrics
            from outfitter.db.session import watch_pool

            metrics.enable(settings.metrics_dir)
            watch_pool(engine)
        runner = Worker(make_sessionmaker(engine, TenantSession), settings, concurrency=concurrency)
        if once:
            attempted = runner.run_once()
            runner.close()
            typer.echo(f"attempted {attempted} delivery(ies)")
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda _signum, _frame: runner.stop())
        runner.run_forever()
    finally:
        engine.dispose()
