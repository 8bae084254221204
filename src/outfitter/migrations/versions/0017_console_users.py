"""the web console's users and their server-side sessions

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07 17:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import outfitter.db.base

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Time = outfitter.db.base.UTCDateTime


def upgrade() -> None:
    op.create_table(
        "console_users",
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column(
            "role",
            sa.Enum("admin", "viewer", name="consolerole", native_enum=False, length=16),
            nullable=False,
        ),
        sa.Column("password_hash", sa.String(length=200), nullable=True),
        sa.Column("invite_hash", sa.String(length=64), nullable=True),
        sa.Column("invite_expires_at", Time(timezone=True), nullable=True),
        sa.Column("deactivated_at", Time(timezone=True), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("company_id", sa.Uuid(), nullable=False),
        sa.Column("created_at", Time(timezone=True), nullable=False),
        sa.Column("updated_at", Time(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["company_id"],
            ["companies.id"],
            name=op.f("fk_console_users_company_id_companies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_console_users")),
        sa.UniqueConstraint("email", name=op.f("uq_console_users_email")),
        sa.UniqueConstraint("invite_hash", name=op.f("uq_console_users_invite_hash")),
    )
    with op.batch_alter_table("console_users", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_console_users_company_id"), ["company_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_console_users_created_at"), ["created_at"], unique=False)
        batch_op.create_index("uq_console_users_company_id_id", ["company_id", "id"], unique=True)

    op.create_table(
        "console_sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("csrf_token", sa.String(length=64), nullable=False),
        sa.Column("created_at", Time(timezone=True), nullable=False),
        sa.Column("last_seen_at", Time(timezone=True), nullable=False),
        sa.Column("idle_expires_at", Time(timezone=True), nullable=False),
        sa.Column("expires_at", Time(timezone=True), nullable=False),
        sa.Column("company_id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["company_id"],
            ["companies.id"],
            name=op.f("fk_console_sessions_company_id_companies"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["company_id", "user_id"],
            ["console_users.company_id", "console_users.id"],
            name="fk_console_sessions_user_id_console_users",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id_hash", name=op.f("pk_console_sessions")),
    )
    with op.batch_alter_table("console_sessions", schema=None) as batch_op:
        batch_op.create_index("ix_console_sessions_user", ["user_id"], unique=False)


def downgrade() -> None:
    op.drop_table("console_sessions")
    op.drop_table("console_users")
