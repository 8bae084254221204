"""employees: the status `Active` for every employee created before creates set it

Employees made through the REST API or a CSV import before this change had no status (null) while
SCIM's had `Active` or `Offboarded`; every create now writes `Active`, and this gives the rows
already there the same. The downgrade leaves them: which ones were null is not kept, and `Active`
is what they were.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07 20:45:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("UPDATE employees SET status = 'Active' WHERE status IS NULL")


def downgrade() -> None:
    pass
