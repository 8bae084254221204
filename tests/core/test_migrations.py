"""The migrations build exactly the schema the models describe, on both databases."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from fastapi.testclient import TestClient
from sqlalchemy import Engine, String, Uuid, column, select, table, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.catalog.reference import sync_reference_data
from outfitter.config import Settings
from outfitter.core.tokens import create_company, issue_token
from outfitter.db.base import Money, UTCDateTime
from outfitter.db.session import make_engine
from outfitter.migrations import alembic_config, is_current, upgrade
from outfitter.models import Country, FeeSchedule, metadata

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


def test_migrated_schema_matches_the_models(engine: Engine) -> None:
    with engine.connect() as connection:
        differences = compare_metadata(
            MigrationContext.configure(connection, opts={"compare_type": True}), metadata
        )
    assert differences == []


def test_upgrade_is_idempotent_and_current(engine: Engine) -> None:
    upgrade(engine)  # a second run changes nothing and fails on nothing
    assert is_current(engine)


def _fresh_database(database_url: str, tmp_path: Path) -> tuple[str, Callable[[], None]]:
    """An empty database of the same kind as the suite's."""
    if database_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'old.db'}", lambda: None
    from tests.conftest import _create_postgres_database

    created = _create_postgres_database()
    assert created is not None
    url, admin = created

    def drop() -> None:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))
        admin.dispose()

    return url, drop


def test_0005_gives_existing_orders_a_kind_a_status_and_a_first_stage(
    database_url: str, tmp_path: Path
) -> None:
    """An order written by the code of revision 0003 reads back through the API after the upgrade:
    in_progress, its kind from its transaction's, each item at order_placed since the order's time."""
    url, drop = _fresh_database(database_url, tmp_path)
    old = make_engine(url)
    try:
        config = alembic_config()
        with old.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0003")
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

        application = create_app(Settings(database_url=url, rate_limit="off", public_url="http://testserver"))
        with TestClient(application) as client:
            headers = {"Authorization": f"Bearer {token}"}
            order = client.get(f"/api/v2/client/orders/{ids['order']}", headers=headers).json()["data"]
            listed = client.get("/api/v2/client/transactions", headers=headers).json()["data"]["data"]
        application.state.engine.dispose()
        assert (order["kind"], order["status"]) == ("purchase", "in_progress")
        assert order["items"][0]["stage"] == "order_placed"
        assert order["items"][0]["stages"] == [
            {"stage": "order_placed", "at": "2026-01-02T03:04:05.000000Z", "note": None}
        ]
        assert listed[0]["kind"] == "catalog" and listed[0]["retrieval_fee"] == "0.00"
    finally:
        old.dispose()
        drop()
