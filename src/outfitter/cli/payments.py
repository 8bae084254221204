"""Payments: `wallet credit/show`, `fees show/set` and `payments anomalies/resolve/reconcile`."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Annotated, Any

import typer

from outfitter.cli.common import (
    JsonFlag,
    app,
    emit,
    fail,
    iso_or_none,
    parse_id,
    require_current_schema,
    unit_of_work,
)

wallet_app = typer.Typer(help="Company credit wallets.", no_args_is_help=True)
fees_app = typer.Typer(help="The fee schedule, per currency.", no_args_is_help=True)
payments_app = typer.Typer(help="Payments and their gateways.", no_args_is_help=True)
app.add_typer(wallet_app, name="wallet")
app.add_typer(fees_app, name="fees")
app.add_typer(payments_app, name="payments")


def parse_amount(value: str) -> Decimal:
    from outfitter.core.money import MAX_AMOUNT, decimal_text, storable

    amount = decimal_text(value)
    if amount is None:
        fail(f"AMOUNT must be a decimal number such as 1500.00 (digits 0-9 and a point), got {value!r}")
    if amount <= 0:
        fail("AMOUNT must be greater than zero")
    if not storable(amount):
        fail(f"AMOUNT must be below {MAX_AMOUNT:,}")
    return amount


# "-5" is an amount to refuse in words, not an unknown option.
@wallet_app.command("credit", context_settings={"ignore_unknown_options": True})
def wallet_credit(
    company_id: str,
    currency: str,
    amount: str,
    reason: Annotated[
        str, typer.Option("--reason", help="Why: the company's ledger entry shows it, with 'operator'")
    ] = "Operator credit",
    as_json: JsonFlag = False,
) -> None:
    """Add credit to a company's wallet in CURRENCY (written to its ledger, with the reason)."""
    from outfitter.console.operator import actions
    from outfitter.core.errors import DomainError
    from outfitter.models import Company
    from outfitter.payments.fees import to_minor_units
    from outfitter.payments.orders import OPERATOR_ACTOR

    company_uuid = parse_id(company_id, "COMPANY_ID")
    value = parse_amount(amount)
    with unit_of_work() as session:
        if session.get(Company, company_uuid) is None:
            fail(f"no company with id {company_id}")
        try:
            entry = actions.credit(session, company_uuid, currency, value, reason, OPERATOR_ACTOR)
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


@wallet_app.command("show")
def wallet_show(company_id: str, as_json: JsonFlag = False) -> None:
    """Print a company's balance in each currency and its recent ledger entries, newest first."""
    from outfitter.db.tenancy import bind_company
    from outfitter.models import Company
    from outfitter.payments.presenters import wallet_summary

    company_uuid = parse_id(company_id, "COMPANY_ID")
    with unit_of_work() as session:
        if session.get(Company, company_uuid) is None:
            fail(f"no company with id {company_id}")
        bind_company(session, company_uuid)
        payload = {"company_id": company_id, **wallet_summary(session).model_dump(mode="json")}
    balances = [f"{each['currency']} {each['balance']}" for each in payload["balances"]]
    entries = [
        f"  {each['created_at']}  {each['kind']:<6} {each['amount']:>14} {each['currency']}"
        f"  balance {each['balance_after']}  {each['description']}"
        + (f" ({each['tx_ref']})" if each["tx_ref"] else "")
        for each in payload["entries"]
    ]
    text = f"balances: {', '.join(balances) or 'none'}"
    if entries:
        text += "\nrecent entries, newest first:\n" + "\n".join(entries)
    emit(as_json, payload, text)


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
    """A percent (0 to 100, six decimals at most, as stored) or a flat fee (0 or more, below
    MAX_AMOUNT; its decimals are checked against the currency's once it is known)."""
    from outfitter.core.money import MAX_AMOUNT, decimal_text, storable

    if value is None:
        return None
    number = decimal_text(value)
    if number is None:
        fail(f"--{name} must be a decimal number such as 2.5 (digits 0-9 and a point), got {value!r}")
    if percent and not 0 <= number <= 100:
        fail(f"--{name} must be between 0 and 100")
    if not percent and not (number >= 0 and storable(number)):
        fail(f"--{name} must be 0 or more and below {MAX_AMOUNT:,}")
    if percent and number != number.quantize(Decimal("0.000001")):
        fail(f"--{name} has more than six decimal places, which is all a percent keeps")
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
        for name, value in values.items():
            if name.endswith("_per_device") and value is not None and value % found.quantum:
                option = name.removesuffix("_per_device").replace("_", "-")
                fail(f"--{option} has more decimals than {found.code} has ({found.minor_units})")
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
    from sqlalchemy import select

    from outfitter.catalog.reference import minor_units
    from outfitter.core.money import round_money
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
                "amount": format(round_money(anomaly.amount, minor_units(anomaly.currency_code)), "f"),
                "currency": anomaly.currency_code,
                "gateway_reference": anomaly.gateway_reference,
                "created_at": iso_or_none(anomaly.created_at),
                "resolved_at": iso_or_none(anomaly.resolved_at),
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
    """Mark a payment anomaly handled (refunded or fulfilled by hand): a `payment_anomaly.resolved`
    event."""
    from outfitter.console.operator import actions
    from outfitter.core.errors import NotFound
    from outfitter.payments.orders import OPERATOR_ACTOR

    anomaly_uuid = parse_id(anomaly_id, "ANOMALY_ID")
    with unit_of_work() as session:
        try:
            actions.resolve_anomaly(session, anomaly_uuid, OPERATOR_ACTOR)
        except NotFound:
            fail(f"no payment anomaly with id {anomaly_id}")
    typer.echo(f"payment anomaly {anomaly_id} resolved")


@payments_app.command("reconcile")
def payments_reconcile(as_json: JsonFlag = False) -> None:
    """Ask the gateways about Pending transactions: fulfil the paid, fail the declined, expire the old."""
    from outfitter.config import get_settings
    from outfitter.db.session import make_engine, make_sessionmaker
    from outfitter.db.tenancy import TenantSession
    from outfitter.payments.gateways import GatewayRegistry
    from outfitter.payments.reconcile import reconcile

    settings = get_settings()
    engine = make_engine(settings.database_url)
    try:
        require_current_schema(engine)
        sessions = make_sessionmaker(engine, TenantSession)
        summary = reconcile(sessions, GatewayRegistry(settings, sessions))
    finally:
        engine.dispose()
    payload = {
        "checked": summary.checked,
        "outcomes": summary.outcomes,
        "unreachable": summary.unreachable,
        "failed": summary.failed,
    }
    outcomes = ", ".join(f"{key}: {value}" for key, value in sorted(summary.outcomes.items())) or "none"
    failed = f"; could not be settled: {summary.failed} (the log says why; Pending)" if summary.failed else ""
    emit(
        as_json,
        payload,
        f"checked {summary.checked} pending transaction(s); {outcomes}; unreachable: {summary.unreachable}"
        + failed,
    )
    if summary.failed:
        raise typer.Exit(1)
