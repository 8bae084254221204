"""operations: workers' heartbeats, and the trace id on events and webhook deliveries

`worker_heartbeats` holds one row per running worker, stamped every few seconds (worker.status):
`outfitter status` and /readyz count the workers alive. `events.trace_id` and
`webhook_deliveries.trace_id` keep the W3C trace of the request that caused them (core.tracing),
which each delivery sends as `traceparent`; NULL for rows written before, or outside a request.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-08 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import outfitter.db.base

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Time = outfitter.db.base.UTCDateTime


def upgrade() -> None:
    op.create_table(
        "worker_heartbeats",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", Time(), nullable=False),
        sa.Column("beat_at", Time(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_worker_heartbeats")),
    )
    for table in ("events", "webhook_deliveries"):
        with op.batch_alter_table(table) as batch_op:
            batch_op.add_column(sa.Column("trace_id", sa.String(length=32), nullable=True))


def downgrade() -> None:
    for table in ("webhook_deliveries", "events"):
        with op.batch_alter_table(table) as batch_op:
            batch_op.drop_column("trace_id")
    op.drop_table("worker_heartbeats")
