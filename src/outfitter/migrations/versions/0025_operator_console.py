"""the operator console: its users and sessions, and suspended companies

Operators (the service's own staff) get tables of their own, apart from the companies' console
users: `operator_users` (invited by `outfitter operator invite`, TOTP required) and
`operator_sessions`. A suspended company has a row in `company_suspensions` (the companies table
itself is left as it was): while it is there, the company's tokens and console sessions are
refused.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-08 00:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import outfitter.db.base

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Time = outfitter.db.base.UTCDateTime


def upgrade() -> None:
    op.create_table(
        "company_suspensions",
        sa.Column("company_id", sa.Uuid(), nullable=False),
        sa.Column("suspended_at", Time(timezone=True), nullable=False),
        sa.Column("suspended_by", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["company_id"],
            ["companies.id"],
            name=op.f("fk_company_suspensions_company_id_companies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("company_id", name=op.f("pk_company_suspensions")),
    )
    op.create_table(
        "operator_users",
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("password_hash", sa.String(length=200), nullable=True),
        sa.Column("invite_hash", sa.String(length=64), nullable=True),
        sa.Column("invite_expires_at", Time(timezone=True), nullable=True),
        sa.Column("deactivated_at", Time(timezone=True), nullable=True),
        sa.Column("totp_secret", sa.String(length=255), nullable=True),
        sa.Column("totp_enabled_at", Time(timezone=True), nullable=True),
        sa.Column("totp_last_step", sa.BigInteger(), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", Time(timezone=True), nullable=False),
        sa.Column("updated_at", Time(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_operator_users")),
        sa.UniqueConstraint("email", name=op.f("uq_operator_users_email")),
        sa.UniqueConstraint("invite_hash", name=op.f("uq_operator_users_invite_hash")),
    )
    with op.batch_alter_table("operator_users") as batch_op:
        batch_op.create_index(batch_op.f("ix_operator_users_created_at"), ["created_at"], unique=False)
    op.create_table(
        "operator_sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("csrf_token", sa.String(length=64), nullable=False),
        sa.Column("created_at", Time(timezone=True), nullable=False),
        sa.Column("last_seen_at", Time(timezone=True), nullable=False),
        sa.Column("idle_expires_at", Time(timezone=True), nullable=False),
        sa.Column("expires_at", Time(timezone=True), nullable=False),
        sa.Column("user_agent", sa.String(length=300), nullable=True),
        sa.Column("awaiting_code", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["operator_users.id"],
            name=op.f("fk_operator_sessions_user_id_operator_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id_hash", name=op.f("pk_operator_sessions")),
    )
    with op.batch_alter_table("operator_sessions") as batch_op:
        batch_op.create_index(batch_op.f("ix_operator_sessions_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    op.drop_table("operator_sessions")
    op.drop_table("operator_users")
    op.drop_table("company_suspensions")
