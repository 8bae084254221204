"""the console's second factor (TOTP) and sessions a person can review

Console users gain a TOTP secret, when a code confirmed it, and the time step of the last code
accepted (a code is used once); sessions gain the browser's user agent and a flag for a sign-in
whose password was right and whose code is still to come (such a row signs no one in); each company
gains console settings (`require_totp`), a row only once an admin sets one.

Numbered 0020 after 0018 in its own branch: 0019 is another change's, made at the same time (the
merge orders the chain).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-08 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import outfitter.db.base

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Time = outfitter.db.base.UTCDateTime


def upgrade() -> None:
    with op.batch_alter_table("console_users") as batch_op:
        batch_op.add_column(sa.Column("totp_secret", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("totp_enabled_at", Time(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("totp_last_step", sa.BigInteger(), nullable=True))
    with op.batch_alter_table("console_sessions") as batch_op:
        batch_op.add_column(sa.Column("user_agent", sa.String(length=300), nullable=True))
        batch_op.add_column(
            sa.Column("awaiting_code", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_table(
        "console_settings",
        sa.Column("company_id", sa.Uuid(), nullable=False),
        sa.Column("require_totp", sa.Boolean(), nullable=False),
        sa.Column("updated_at", Time(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["company_id"],
            ["companies.id"],
            name=op.f("fk_console_settings_company_id_companies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("company_id", name=op.f("pk_console_settings")),
    )


def downgrade() -> None:
    op.drop_table("console_settings")
    with op.batch_alter_table("console_sessions") as batch_op:
        batch_op.drop_column("awaiting_code")
        batch_op.drop_column("user_agent")
    with op.batch_alter_table("console_users") as batch_op:
        batch_op.drop_column("totp_last_step")
        batch_op.drop_column("totp_enabled_at")
        batch_op.drop_column("totp_secret")
