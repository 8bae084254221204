"""the company-scoped tables are analyzed after every 5,000 changed rows, whatever their size

PostgreSQL plans each company's reads from the table's statistics, which autovacuum refreshes once
50 rows plus a tenth of the table have changed since the last ANALYZE. On a large table that
lets a company grow by a great many rows unseen: a new company that imported 50,000 devices into a
table of 1,000,000 stays estimated at one row until 100,000 rows have changed, and its list pages
took 170-340 ms each instead of 4-12 ms (docs/operations.md). With a fixed threshold of 5,000 rows
and no share of the table, autovacuum analyzes these tables within a minute of any such growth.
ANALYZE reads a sample of the same size whatever the table's (30,000 rows at the default
statistics target), so a busy table pays a fraction of a second of one background worker every
5,000 changes.

PostgreSQL only (per-table autovacuum settings); nothing on SQLite.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27 15:40:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The tables whose reads are planned per company: the lists clients page through and the activity log.
COMPANY_LISTED = ("equipment", "employees", "departments", "orders", "transactions", "events")


ANALYZE_BY_ROWS = {"autovacuum_analyze_scale_factor": 0, "autovacuum_analyze_threshold": 5000}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    settings = ", ".join(f"{name} = {value}" for name, value in ANALYZE_BY_ROWS.items())
    for table in COMPANY_LISTED:
        op.execute(f"ALTER TABLE {table} SET ({settings})")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in COMPANY_LISTED:
        op.execute(f"ALTER TABLE {table} RESET ({', '.join(ANALYZE_BY_ROWS)})")
