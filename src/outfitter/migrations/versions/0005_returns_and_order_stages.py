"""returns and order stages: offboarding fees, transaction item destinations, order kinds and item stages

Existing orders (all paid: an order exists only for a fulfilled transaction) become `in_progress`
with their kind from their transaction's, and every item at its kind's first stage
(`order_placed`), reached at the order's `created_at`: their delivery was never tracked, so an
operator moves them on (or cancels them) with `outfitter orders`. Fee schedules of the currencies
that have defaults get the default offboarding fees; others get 0 until an operator sets them.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 14:56:08.105675
"""

from collections.abc import Sequence
from decimal import Decimal

import sqlalchemy as sa
from alembic import op

import outfitter.db.base

# Frozen copies (a migration must not change when the code does): payments/fees.py's defaults
# and the order kinds and first stages of models/payments.py at this revision.
OFFBOARD_FEES = {
    "USD": ("40.00", "20.00", "30.00"),
    "EUR": ("37.00", "18.00", "28.00"),
    "GBP": ("32.00", "16.00", "24.00"),
    "CAD": ("54.00", "27.00", "40.00"),
    "NGN": ("25000.00", "12000.00", "18000.00"),
    "KES": ("5500.00", "2700.00", "4000.00"),
    "GHS": ("480.00", "240.00", "360.00"),
    "ZAR": ("720.00", "360.00", "540.00"),
}
ORDER_KIND = {"catalog": "purchase", "storage": "storage_onboarding", "offboard": "retrieval"}
FIRST_STAGE = {
    "purchase": "order_placed",
    "storage_onboarding": "order_placed",
    "retrieval": "retrieval_scheduled",
}

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMNs, not batch mode: on SQLite batch mode copies the table, and dropping the
    # old one fails under foreign keys as soon as orders reference transactions. So every NOT NULL
    # column comes with a server default that holds for the existing rows (fees 0; the kind and
    # first stage are then set from each order's transaction below).
    money = outfitter.db.base.Money(precision=24, scale=6)
    for name in ("retrieval_fee_per_device", "inspection_fee_per_device", "storage_fee_per_device"):
        op.add_column("fee_schedules", sa.Column(name, money, nullable=False, server_default=sa.text("0")))
    for name in ("retrieval_fee", "inspection_fee", "storage_fee"):
        op.add_column("transactions", sa.Column(name, money, nullable=False, server_default=sa.text("0")))
    destination = sa.Enum("storage", "office", name="retrievaldestination", native_enum=False, length=20)
    op.add_column("transaction_items", sa.Column("destination", destination, nullable=True))
    op.add_column("order_items", sa.Column("destination", destination, nullable=True))
    stage = sa.Enum(
        "order_placed",
        "order_confirmed",
        "product_setup",
        "product_packaged",
        "order_in_transit",
        "order_delivered",
        "retrieval_scheduled",
        "picked_up",
        "in_transit",
        "received",
        "inspected",
        name="orderstage",
        native_enum=False,
        length=30,
    )
    op.add_column(
        "order_items", sa.Column("stage", stage, nullable=False, server_default=sa.text("'order_placed'"))
    )
    op.add_column(
        "order_items", sa.Column("stages", sa.JSON(), nullable=False, server_default=sa.text("'[]'"))
    )
    kind = sa.Enum(
        "purchase", "storage_onboarding", "retrieval", name="orderkind", native_enum=False, length=30
    )
    op.add_column("orders", sa.Column("kind", kind, nullable=False, server_default=sa.text("'purchase'")))

    _fill_existing_rows()

    if op.get_bind().dialect.name != "sqlite":
        # The code always writes these; only SQLite cannot drop a default without copying the table.
        op.alter_column("order_items", "stage", server_default=None)
        op.alter_column("order_items", "stages", server_default=None)
        op.alter_column("orders", "kind", server_default=None)


def _fill_existing_rows() -> None:
    connection = op.get_bind()
    money = outfitter.db.base.Money(precision=24, scale=6)
    fees = sa.table(
        "fee_schedules",
        sa.column("currency_code", sa.String),
        sa.column("retrieval_fee_per_device", money),
        sa.column("inspection_fee_per_device", money),
        sa.column("storage_fee_per_device", money),
    )
    for code, (retrieval, inspection, storage) in OFFBOARD_FEES.items():
        connection.execute(
            fees.update()
            .where(fees.c.currency_code == code)
            .values(
                retrieval_fee_per_device=Decimal(retrieval),
                inspection_fee_per_device=Decimal(inspection),
                storage_fee_per_device=Decimal(storage),
            )
        )
    transactions = sa.table("transactions", sa.column("id", sa.Uuid()), sa.column("kind", sa.String))
    orders = sa.table(
        "orders",
        sa.column("id", sa.Uuid()),
        sa.column("transaction_id", sa.Uuid()),
        sa.column("kind", sa.String),
        sa.column("status", sa.String),
        sa.column("created_at", outfitter.db.base.UTCDateTime()),
    )
    items = sa.table(
        "order_items",
        sa.column("order_id", sa.Uuid()),
        sa.column("stage", sa.String),
        sa.column("stages", sa.JSON()),
    )
    rows = connection.execute(
        sa.select(orders.c.id, orders.c.created_at, transactions.c.kind).join(
            transactions, transactions.c.id == orders.c.transaction_id
        )
    ).all()
    for order_id, created_at, transaction_kind in rows:
        kind = ORDER_KIND[transaction_kind]
        stage = FIRST_STAGE[kind]
        connection.execute(
            orders.update().where(orders.c.id == order_id).values(kind=kind, status="in_progress")
        )
        connection.execute(
            items.update()
            .where(items.c.order_id == order_id)
            .values(stage=stage, stages=[{"stage": stage, "at": created_at.isoformat(), "note": None}])
        )


def downgrade() -> None:
    # Orders go back to the one status the old code knows.
    op.execute("UPDATE orders SET status = 'Completed'")
    # ### commands auto generated by Alembic - please adjust! ###
    with op.batch_alter_table("transactions", schema=None) as batch_op:
        batch_op.drop_column("storage_fee")
        batch_op.drop_column("inspection_fee")
        batch_op.drop_column("retrieval_fee")

    with op.batch_alter_table("transaction_items", schema=None) as batch_op:
        batch_op.drop_column("destination")

    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.drop_column("kind")

    with op.batch_alter_table("order_items", schema=None) as batch_op:
        batch_op.drop_column("stages")
        batch_op.drop_column("stage")
        batch_op.drop_column("destination")

    with op.batch_alter_table("fee_schedules", schema=None) as batch_op:
        batch_op.drop_column("storage_fee_per_device")
        batch_op.drop_column("inspection_fee_per_device")
        batch_op.drop_column("retrieval_fee_per_device")

    # ### end Alembic commands ###
