"""keeping in sync: indexes for updated_since and the equipment sort and search; the events count

`updated_at` of the records clients sync (equipment, employees, departments, orders,
transactions) gets the database's clock as its default, so Core inserts that leave it out still
stamp it, and an index `(company_id, updated_at, id)` that walks a company's changes in order.
The equipment list gains an index for sort=name and trigram GIN indexes (pg_trgm) for `q` on
PostgreSQL; on SQLite those are plain indexes, and SQLAlchemy's default stamps `updated_at`.

`event_counts` keeps each company's number of events, counted once here and then by a trigger on
every insert into `events`, so the activity log's unfiltered pages need not count the log.

Revision ID: 0009
Revises: 0005
Create Date: 2026-11-24 23:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0005"
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


# Deferred to the commit, so the counter row's lock comes after every other lock the transaction
# takes (no lock-order deadlock) and lasts only for the commit; one shard per transaction.
COUNT_EVENT_FUNCTION = """
CREATE OR REPLACE FUNCTION count_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO event_counts (company_id, shard, count)
    VALUES (NEW.company_id, txid_current() % 16, 1)
    ON CONFLICT (company_id, shard) DO UPDATE SET count = event_counts.count + 1;
    RETURN NULL;
END
$$
"""
COUNT_EVENT_TRIGGER_POSTGRESQL = """
CREATE CONSTRAINT TRIGGER events_counted AFTER INSERT ON events
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION count_event()
"""
# SQLite has one writer at a time: a plain trigger, one row per company.
COUNT_EVENT_TRIGGER_SQLITE = """
CREATE TRIGGER events_counted AFTER INSERT ON events FOR EACH ROW BEGIN
    INSERT INTO event_counts (company_id, shard, count) VALUES (NEW.company_id, 0, 1)
    ON CONFLICT (company_id, shard) DO UPDATE SET count = count + 1;
END
"""


def _postgresql() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def upgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "event_counts",
        sa.Column("shard", sa.Integer(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("company_id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["company_id"], ["companies.id"], name="fk_event_counts_company_id_companies", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("company_id", "shard", name="pk_event_counts"),
    )
    op.create_index("ix_event_counts_company_id", "event_counts", ["company_id"])
    # The events so far, counted once; from here on every insert of an event adds to them.
    op.execute(
        "INSERT INTO event_counts (company_id, shard, count)"
        " SELECT company_id, 0, count(*) FROM events GROUP BY company_id"
    )
    if postgresql:
        op.execute(COUNT_EVENT_FUNCTION)
        op.execute(COUNT_EVENT_TRIGGER_POSTGRESQL)
    else:
        op.execute(COUNT_EVENT_TRIGGER_SQLITE)
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
    op.execute("DROP TRIGGER IF EXISTS events_counted" + (" ON events" if _postgresql() else ""))
    if _postgresql():
        op.execute("DROP FUNCTION IF EXISTS count_event()")
    op.drop_index("ix_event_counts_company_id", table_name="event_counts")
    op.drop_table("event_counts")
    for table, column in TRIGRAM:
        op.drop_index(f"ix_{table}_{column}_trgm", table_name=table)
    op.drop_index("ix_equipment_company_title", table_name="equipment")
    for table in SYNCED:
        op.drop_index(f"ix_{table}_company_updated", table_name=table)
        if op.get_bind().dialect.name == "postgresql":
            op.alter_column(table, "updated_at", server_default=None)
