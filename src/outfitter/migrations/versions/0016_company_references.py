"""every reference between company tables names its company: the database refuses a crossed one

The session scoped every statement to the caller's company, but each foreign key between company
tables was one column: a write path that forgot its lookup could make a row of one company refer
to another's employee, device or order, and the database took it. Each table another refers to
gets UNIQUE (company_id, id) (an index: SQLite adds it without copying the table), and each
reference becomes `FOREIGN KEY (company_id, x_id) REFERENCES x (company_id, id)`, keeping its
ON DELETE. A NULL reference stays unchecked (MATCH SIMPLE).

ON DELETE SET NULL clears the reference only: PostgreSQL (15 and later) is told which column
(`SET NULL (x_id)`); SQLite cannot be, so there the one-column key stays for the action and the
composite one, without an action, is checked at the end of the statement (db.base.company_reference).

A database that already holds a crossed reference cannot take the keys: the upgrade stops first,
naming each table, column and row, for the operator to mend them.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07 17:00:00.000000
"""

import uuid
from collections.abc import Sequence
from itertools import groupby
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TARGETS = (
    "employees",
    "departments",
    "equipment",
    "transactions",
    "orders",
    "wallets",
    "webhook_endpoints",
    "webhook_deliveries",
)
# (table, column, the table it refers to, ON DELETE), grouped by table for SQLite's copies.
REFERENCES = (
    ("departments", "head_id", "employees", "SET NULL"),
    ("equipment", "assignee_id", "employees", "SET NULL"),
    ("equipment", "asset_order_id", "orders", None),
    ("equipment_history", "equipment_id", "equipment", "CASCADE"),
    ("equipment_history", "assignee_id", "employees", "SET NULL"),
    ("equipment_reservations", "equipment_id", "equipment", "CASCADE"),
    ("equipment_reservations", "transaction_id", "transactions", "CASCADE"),
    ("order_items", "order_id", "orders", "CASCADE"),
    ("order_items", "employee_id", "employees", "SET NULL"),
    ("order_items", "equipment_id", "equipment", "SET NULL"),
    ("orders", "transaction_id", "transactions", None),
    ("payment_anomalies", "transaction_id", "transactions", "CASCADE"),
    ("transaction_items", "transaction_id", "transactions", "CASCADE"),
    ("transaction_items", "employee_id", "employees", "SET NULL"),
    ("transaction_items", "equipment_id", "equipment", None),
    ("user_departments", "user_id", "employees", "CASCADE"),
    ("user_departments", "department_id", "departments", "CASCADE"),
    ("wallet_entries", "wallet_id", "wallets", "CASCADE"),
    ("wallet_entries", "transaction_id", "transactions", None),
    ("webhook_attempts", "delivery_id", "webhook_deliveries", "CASCADE"),
    ("webhook_deliveries", "endpoint_id", "webhook_endpoints", "CASCADE"),
)
SHOWN = 20  # row ids named per reference


def _name(table: str, column: str, target: str) -> str:
    return f"fk_{table}_{column}_{target}"


def crossed_references() -> list[str]:
    """Each reference some row makes to a row of another company: 'table.column -> target: ids'."""
    found = []
    for table, column, target, _ in REFERENCES:
        ids = (
            op.get_bind()
            .execute(
                sa.text(
                    f"SELECT r.id FROM {table} r JOIN {target} t ON t.id = r.{column} "
                    "WHERE t.company_id <> r.company_id ORDER BY r.id"
                )
            )
            .scalars()
            .all()
        )
        if ids:
            shown = ", ".join(str(uuid.UUID(str(each))) for each in ids[:SHOWN])
            more = f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else ""
            found.append(f"{table}.{column} -> {target} ({len(ids)}): {shown}{more}")
    return found


def _copying(table: str) -> Any:
    """Batch mode (SQLite copies the table), reflecting the table alone: the tables it refers to
    stay as they are, and reflecting `employees` would warn of the SCIM identity's expression index."""
    return op.batch_alter_table(table, reflect_kwargs={"resolve_fks": False})


def upgrade() -> None:
    if crossed := crossed_references():
        raise RuntimeError(
            "rows refer to a row of another company, which the new foreign keys refuse: "
            + "; ".join(crossed)
            + ". Point each at a row of its own company (or clear it), then upgrade again."
        )
    for target in TARGETS:
        op.create_index(f"uq_{target}_company_id_id", target, ["company_id", "id"], unique=True)
    if op.get_bind().dialect.name == "postgresql":
        for table, column, target, ondelete in REFERENCES:
            op.drop_constraint(_name(table, column, target), table, type_="foreignkey")
            op.create_foreign_key(
                _name(table, column, target),
                table,
                target,
                ["company_id", column],
                ["company_id", "id"],
                ondelete=f"SET NULL ({column})" if ondelete == "SET NULL" else ondelete,
            )
        return
    for table, references in groupby(REFERENCES, key=lambda reference: reference[0]):
        with _copying(table) as batch:
            for _, column, target, ondelete in references:
                batch.drop_constraint(_name(table, column, target), type_="foreignkey")
                if ondelete == "SET NULL":  # the action stays with the one column (see the top)
                    batch.create_foreign_key(
                        f"{_name(table, column, target)}_null", target, [column], ["id"], ondelete=ondelete
                    )
                    ondelete = None
                batch.create_foreign_key(
                    _name(table, column, target),
                    target,
                    ["company_id", column],
                    ["company_id", "id"],
                    ondelete=ondelete,
                )


def downgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for table, references in groupby(REFERENCES, key=lambda reference: reference[0]):
        with _copying(table) as batch:
            for _, column, target, ondelete in references:
                batch.drop_constraint(_name(table, column, target), type_="foreignkey")
                if ondelete == "SET NULL" and not postgresql:
                    batch.drop_constraint(f"{_name(table, column, target)}_null", type_="foreignkey")
                batch.create_foreign_key(
                    _name(table, column, target), target, [column], ["id"], ondelete=ondelete
                )
    for target in TARGETS:
        op.drop_index(f"uq_{target}_company_id_id", table_name=target)
