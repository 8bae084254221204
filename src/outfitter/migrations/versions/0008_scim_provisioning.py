"""SCIM provisioning: the identity provider's ids on employees and departments, the manager and
department label of the enterprise extension, and each company's SCIM settings (scim_settings)

Revision ID: 0008
Revises: 0005
Create Date: 2026-11-24 23:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import outfitter.db.base

revision: str = "0008"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMNs (see 0005): nullable, or NOT NULL with a server default; unique indexes
    # rather than constraints, and no foreign keys: SQLite cannot add either to an existing table
    # (the service checks the manager and the country instead).
    op.add_column("employees", sa.Column("user_name", sa.String(length=320), nullable=True))
    op.add_column("employees", sa.Column("external_id", sa.String(length=255), nullable=True))
    op.add_column(
        "employees",
        sa.Column("manager_id", sa.Uuid(), nullable=True),
    )
    op.add_column("employees", sa.Column("department_name", sa.String(length=200), nullable=True))
    op.add_column(
        "employees",
        sa.Column("deprovisioned_at", outfitter.db.base.UTCDateTime(timezone=True), nullable=True),
    )
    op.create_index("uq_employees_company_user_name", "employees", ["company_id", "user_name"], unique=True)
    op.create_index(
        "uq_employees_company_external_id", "employees", ["company_id", "external_id"], unique=True
    )
    op.add_column("departments", sa.Column("external_id", sa.String(length=255), nullable=True))
    op.create_index(
        "uq_departments_company_external_id", "departments", ["company_id", "external_id"], unique=True
    )
    op.create_table(
        "scim_settings",
        sa.Column("company_id", sa.Uuid(), nullable=False),
        sa.Column("offboard_retrieval", sa.Boolean(), nullable=False),
        sa.Column("default_country", sa.String(length=2), nullable=True),
        sa.Column("updated_at", outfitter.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["company_id"],
            ["companies.id"],
            name=op.f("fk_scim_settings_company_id_companies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("company_id", name=op.f("pk_scim_settings")),
    )


def downgrade() -> None:
    op.drop_table("scim_settings")
    op.drop_index("uq_departments_company_external_id", table_name="departments")
    with op.batch_alter_table("departments") as batch:
        batch.drop_column("external_id")
    op.drop_index("uq_employees_company_external_id", table_name="employees")
    op.drop_index("uq_employees_company_user_name", table_name="employees")
    with op.batch_alter_table("employees") as batch:
        for name in ("deprovisioned_at", "department_name", "manager_id", "external_id", "user_name"):
            batch.drop_column(name)
