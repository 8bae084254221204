"""a kept count of each company's events, for the activity log's unfiltered total

`event_counts` holds a company's count as of the worker's last fold; `event_count_deltas` is
append-only: on PostgreSQL, statement triggers on `events` (transition tables, so COPY too) append
one row per (statement, company) with the rows it inserted (+) or deleted (-), and a TRUNCATE
clears both. The worker folds the deltas into the counts. Existing events are counted here, after
the triggers exist: CREATE TRIGGER locks `events` against writes until this transaction commits,
so no event is counted twice or missed. SQLite gets the tables only (it counts the log directly).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25 01:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (trigger, event, transition table, its sign): one function each, as a trigger with a transition
# table serves one event only.
COUNTED = (
    ("events_count_inserted", "INSERT", "NEW TABLE AS changed", ""),
    ("events_count_deleted", "DELETE", "OLD TABLE AS changed", "-"),
)
TRIGGERS = """
CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO event_count_deltas (company_id, delta)
    SELECT company_id, {sign}count(*) FROM changed GROUP BY company_id;
    RETURN NULL;
END $$;
CREATE TRIGGER {name} AFTER {event} ON events REFERENCING {table}
    FOR EACH STATEMENT EXECUTE FUNCTION {name}();
"""
TRUNCATE_TRIGGER = """
CREATE FUNCTION events_count_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM event_count_deltas;
    DELETE FROM event_counts;
    RETURN NULL;
END $$;
CREATE TRIGGER events_count_truncated AFTER TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_count_truncated();
"""
BACKFILL = """
INSERT INTO event_counts (company_id, events)
SELECT company_id, count(*) FROM events GROUP BY company_id
"""


def upgrade() -> None:
    op.create_table(
        "event_counts",
        sa.Column("company_id", sa.Uuid(), nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["company_id"],
            ["companies.id"],
            name=op.f("fk_event_counts_company_id_companies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("company_id", name=op.f("pk_event_counts")),
    )
    op.create_table(
        "event_count_deltas",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("company_id", sa.Uuid(), nullable=False),
        sa.Column("delta", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_count_deltas")),
    )
    op.create_index(op.f("ix_event_count_deltas_company_id"), "event_count_deltas", ["company_id"])
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, event, table, sign in COUNTED:
        op.execute(TRIGGERS.format(name=name, event=event, table=table, sign=sign))
    op.execute(TRUNCATE_TRIGGER)
    op.execute(BACKFILL)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name in (*(name for name, *_ in COUNTED), "events_count_truncated"):
            op.execute(f"DROP TRIGGER {name} ON events")
            op.execute(f"DROP FUNCTION {name}()")
    op.drop_index(op.f("ix_event_count_deltas_company_id"), table_name="event_count_deltas")
    op.drop_table("event_count_deltas")
    op.drop_table("event_counts")
