"""the pending deliveries indexed by endpoint, for a claim that takes each endpoint's due ones in turn

The workers claimed the oldest due deliveries of all companies through one index of (status,
next_attempt_at), leaving out the endpoints and companies whose share they already held. With one
company's backlog of 660,000 deliveries, every claim that left that company out walked its whole
backlog first (a second a claim), and another company's delivery waited 15-30 s. On PostgreSQL the
claim now visits each endpoint that has pending deliveries (a skip scan of this index) and takes
that endpoint's oldest due ones (webhooks.dispatch.claim_deliveries): a backlog costs only its own
endpoint. Partial: only pending rows, which are few beside those delivered or failed. The index of
(status, next_attempt_at) goes: PostgreSQL's planner, taking an endpoint's share of a backlog for
half the table, chose it for the claim and walked the backlog again (80 ms against 1.4 ms at
660,000 pending), and nothing else reads it there.

PostgreSQL only; SQLite's one writer claims as before.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28 18:30:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        "CREATE INDEX ix_webhook_deliveries_pending_endpoint_due ON webhook_deliveries "
        "(endpoint_id, next_attempt_at) WHERE status = 'pending'"
    )
    op.execute("DROP INDEX ix_webhook_deliveries_status_due")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        "CREATE INDEX ix_webhook_deliveries_status_due ON webhook_deliveries (status, next_attempt_at)"
    )
    op.execute("DROP INDEX ix_webhook_deliveries_pending_endpoint_due")
