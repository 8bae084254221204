"""locations: a tree of locations per company; a device's current and home location

A new table `locations` (a materialized path: models/locations.py) and two columns of `equipment`,
`location_id` (where the device is now) and `home_location_id` (where it belongs), each a reference
of the same company, indexed for the devices with one. No existing row changes: every device
starts with neither.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07 23:55:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PATH = sa.String(265).with_variant(sa.String(265, collation="C"), "postgresql")
PARENT = "fk_locations_parent_id_locations"
COLUMNS = ("location_id", "home_location_id")


def _location_index(column: str) -> None:
    where = sa.text(f"{column} IS NOT NULL")
    op.create_index(
        f"ix_equipment_company_{column}",
        "equipment",
        ["company_id", column, "status", "created_at", "id"],
        postgresql_where=where,
        sqlite_where=where,
    )


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    parent_reference = sa.ForeignKeyConstraint(
        ["company_id", "parent_id"], ["locations.company_id", "locations.id"], name=PARENT
    )
    op.create_table(
        "locations",
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column(
            "kind",
            sa.Enum(
                "Site",
                "Office",
                "Warehouse",
                "Room",
                "Other",
                name="locationkind",
                native_enum=False,
                length=20,
                create_constraint=False,
            ),
            nullable=False,
        ),
        sa.Column("parent_id", sa.Uuid(), nullable=True),
        sa.Column("path", PATH, nullable=False),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("address", sa.String(500), nullable=True),
        sa.Column("country_id", sa.Uuid(), nullable=True),
        sa.Column("is_default_storage", sa.Boolean(), nullable=False),
        sa.Column("sibling_name", sa.String(250), nullable=True),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("company_id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["company_id"], ["companies.id"], name="fk_locations_company_id_companies", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["country_id"], ["countries.id"], name="fk_locations_country_id_countries"),
        # SQLite declares the reference to the table's own key in the table; PostgreSQL needs the
        # key's unique index first (below).
        *([parent_reference] if sqlite else []),
        sa.PrimaryKeyConstraint("id", name="pk_locations"),
        sa.UniqueConstraint("company_id", "sibling_name", name="uq_locations_company_id_sibling_name"),
    )
    op.create_index("uq_locations_company_id_id", "locations", ["company_id", "id"], unique=True)
    if not sqlite:
        op.create_foreign_key(
            PARENT, "locations", "locations", ["company_id", "parent_id"], ["company_id", "id"]
        )
    op.create_index("ix_locations_company_created", "locations", ["company_id", "created_at", "id"])
    op.create_index("ix_locations_company_updated", "locations", ["company_id", "updated_at", "id"])
    op.create_index("ix_locations_company_path", "locations", ["company_id", "path"])
    default_storage = sa.text("is_default_storage")
    op.create_index(
        "uq_locations_company_default_storage",
        "locations",
        ["company_id"],
        unique=True,
        postgresql_where=default_storage,
        sqlite_where=default_storage,
    )
    with op.batch_alter_table("equipment", reflect_kwargs={"resolve_fks": False}) as batch:
        for column in COLUMNS:
            batch.add_column(sa.Column(column, sa.Uuid(), nullable=True))
            batch.create_foreign_key(
                f"fk_equipment_{column}_locations",
                "locations",
                ["company_id", column],
                ["company_id", "id"],
            )
    for column in COLUMNS:
        _location_index(column)


def downgrade() -> None:
    for column in COLUMNS:
        op.drop_index(f"ix_equipment_company_{column}", table_name="equipment")
    with op.batch_alter_table("equipment", reflect_kwargs={"resolve_fks": False}) as batch:
        for column in COLUMNS:
            batch.drop_constraint(f"fk_equipment_{column}_locations", type_="foreignkey")
            batch.drop_column(column)
    op.drop_table("locations")
