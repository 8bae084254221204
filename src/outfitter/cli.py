"""The operator CLI. Every command exits non-zero with a one-line error on bad input;
`--json` prints one JSON object."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from outfitter.config import get_settings
from outfitter.core.money import MAX_AMOUNT, storable
from outfitter.core.tenancy import TenantSession, across_companies, bind_company
from outfitter.db.base import utcnow
from outfitter.db.session import make_engine

app = typer.Typer(
    help="Operate Outfitter: database, companies, tokens, catalog, wallets.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals can hold tokens
)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
company_app = typer.Typer(help="Companies (tenants).", no_args_is_help=True)
token_app = typer.Typer(help="API tokens.", no_args_is_help=True)
catalog_app = typer.Typer(help="The asset catalog.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(company_app, name="company")
app.add_typer(token_app, name="token")
app.add_typer(catalog_app, name="catalog")

DEMO_CATALOG = Path(__file__).parent / "demo" / "catalog.json"
DEMO_COMPANY = "Demo Company"
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=1)


def emit(as_json: bool, payload: dict[str, Any], text: str) -> None:
    typer.echo(json.dumps(payload, default=str) if as_json else text)


def parse_id(value: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        fail(f"{what} must be a UUID, got {value!r}")


@contextmanager
def unit_of_work() -> Iterator[Session]:
    """One committed transaction against the configured database, which must be migrated."""
    from outfitter.migrations import is_current

    engine = make_engine(get_settings().database_url)
    try:
        if not is_current(engine):
            fail("the database schema is not up to date: run 'outfitter db upgrade' first")
        # Operators act for any company; a command working for one binds the session to it.
        with across_companies(TenantSession(engine, expire_on_commit=False)) as session, session.begin():
            yield session
    finally:
        engine.dispose()


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Migrate the schema to the newest revision and load reference data."""
    from outfitter.migrations import upgrade

    engine = make_engine(get_settings().database_url)
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    typer.echo("database is up to date")


@app.callback()
def check_settings() -> None:
    """A bad OUTFITTER_* setting is one line before any command runs, not a traceback (and not one
    in every worker of `serve`)."""
    from pydantic import ValidationError

    try:
        get_settings()
    except ValidationError as exc:
        fail("invalid configuration: " + "; ".join(_setting_error(error) for error in exc.errors()))


def _setting_error(error: Any) -> str:
    message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
    name = "_".join(str(part) for part in error.get("loc", ()))
    return f"OUTFITTER_{name.upper()}: {message}" if name else message


@app.command("serve")
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    workers: Annotated[int, typer.Option(help="Worker processes")] = 1,
) -> None:
    """Serve the HTTP API (uvicorn; TCP_NODELAY on every connection, workers end with this process)."""
    from outfitter.server import ServeError
    from outfitter.server import serve as run_server

    try:
        run_server(host, port, workers)
    except ServeError as exc:
        fail(str(exc))


@company_app.command("create")
def company_create(name: str, as_json: JsonFlag = False) -> None:
    """Create a company."""
    from outfitter.core.tokens import create_company

    with unit_of_work() as session:
        try:
            company = create_company(session, name)
        except ValueError as exc:
            fail(str(exc))
        payload = {"id": str(company.id), "name": company.name}
    emit(as_json, payload, f"created company {payload['name']} with id {payload['id']}")


@company_app.command("list")
def company_list(as_json: JsonFlag = False) -> None:
    """List the companies, oldest first, with how many live tokens each has."""
    from outfitter.models import ApiToken, Company

    with unit_of_work() as session:
        live_tokens = (
            select(func.count())
            .where(ApiToken.company_id == Company.id, ApiToken.revoked_at.is_(None))
            .scalar_subquery()
        )
        rows = session.execute(
            select(Company.id, Company.name, Company.created_at, live_tokens).order_by(Company.created_at)
        ).all()
        companies = [
            {"id": str(id_), "name": name, "created_at": created.isoformat(), "live_tokens": tokens}
            for id_, name, created, tokens in rows
        ]
    lines = [
        f"{c['id']}  {c['name']}  (created {c['created_at']}, {c['live_tokens']} live token(s))"
        for c in companies
    ]
    emit(as_json, {"companies": companies}, "\n".join(lines) or "no companies yet")


@token_app.command("list")
def token_list(
    company_id: Annotated[str | None, typer.Argument(help="Only this company's")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List tokens: id, company, scopes, expiry, last use, revocation. Never the token itself,
    which only its hash stands for."""
    from outfitter.models import ApiToken

    statement = select(ApiToken).order_by(ApiToken.created_at)
    if company_id is not None:
        statement = statement.where(ApiToken.company_id == parse_id(company_id, "COMPANY_ID"))
    with unit_of_work() as session:
        tokens: list[dict[str, Any]] = [
            {
                "id": str(token.id),
                "company_id": str(token.company_id),
                "name": token.name,
                "scopes": token.scope_list,
                "created_at": token.created_at.isoformat(),
                "expires_at": _iso(token.expires_at),
                "last_used_at": _iso(token.last_used_at),
                "revoked_at": _iso(token.revoked_at),
            }
            for token in session.scalars(statement)
        ]
    lines = [
        f"{t['id']}  company {t['company_id']}  {' '.join(t['scopes'])}  expires {t['expires_at'] or 'never'}"
        f"  last used {t['last_used_at'] or 'never'}{'  REVOKED' if t['revoked_at'] else ''}"
        for t in tokens
    ]
    emit(as_json, {"tokens": tokens}, "\n".join(lines) or "no tokens")


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


@token_app.command("create")
def token_create(
    company_id: str,
    scope: Annotated[list[str] | None, typer.Option("--scope", help="read or write; repeat for both")] = None,
    expires_in_days: Annotated[int | None, typer.Option(help="Days until the token expires")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create an API token for a company. The token is shown once, now."""
    from outfitter.core.tokens import issue_token

    company_uuid = parse_id(company_id, "COMPANY_ID")
    with unit_of_work() as session:
        try:
            issued = issue_token(session, company_uuid, scope, expires_in_days)
        except ValueError as exc:
            fail(str(exc))
        payload: dict[str, Any] = {
            "id": str(issued.record.id),
            "token": issued.token,
            "scopes": issued.record.scope_list,
            "expires_at": issued.record.expires_at.isoformat() if issued.record.expires_at else None,
        }
    emit(as_json, payload, f"token {payload['id']} ({' '.join(payload['scopes'])}): {payload['token']}")


@token_app.command("revoke")
def token_revoke(token_id: str) -> None:
    """Revoke a token; requests with it answer 401 from now on."""
    from outfitter.core.tokens import revoke_token

    token_uuid = parse_id(token_id, "TOKEN_ID")
    with unit_of_work() as session:
        try:
            revoke_token(session, token_uuid)
        except ValueError as exc:
            fail(str(exc))
    typer.echo(f"token {token_id} revoked")


@catalog_app.command("import")
def catalog_import(file: Path, as_json: JsonFlag = False) -> None:
    """Load a catalog JSON file; importing the same file again creates nothing new."""
    from outfitter.catalog.importer import CatalogImportError, import_catalog, load_catalog_file

    try:
        catalog = load_catalog_file(file)
        with unit_of_work() as session, progress_bar() as bar:
            task = bar.add_task(f"Importing {file.name}", total=len(catalog.assets))
            summary = import_catalog(session, catalog, progress=lambda done: bar.advance(task, done))
    except CatalogImportError as exc:
        fail(str(exc))
    payload = vars(summary)
    emit(as_json, payload, ", ".join(f"{key.replace('_', ' ')}: {value}" for key, value in payload.items()))


# --- outfitter import: a company's employees or equipment from a CSV file ----------------------
import_app = typer.Typer(
    help="Create a company's employees or equipment from a CSV file.", no_args_is_help=True
)
app.add_typer(import_app, name="import")
DryRunFlag = Annotated[bool, typer.Option("--dry-run", help="Check every row and write nothing.")]


def progress_bar() -> Any:
    """A progress bar on stderr (stdout stays for the answer, `--json` included), gone when done."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return Progress(*columns, console=Console(stderr=True), transient=True)


def _import_csv(company_id: str, file: Path, what: str, run: Any, dry_run: bool, as_json: bool) -> None:
    """Read FILE, import it for the company in one transaction (all or nothing), print the result;
    each row error on a line of its own, `rows.<line>.<column>: message`, then exit 1."""
    from outfitter.core.csv_import import MAX_IMPORT_BYTES
    from outfitter.core.errors import DomainError
    from outfitter.models import Company

    company = parse_id(company_id, "COMPANY_ID")
    try:
        data = file.read_bytes()
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror}")
    if len(data) > MAX_IMPORT_BYTES:
        fail(f"{file} is larger than the limit of {MAX_IMPORT_BYTES} bytes")
    try:
        with unit_of_work() as session, progress_bar() as bar:
            if session.get(Company, company) is None:
                fail(f"no company with id {company}")
            bind_company(session, company)
            task = bar.add_task(f"Checking {file.name}", total=data.count(b"\n") or None)
            result = run(session, data, lambda rows: bar.advance(task, rows))
            bar.update(task, description=f"Writing {result['count']} {what}")
    except DomainError as exc:
        if not exc.errors:
            fail(exc.message)
        typer.echo(f"error: nothing was imported: {exc.message}", err=True)
        for path, messages in exc.errors.items():
            for message in messages:
                typer.echo(f"{path}: {message}", err=True)
        raise typer.Exit(code=1) from None
    verb = "would create" if dry_run else "created"
    payload = {**result, "ids": [str(each) for each in result["ids"]]}
    emit(
        as_json,
        payload,
        f"{verb} {result['count']} {what}" + (" (dry run: nothing written)" if dry_run else ""),
    )


@import_app.command("employees")
def import_employees(
    company_id: str, file: Path, dry_run: DryRunFlag = False, as_json: JsonFlag = False
) -> None:
    """Create employees from a CSV file (the columns of POST /client/employees), all or nothing."""
    from outfitter.core.events import SYSTEM_ACTOR
    from outfitter.people.imports import import_employees as run_import

    def run(session: Session, data: bytes, progress: Any) -> dict[str, Any]:
        return run_import(session, SYSTEM_ACTOR, data, dry_run=dry_run, progress=progress)

    _import_csv(company_id, file, "employees", run, dry_run, as_json)


@import_app.command("equipment")
def import_equipment(
    company_id: str, file: Path, dry_run: DryRunFlag = False, as_json: JsonFlag = False
) -> None:
    """Register equipment from a CSV file (the columns of POST /client/equipment), all or nothing."""
    from outfitter.core.events import SYSTEM_ACTOR
    from outfitter.equipment.imports import import_equipment as run_import

    def run(session: Session, data: bytes, progress: Any) -> dict[str, Any]:
        return run_import(session, SYSTEM_ACTOR, data, dry_run=dry_run, progress=progress)

    _import_csv(company_id, file, "equipment", run, dry_run, as_json)


@app.command("demo")
def demo() -> None:
    """Migrate, load the demo catalog, create a demo company and print its token."""
    from outfitter.catalog.importer import import_catalog, load_catalog_file
    from outfitter.core.tokens import create_company, issue_token
    from outfitter.migrations import upgrade
    from outfitter.models import Company

    settings = get_settings()
    engine = make_engine(settings.database_url)
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    with unit_of_work() as session:
        import_catalog(session, load_catalog_file(DEMO_CATALOG))
        company = session.scalars(select(Company).where(Company.name == DEMO_COMPANY)).first()
        if company is None:
            company = create_company(session, DEMO_COMPANY)
            _demo_wallet(session, company.id)
        issued = issue_token(session, company.id)
    base = settings.public_url.rstrip("/")
    typer.echo(
        f"Demo company {company.id} is ready.\n"
        f"Token: {issued.token} (id {issued.record.id}; revoke it with 'outfitter token revoke')\n"
        f"Try:   curl -H 'Authorization: Bearer {issued.token}' "
        f"'{base}/api/v2/client/assets?country_id=NG&currency_code=NGN'\n"
        f"Docs:  {base}/api/v2/docs"
    )


def _demo_wallet(session: Session, company_id: uuid.UUID) -> None:
    """Give the demo company some credit when the payments module is present."""
    try:
        from outfitter.payments.wallet import credit_wallet
    except ImportError:
        return
    bind_company(session, company_id)
    credit_wallet(session, "NGN", Decimal("50000000"), "Demo credit")
    credit_wallet(session, "USD", Decimal("50000"), "Demo credit")


def parse_amount(value: str) -> Decimal:
    try:
        amount = Decimal(value)
    except InvalidOperation:
        fail(f"AMOUNT must be a decimal number, got {value!r}")
    if not amount.is_finite() or amount <= 0:
        fail("AMOUNT must be greater than zero")
    if not storable(amount):
        fail(f"AMOUNT must be below {MAX_AMOUNT:,}")
    return amount


# Payments: wallets, the fee schedule, reconciliation.
wallet_app = typer.Typer(help="Company credit wallets.", no_args_is_help=True)
fees_app = typer.Typer(help="The fee schedule, per currency.", no_args_is_help=True)
payments_app = typer.Typer(help="Payments and their gateways.", no_args_is_help=True)
app.add_typer(wallet_app, name="wallet")
app.add_typer(fees_app, name="fees")
app.add_typer(payments_app, name="payments")


# "-5" is an amount to refuse in words, not an unknown option.
@wallet_app.command("credit", context_settings={"ignore_unknown_options": True})
def wallet_credit(company_id: str, currency: str, amount: str, as_json: JsonFlag = False) -> None:
    """Add credit to a company's wallet in CURRENCY (written to its ledger)."""
    from outfitter.core.errors import DomainError
    from outfitter.models import Company
    from outfitter.payments.fees import to_minor_units
    from outfitter.payments.wallet import credit_wallet

    company_uuid = parse_id(company_id, "COMPANY_ID")
    value = parse_amount(amount)
    with unit_of_work() as session:
        if session.get(Company, company_uuid) is None:
            fail(f"no company with id {company_id}")
        try:
            bind_company(session, company_uuid)
            entry = credit_wallet(session, currency, value, "Operator credit")
        except DomainError as exc:
            fail(exc.message)
        payload = {
            "company_id": company_id,
            "currency": currency.strip().upper(),
            "credited": format(to_minor_units(entry.amount, currency.strip().upper()), "f"),
            "balance": format(to_minor_units(entry.balance_after, currency.strip().upper()), "f"),
        }
    emit(
        as_json,
        payload,
        f"credited {payload['credited']} {payload['currency']}; balance {payload['balance']}",
    )


def _schedule_payload(schedule: Any) -> dict[str, str]:
    from outfitter.payments.fees import to_minor_units

    code = schedule.currency_code
    return {
        "currency": schedule.currency_code,
        "insurance_percent": format(schedule.insurance_percent.normalize(), "f"),
        "platform_percent": format(schedule.platform_percent.normalize(), "f"),
        "gateway_percent": format(schedule.gateway_percent.normalize(), "f"),
        "onboarding_fee": format(to_minor_units(schedule.onboarding_fee_per_device, code), "f"),
        "device_config_fee": format(to_minor_units(schedule.device_config_fee_per_device, code), "f"),
        "retrieval_fee": format(to_minor_units(schedule.retrieval_fee_per_device, code), "f"),
        "inspection_fee": format(to_minor_units(schedule.inspection_fee_per_device, code), "f"),
        "storage_fee": format(to_minor_units(schedule.storage_fee_per_device, code), "f"),
    }


@fees_app.command("show")
def fees_show(as_json: JsonFlag = False) -> None:
    """Print the fee schedule of every currency."""
    from sqlalchemy import select

    from outfitter.models import FeeSchedule

    with unit_of_work() as session:
        rows = [
            _schedule_payload(s)
            for s in session.scalars(select(FeeSchedule).order_by(FeeSchedule.currency_code))
        ]
    if as_json:
        typer.echo(json.dumps({"fee_schedules": rows}))
        return
    typer.echo(
        "currency  insurance%  platform%  gateway%(Card)  onboarding/device  config/device"
        "  retrieval/device  inspection/device  storage/device"
    )
    for row in rows:
        typer.echo(
            f"{row['currency']:<9} {row['insurance_percent']:>10} {row['platform_percent']:>10} "
            f"{row['gateway_percent']:>15} {row['onboarding_fee']:>18} {row['device_config_fee']:>14}"
            f" {row['retrieval_fee']:>17} {row['inspection_fee']:>18} {row['storage_fee']:>15}"
        )


def _fee_value(value: str | None, name: str, percent: bool) -> Decimal | None:
    if value is None:
        return None
    try:
        number = Decimal(value)
    except InvalidOperation:
        fail(f"--{name} must be a decimal number, got {value!r}")
    if not number.is_finite() or number < 0 or (percent and number > 100):
        fail(f"--{name} must be between 0 and {'100' if percent else 'any amount'}")
    return number


@fees_app.command("set")
def fees_set(
    currency: str,
    insurance_percent: Annotated[str | None, typer.Option(help="Percent of the equipment amount")] = None,
    platform_percent: Annotated[str | None, typer.Option(help="Percent of the equipment amount")] = None,
    gateway_percent: Annotated[str | None, typer.Option(help="Percent of the charge, Card only")] = None,
    onboarding_fee: Annotated[str | None, typer.Option(help="Flat fee per device")] = None,
    device_config_fee: Annotated[str | None, typer.Option(help="Flat fee per device")] = None,
    retrieval_fee: Annotated[str | None, typer.Option(help="Flat fee per device retrieved")] = None,
    inspection_fee: Annotated[str | None, typer.Option(help="Flat fee per device retrieved")] = None,
    storage_fee: Annotated[str | None, typer.Option(help="Flat fee per device retrieved to storage")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create or change the fee schedule of CURRENCY; options left out keep their value."""
    from sqlalchemy import select

    from outfitter.catalog.reference import find_currency
    from outfitter.models import FeeSchedule
    from outfitter.payments.fees import DEFAULT_PERCENTS

    values = {
        "insurance_percent": _fee_value(insurance_percent, "insurance-percent", True),
        "platform_percent": _fee_value(platform_percent, "platform-percent", True),
        "gateway_percent": _fee_value(gateway_percent, "gateway-percent", True),
        "onboarding_fee_per_device": _fee_value(onboarding_fee, "onboarding-fee", False),
        "device_config_fee_per_device": _fee_value(device_config_fee, "device-config-fee", False),
        "retrieval_fee_per_device": _fee_value(retrieval_fee, "retrieval-fee", False),
        "inspection_fee_per_device": _fee_value(inspection_fee, "inspection-fee", False),
        "storage_fee_per_device": _fee_value(storage_fee, "storage-fee", False),
    }
    with unit_of_work() as session:
        found = find_currency(session, currency)
        if found is None:
            fail(f"unknown currency {currency!r}")
        schedule = session.scalars(
            select(FeeSchedule).where(FeeSchedule.currency_code == found.code)
        ).one_or_none()
        if schedule is None:
            schedule = FeeSchedule(
                currency_code=found.code,
                onboarding_fee_per_device=Decimal(0),
                device_config_fee_per_device=Decimal(0),
                retrieval_fee_per_device=Decimal(0),
                inspection_fee_per_device=Decimal(0),
                storage_fee_per_device=Decimal(0),
                **DEFAULT_PERCENTS,
            )
            session.add(schedule)
        for name, value in values.items():
            if value is not None:
                setattr(schedule, name, value)
        session.flush()
        payload = _schedule_payload(schedule)
    emit(as_json, payload, " ".join(f"{key}={value}" for key, value in payload.items()))


@payments_app.command("anomalies")
def payments_anomalies(
    include_resolved: Annotated[bool, typer.Option("--all", help="Resolved ones too")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Money a gateway took that no order accounts for: late payments (fulfil or refund them) and
    overpayments (refund the excess). Mark one done with `payments resolve`."""
    from outfitter.models import PaymentAnomaly

    statement = select(PaymentAnomaly).order_by(PaymentAnomaly.created_at)
    if not include_resolved:
        statement = statement.where(PaymentAnomaly.resolved_at.is_(None))
    with unit_of_work() as session:
        anomalies: list[dict[str, Any]] = [
            {
                "id": str(anomaly.id),
                "company_id": str(anomaly.company_id),
                "tx_ref": anomaly.tx_ref,
                "kind": str(anomaly.kind),
                "amount": format(anomaly.amount.normalize(), "f"),
                "currency": anomaly.currency_code,
                "gateway_reference": anomaly.gateway_reference,
                "created_at": anomaly.created_at.isoformat(),
                "resolved_at": _iso(anomaly.resolved_at),
            }
            for anomaly in session.scalars(statement)
        ]
    lines = [
        f"{a['id']}  {a['kind']}  {a['tx_ref']}  {a['amount']} {a['currency']}  "
        f"(company {a['company_id']}, gateway {a['gateway_reference'] or '-'}, {a['created_at']})"
        for a in anomalies
    ]
    emit(as_json, {"anomalies": anomalies}, "\n".join(lines) or "no payment anomalies")


@payments_app.command("resolve")
def payments_resolve(anomaly_id: str) -> None:
    """Mark a payment anomaly handled (refunded or fulfilled by hand)."""
    from outfitter.models import PaymentAnomaly

    anomaly_uuid = parse_id(anomaly_id, "ANOMALY_ID")
    with unit_of_work() as session:
        anomaly = session.get(PaymentAnomaly, anomaly_uuid)
        if anomaly is None:
            fail(f"no payment anomaly with id {anomaly_id}")
        anomaly.resolved_at = anomaly.resolved_at or utcnow()
    typer.echo(f"payment anomaly {anomaly_id} resolved")


@payments_app.command("reconcile")
def payments_reconcile(as_json: JsonFlag = False) -> None:
    """Ask the gateways about Pending transactions: fulfil the paid, fail the declined, expire the old."""
    from outfitter.db.session import make_sessionmaker
    from outfitter.migrations import is_current
    from outfitter.payments.gateways import GatewayRegistry
    from outfitter.payments.reconcile import reconcile

    settings = get_settings()
    engine = make_engine(settings.database_url)
    try:
        if not is_current(engine):
            fail("the database schema is not up to date: run 'outfitter db upgrade' first")
        sessions = make_sessionmaker(engine, TenantSession)
        summary = reconcile(sessions, GatewayRegistry(settings, sessions))
    finally:
        engine.dispose()
    payload = {"checked": summary.checked, "outcomes": summary.outcomes, "unreachable": summary.unreachable}
    outcomes = ", ".join(f"{key}: {value}" for key, value in sorted(summary.outcomes.items())) or "none"
    emit(
        as_json,
        payload,
        f"checked {summary.checked} pending transaction(s); {outcomes}; unreachable: {summary.unreachable}",
    )


# Orders: operators move their stages (decisions 14). The session works across companies until
# the order is found, then acts as its company (events and tenancy need one).
orders_app = typer.Typer(help="Orders tracked to the door: stages and cancellation.", no_args_is_help=True)
app.add_typer(orders_app, name="orders")


def _order_payload(order: Any) -> dict[str, Any]:
    from outfitter.payments.presenters import order_out

    return order_out(order).model_dump(mode="json")


def _operate_on_order(order_id: str, action: Any) -> dict[str, Any]:
    from outfitter.core.errors import DomainError
    from outfitter.models import Order

    order_uuid = parse_id(order_id, "ORDER_ID")
    with unit_of_work() as session:
        company_id = session.scalar(select(Order.company_id).where(Order.id == order_uuid))
        if company_id is None:
            fail(f"no order with id {order_id}")
        bind_company(session, company_id)
        try:
            order = action(session, order_uuid)
        except DomainError as exc:
            fail(exc.message)
        return _order_payload(order)


def _order_line(payload: dict[str, Any]) -> str:
    stages = ", ".join(f"{item['id']}: {item['stage']}" for item in payload["items"])
    return f"order {payload['id']} ({payload['kind']}) is {payload['status']}; items {stages}"


@orders_app.command("advance")
def orders_advance(
    order_id: str,
    stage: str,
    item: Annotated[str | None, typer.Option("--item", help="Only this item (default: every item)")] = None,
    note: Annotated[str | None, typer.Option("--note", help="A note on the stage reached")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Move an order's items forward to STAGE, recording every stage passed."""
    from outfitter.payments.orders import advance

    item_uuid = parse_id(item, "--item") if item is not None else None
    if note is not None and len(note) > 500:
        fail("--note must be at most 500 characters")
    payload = _operate_on_order(order_id, lambda session, oid: advance(session, oid, stage, item_uuid, note))
    emit(as_json, payload, _order_line(payload))


@orders_app.command("cancel")
def orders_cancel(order_id: str, as_json: JsonFlag = False) -> None:
    """Cancel an order in progress (items keep their stages; devices not yet retrieved stay Assigned)."""
    from outfitter.payments.orders import cancel

    payload = _operate_on_order(order_id, cancel)
    emit(as_json, payload, _order_line(payload))


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

    from outfitter.db.session import make_sessionmaker
    from outfitter.migrations import is_current
    from outfitter.worker import Worker

    settings = get_settings()
    size = (concurrency or settings.worker_concurrency) + 2
    engine = make_engine(settings.database_url, pool_size=size, max_overflow=0)
    try:
        if not is_current(engine):
            fail("the database schema is not up to date: run 'outfitter db upgrade' first")
        # The worker's own log (what it sent, released, expired), not the libraries' chatter.
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.getLogger("outfitter").addHandler(handler)
        logging.getLogger("outfitter").setLevel(logging.INFO)
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


def main() -> None:
    """The `outfitter` command: a database out of reach is one line too, whatever the command."""
    from sqlalchemy.exc import InterfaceError, OperationalError

    try:
        app()
    except (OperationalError, InterfaceError) as exc:
        typer.echo(f"error: the database cannot be reached: {str(exc.orig).splitlines()[0]}", err=True)
        raise SystemExit(1) from None
