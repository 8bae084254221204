"""webhook endpoints: the most deliveries in flight to each at once, as its company sets it

A worker capped each endpoint at a quarter of its sends even when nothing else waited; now a quick
endpoint may use every place no other delivery can take, up to this limit (16 unless the company
sets 1-64 through the API: worker.scheduling, docs/webhooks.md). Existing endpoints take the
default.

Numbered 0017: 0016 is another change's, made at the same time (the merge orders the chain).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07 17:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("webhook_endpoints") as batch_op:
        batch_op.add_column(
            sa.Column("concurrency", sa.Integer(), nullable=False, server_default=sa.text("16"))
        )


def downgrade() -> None:
    with op.batch_alter_table("webhook_endpoints") as batch_op:
        batch_op.drop_column("concurrency")
