"""custom fields: the definitions a company makes, and one JSON column of values per record table

`custom_field_definitions` holds each company's fields (device, employee); `equipment`
and `employees` gain `custom_fields` (JSONB on PostgreSQL, with a GIN `jsonb_path_ops`
index for the `cf_key=value` filters) and `sensitive_fields` (the sensitive fields' values, kept
apart so that no answer, export or webhook can carry them by accident; never filtered, no index).

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-08 00:00:00.000000
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

import outfitter.db.base

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Time = outfitter.db.base.UTCDateTime
RECORD_TABLES = ("equipment", "employees")


def _values() -> Any:
    return sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "custom_field_definitions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("company_id", sa.Uuid(), nullable=False),
        sa.Column("entity", sa.String(length=20), nullable=False),
        sa.Column("key", sa.String(length=50), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=False),
        sa.Column("type", sa.String(length=20), nullable=False),
        sa.Column("required", sa.Boolean(), nullable=False),
        sa.Column("default", sa.JSON(), nullable=True),
        sa.Column("pattern", sa.String(length=500), nullable=True),
        sa.Column("minimum", sa.String(length=50), nullable=True),
        sa.Column("maximum", sa.String(length=50), nullable=True),
        sa.Column("choices", sa.JSON(), nullable=False),
        sa.Column("sensitive", sa.Boolean(), nullable=False),
        sa.Column("device_types", sa.JSON(), nullable=False),
        sa.Column("created_at", Time(timezone=True), nullable=False),
        sa.Column("updated_at", Time(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["company_id"],
            ["companies.id"],
            name=op.f("fk_custom_field_definitions_company_id_companies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_custom_field_definitions")),
        sa.UniqueConstraint(
            "company_id", "entity", "key", name=op.f("uq_custom_field_definitions_company_id_entity_key")
        ),
    )
    op.create_index(
        "uq_custom_field_definitions_company_id_id",
        "custom_field_definitions",
        ["company_id", "id"],
        unique=True,
    )
    op.create_index(
        op.f("ix_custom_field_definitions_created_at"), "custom_field_definitions", ["created_at"]
    )
    for table in RECORD_TABLES:
        for column in ("custom_fields", "sensitive_fields"):
            op.add_column(table, sa.Column(column, _values(), nullable=False, server_default=sa.text("'{}'")))
    if op.get_bind().dialect.name == "postgresql":
        for table in RECORD_TABLES:
            op.create_index(
                f"ix_{table}_custom_fields",
                table,
                ["custom_fields"],
                postgresql_using="gin",
                postgresql_ops={"custom_fields": "jsonb_path_ops"},
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in RECORD_TABLES:
            op.drop_index(f"ix_{table}_custom_fields", table_name=table)
    for table in RECORD_TABLES:
        op.drop_column(table, "sensitive_fields")  # SQLite 3.35+ drops a column in place
        op.drop_column(table, "custom_fields")
    op.drop_index(op.f("ix_custom_field_definitions_created_at"), table_name="custom_field_definitions")
    op.drop_index("uq_custom_field_definitions_company_id_id", table_name="custom_field_definitions")
    op.drop_table("custom_field_definitions")
