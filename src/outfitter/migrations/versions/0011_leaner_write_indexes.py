"""leaner indexes on the tables every write inserts into

The records clients sync (equipment, employees, departments, orders, transactions) are only ever
read within their company, through indexes led by `(company_id, created_at, id)` and
`(company_id, updated_at, id)`; their own single-column indexes on `company_id` and `created_at`
served no query and cost every insert (deleting a company finds its rows through the composite
ones). `events` likewise loses `company_id`'s own index. The equipment's `assignee_id` and
`asset_order_id` indexes keep only the rows where they are set: most devices have neither, and a
lookup by value (`= x`, `IN`, the foreign keys' `SET NULL`) still uses them.

Each index is dropped and made in this migration's transaction, which holds each table against
writes until it commits (the two partial indexes are built anew): on a large database, run it when
writes can wait a moment.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27 12:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SYNCED = ("equipment", "employees", "departments", "orders", "transactions")
SET_ONLY = ("assignee_id", "asset_order_id")  # columns of `equipment`


def upgrade() -> None:
    for table in SYNCED:
        op.drop_index(f"ix_{table}_company_id", table_name=table)
        op.drop_index(f"ix_{table}_created_at", table_name=table)
    op.drop_index("ix_events_company_id", table_name="events")
    for column in SET_ONLY:
        where = sa.text(f"{column} IS NOT NULL")
        op.drop_index(f"ix_equipment_{column}", table_name="equipment")
        op.create_index(
            f"ix_equipment_{column}", "equipment", [column], postgresql_where=where, sqlite_where=where
        )


def downgrade() -> None:
    for column in SET_ONLY:
        op.drop_index(f"ix_equipment_{column}", table_name="equipment")
        op.create_index(f"ix_equipment_{column}", "equipment", [column])
    op.create_index("ix_events_company_id", "events", ["company_id"])
    for table in SYNCED:
        op.create_index(f"ix_{table}_created_at", table, ["created_at"])
        op.create_index(f"ix_{table}_company_id", table, ["company_id"])
