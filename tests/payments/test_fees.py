"""The fee schedule: a worked example pinned to the cent, half-up rounding, and the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from outfitter.cli import app as cli
from outfitter.config import get_settings
from outfitter.models import FeeSchedule, PaymentMethod
from outfitter.payments.fees import compute_charges, schedule_for
from tests.factories import Api, assert_error
from tests.payments.conftest import add_employee, prices

runner = CliRunner()


def usd_schedule() -> FeeSchedule:
    return FeeSchedule(
        currency_code="USD",
        insurance_percent=Decimal("3"),
        platform_percent=Decimal("5"),
        gateway_percent=Decimal("1.5"),
        onboarding_fee_per_device=Decimal("25.00"),
        device_config_fee_per_device=Decimal("15.00"),
    )


def test_worked_example_two_laptops_and_a_dock_by_card() -> None:
    # 2 x 1999.00 + 229.00 = 4227.00 of equipment, 3 devices, the default USD schedule.
    charges = compute_charges(usd_schedule(), 2, Decimal("4227.00"), 3, PaymentMethod.CARD)
    assert charges.amount == Decimal("4227.00")
    assert charges.insurance == Decimal("126.81")  # 3 % of 4227.00
    assert charges.platform_fee == Decimal("211.35")  # 5 % of 4227.00
    assert charges.onboarding_fee == Decimal("75.00")  # 3 x 25.00
    assert charges.device_config_fee == Decimal("45.00")  # 3 x 15.00
    assert charges.gateway_fee == Decimal("70.28")  # 1.5 % of 4685.16 = 70.2774
    assert charges.total_amount == Decimal("4755.44")


def test_credit_pays_no_gateway_fee() -> None:
    charges = compute_charges(usd_schedule(), 2, Decimal("4227.00"), 3, PaymentMethod.CREDIT)
    assert charges.gateway_fee == Decimal("0.00")
    assert charges.total_amount == Decimal("4685.16")


def test_rounding_is_half_up_to_the_minor_unit() -> None:
    # 5 % of 10.50 is 0.525: half-up gives 0.53 (banker's rounding would give 0.52).
    charges = compute_charges(usd_schedule(), 2, Decimal("10.50"), 0, PaymentMethod.CREDIT)
    assert charges.platform_fee == Decimal("0.53")
    assert charges.insurance == Decimal("0.32")  # 0.315 -> 0.32


def test_the_worked_example_through_the_api(api: Api, db: Session) -> None:
    employee = add_employee(db, api.company_id)
    listed = prices(api, "NG", "USD")
    laptop = next(r for r in listed if r["asset_pricing"]["amount"] == "1999.00")
    dock = next(r for r in listed if r["asset_code"] == "ANK-777")
    response = api.post(
        "/client/transactions/initiate",
        {
            "payment_method": "Card",
            "employee_country_id": "NG",
            "orders": {
                str(employee): [
                    {"asset_pricing_id": laptop["asset_pricing"]["id"], "quantity": 2},
                    {"asset_pricing_id": dock["asset_pricing"]["id"]},
                ]
            },
        },
    )
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["currency"] == "USD"
    assert {
        key: data[key] for key in ("amount", "insurance", "platform_fee", "gateway_fee", "total_amount")
    } == {
        "amount": 4227.0,
        "insurance": 126.81,
        "platform_fee": 211.35,
        "gateway_fee": 70.28,
        "total_amount": 4755.44,
    }
    assert (data["onboarding_fee"], data["device_config_fee"]) == (75.0, 45.0)


def test_default_schedule_covers_the_required_currencies(db: Session) -> None:
    for code in ("USD", "EUR", "GBP", "NGN", "KES", "GHS", "ZAR"):
        schedule = schedule_for(db, code, "orders")
        assert schedule.onboarding_fee_per_device > 0 and schedule.device_config_fee_per_device > 0


def test_a_currency_without_a_schedule_is_422_naming_it(api: Api, db: Session) -> None:
    db.query(FeeSchedule).filter(FeeSchedule.currency_code == "KES").delete()
    db.commit()
    employee = add_employee(db, api.company_id, "KE")
    pricing = prices(api, "KE", "KES")[0]["asset_pricing"]["id"]
    body = {
        "payment_method": "Card",
        "employee_country_id": "KE",
        "orders": {str(employee): [{"asset_pricing_id": pricing}]},
    }
    assert_error(api.post("/client/transactions/initiate", body), 422, "KES")


@pytest.fixture
def cli_database(monkeypatch: pytest.MonkeyPatch, database_url: str, engine: Engine) -> Iterator[None]:
    monkeypatch.setenv("OUTFITTER_DATABASE_URL", database_url)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_cli_fees_show_and_set(cli_database: None) -> None:
    result = runner.invoke(cli, ["fees", "show", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["currency"]: row for row in json.loads(result.stdout)["fee_schedules"]}
    assert rows["USD"] == {
        "currency": "USD",
        "insurance_percent": "3",
        "platform_percent": "5",
        "gateway_percent": "1.5",
        "onboarding_fee": "25.00",
        "device_config_fee": "15.00",
        "retrieval_fee": "40.00",
        "inspection_fee": "20.00",
        "storage_fee": "30.00",
    }
    assert all(Decimal(row[name]) > 0 for row in rows.values() for name in ("retrieval_fee", "storage_fee"))
    result = runner.invoke(
        cli, ["fees", "set", "usd", "--gateway-percent", "2.25", "--onboarding-fee", "30", "--json"]
    )
    assert result.exit_code == 0, result.output
    changed = json.loads(result.stdout)
    assert changed["gateway_percent"] == "2.25" and changed["onboarding_fee"] == "30.00"
    assert changed["insurance_percent"] == "3" and changed["retrieval_fee"] == "40.00"
    result = runner.invoke(
        cli, ["fees", "set", "USD", "--retrieval-fee", "45.5", "--inspection-fee", "0", "--storage-fee", "35"]
    )
    assert result.exit_code == 0, result.output
    shown = runner.invoke(cli, ["fees", "show"]).stdout
    assert "retrieval/device" in shown and "45.50" in shown and "35.00" in shown
    result = runner.invoke(cli, ["fees", "set", "USD", "--storage-fee", "abc"])
    assert result.exit_code == 1 and "storage-fee" in result.stderr
    result = runner.invoke(cli, ["fees", "set", "USD", "--platform-percent", "101"])
    assert result.exit_code == 1 and "platform-percent" in result.stderr
    result = runner.invoke(cli, ["fees", "set", "XXQ"])
    assert result.exit_code == 1 and "unknown currency" in result.stderr


def test_cli_wallet_credit(cli_database: None, api: Api) -> None:
    result = runner.invoke(cli, ["wallet", "credit", str(api.company_id), "ngn", "1500.50", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["balance"] == "1500.50"
    wallet = api.get("/client/wallet").json()["data"]
    assert wallet["balances"][0]["currency"] == "NGN" and wallet["balances"][0]["balance"] == "1500.50"
    result = runner.invoke(cli, ["wallet", "credit", str(api.company_id), "NGN", "0"])
    assert result.exit_code == 1 and "greater than zero" in result.stderr
    result = runner.invoke(cli, ["wallet", "credit", str(api.company_id), "NGN", "1.001"])
    assert result.exit_code == 1 and "decimal places" in result.stderr
