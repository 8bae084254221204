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
def demo() -> None:
    """Migrate, load the demo catalog, create a demo company and print its token."""
    from sqlalchemy import select

    from outfitter.catalog.importer import import_catalog, load_catalog_file
    from outfitter.config import get_settings
    from outfitter.db.session import make_engine
    from outfitter.models import Company
    from outfitter.tenants.tokens import create_company, issue_token

    settings = get_settings()
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
        issued = issue_token(session, company.id)
        console = _demo_console_admin(session, company.id, settings.public_url)
    base = settings.public_url.rstrip("/")
    typer.echo(
        f"Demo company {company.id} is ready.\n"
        f"Token: {issued.token} (id {issued.record.id}; revoke it with 'outfitter token revoke')\n"
        f"Try:   curl -H 'Authorization: Bearer {issued.token}' "
        f"'{base}/api/v2/client/assets?country_id=NG&currency_code=NGN'\n"
        f"Docs:  {base}/api/v2/docs\n"
        f"Console: {console}"
    )


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
