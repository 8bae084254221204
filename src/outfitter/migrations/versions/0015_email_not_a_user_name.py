"""an employee made without a SCIM userName may not take an email that is another's userName

SCIM knows an employee made through the REST API by its email (people.provisioning.known_as), so
such an employee whose email is another employee's userName made an identity provider's `userName
eq` lookup find two Users. SCIM's own writes check it; the REST creates did not. A trigger checks
it wherever an employee is written without a userName (a single create's one statement, a bulk
COPY, an import), on the (company_id, user_name) unique index, for no round trip: a read before
each single create halved its throughput (bench/writes.py: 0.69x -> 0.37x of the bare stack). The
error is a unique violation named `employees_email_not_a_user_name`, which the services answer as
409 / 422 (people.service.user_name_taken).

The lookup is planned on each call (`plan_cache_mode = force_custom_plan`): PL/pgSQL keeps a
statement's plan, and one made while the table looked empty (a new database, never analyzed)
scanned the whole table on every insert once it had grown (3-4 ms of the server's CPU an insert
at 10,000 employees, in bench/writes.py); planned each time, it is the unique index's probe.

SQLite drops a table's triggers when a batch migration copies the table: a later migration that
copies `employees` must create these again.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28 18:45:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "employees_email_not_a_user_name"

POSTGRESQL = f"""
CREATE FUNCTION {NAME}() RETURNS trigger LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM employees WHERE company_id = NEW.company_id AND user_name = NEW.email) THEN
        RAISE EXCEPTION 'the email % is the SCIM userName of another employee', NEW.email
            USING ERRCODE = 'unique_violation', CONSTRAINT = '{NAME}';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER {NAME} BEFORE INSERT ON employees
    FOR EACH ROW WHEN (NEW.user_name IS NULL) EXECUTE FUNCTION {NAME}();
"""

SQLITE = f"""
CREATE TRIGGER {NAME} BEFORE INSERT ON employees
WHEN NEW.user_name IS NULL
    AND EXISTS (SELECT 1 FROM employees WHERE company_id = NEW.company_id AND user_name = NEW.email)
BEGIN
    SELECT RAISE(ABORT, '{NAME}');
END
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(POSTGRESQL)
    else:
        op.execute(SQLITE)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP TRIGGER {NAME} ON employees")
        op.execute(f"DROP FUNCTION {NAME}()")
    else:
        op.execute(f"DROP TRIGGER {NAME}")
