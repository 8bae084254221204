"""one SCIM identity per employee: an email may not be another employee's userName

SCIM knows an employee made through the REST API by its email (people.provisioning.known_as): its
identity is its userName, else (until SCIM deprovisions it) its email. An employee made through the
REST API whose email was another employee's userName made an identity provider's `userName eq`
lookup find two Users; SCIM's own writes checked it, the REST creates did not. A unique index of
that identity refuses it on every path (a single create, a bulk COPY, an import, a race), with no
read and no plan: a read before each single create, and then a trigger's lookup, were planned
while `employees` looked empty (a new database not yet analyzed) and then scanned the company's
employees for every row (bench/writes.py: 0.69x -> 0.3x of the bare stack; an import of 10,000
employees 1.5 s -> 7-11 s). The services answer its violation as 409 / 422
(people.service.user_name_taken).

A database where the REST API already made such a twin cannot take the index: the upgrade stops,
naming the emails, for the operator to rename or delete one of each pair.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28 18:45:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "uq_employees_company_scim_identity"
IDENTITY = "COALESCE(user_name, CASE WHEN deprovisioned_at IS NULL THEN email END)"


def upgrade() -> None:
    twins = op.get_bind().execute(
        sa.text(
            f"SELECT {IDENTITY} AS identity FROM employees WHERE {IDENTITY} IS NOT NULL "
            f"GROUP BY company_id, {IDENTITY} HAVING count(*) > 1"
        )
    )
    found = sorted(row.identity for row in twins)
    if found:
        raise RuntimeError(
            f"{len(found)} SCIM identities are each held by two employees of a company (one's userName is "
            f"the other's email): {', '.join(found[:20])}. Change the email of the one made through the "
            "REST API (or delete it), then upgrade again."
        )
    op.execute(f"CREATE UNIQUE INDEX {NAME} ON employees (company_id, ({IDENTITY}))")


def downgrade() -> None:
    op.execute(f"DROP INDEX {NAME}")
