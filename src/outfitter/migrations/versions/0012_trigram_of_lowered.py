"""trigram indexes of the lower-cased columns, for the searches only

The trigram GIN indexes of 0009 (equipment's title and serial number, employees' names and
email) are made again of `lower(column)`, which the searches compare (`lower(column) LIKE
lower(pattern)`, as ILIKE does in UTF-8). An index of the column itself also served
`column = value`, and before a table's first VACUUM PostgreSQL priced that below the unique
btree: the check of a batch's 1,000 serial numbers read the trigram index's pending list for
each, and a bulk registration took seconds. The employee list's search on names, which already
compared `lower(first_name)`, is served by an index now too.

On SQLite the plain indexes 0009 made there are dropped: no query compared the column itself
through them, and SQLite's LIKE '%part%' reads every row anyway.

Each index is dropped and built in this migration's transaction, which holds the two tables
against writes until it commits: on a large database, run it when writes can wait a moment.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27 14:50:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TRIGRAM = (
    ("equipment", "title"),
    ("equipment", "serial_number"),
    ("employees", "first_name"),
    ("employees", "last_name"),
    ("employees", "email"),
)


def upgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for table, column in TRIGRAM:
        op.drop_index(f"ix_{table}_{column}_trgm", table_name=table)
        if postgresql:
            op.create_index(
                f"ix_{table}_{column}_trgm",
                table,
                [sa.text(f"lower({column}) gin_trgm_ops")],
                postgresql_using="gin",
            )


def downgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for table, column in TRIGRAM:
        if postgresql:
            op.drop_index(f"ix_{table}_{column}_trgm", table_name=table)
        op.create_index(
            f"ix_{table}_{column}_trgm",
            table,
            [column],
            postgresql_using="gin",
            postgresql_ops={column: "gin_trgm_ops"},
        )
