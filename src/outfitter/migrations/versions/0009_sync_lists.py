"""keeping in sync: indexes for updated_since and the equipment sort and search

`updated_at` of the records clients sync (equipment, employees, departments, orders,
transactions) gets the database's clock as its default, so Core inserts that leave it out still
stamp it, and an index `(company_id, updated_at, id)` that walks a company's changes in order.
The equipment list gains an index for sort=name and trigram GIN indexes (pg_trgm) for `q` on
PostgreSQL; on SQLite those are plain indexes, and SQLAlchemy's default stamps `updated_at`.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24 23:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SYNCED = ("equipment", "employees", "departments", "orders", "transactions")
TRIGRAM = (
    ("equipment", "title"),
    ("equipment", "serial_number"),
    ("employees", "first_name"),
    ("employees", "last_name"),
    ("employees", "email"),
)


def upgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    if postgresql:
        op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for table in SYNCED:
        if postgresql:  # SQLite would rebuild the table; SQLAlchemy's own default covers it there
            op.alter_column(table, "updated_at", server_default=sa.func.now())
        op.create_index(f"ix_{table}_company_updated", table, ["company_id", "updated_at", "id"])
    op.create_index("ix_equipment_company_title", "equipment", ["company_id", "title", "id"])
    for table, column in TRIGRAM:
        op.create_index(
            f"ix_{table}_{column}_trgm",
            table,
            [column],
            postgresql_using="gin",
            postgresql_ops={column: "gin_trgm_ops"},
        )


def downgrade() -> None:
    for table, column in TRIGRAM:
        op.drop_index(f"ix_{table}_{column}_trgm", table_name=table)
    op.drop_index("ix_equipment_company_title", table_name="equipment")
    for table in SYNCED:
        op.drop_index(f"ix_{table}_company_updated", table_name=table)
        if op.get_bind().dialect.name == "postgresql":
            op.alter_column(table, "updated_at", server_default=None)
