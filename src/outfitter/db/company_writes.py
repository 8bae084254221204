"""The one path for rows of company-owned tables written other than by the ORM's flush.

`company_insert` writes them in the session's transaction: rows (one INSERT, an executemany, or a
COPY on PostgreSQL for a batch), an INSERT ... SELECT, or a statement `company_insert_statement`
built (the single creates' one statement on PostgreSQL, a record and what announces it). Either
way `company_id` is bound from the session: a bound session's company is stamped on rows that name
none, and a row or parameter naming another company is refused (TenantScopeError); a session
across companies must name the company of each. The statements are the path's own
(`company_insert_statement`); ON CONFLICT is an argument (`unique`: DO NOTHING, never an update
that could land on another company's row), RETURNING too; an INSERT ... SELECT is proven the
company's as it is built. The session's connection refuses any other INSERT into a company's table
(db.write_checks). Rows written while the caller goes on (db.bulk_rows) are bound by the same
`bound_rows` and written by the same statement or COPY.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import CTE, CursorResult, Insert, Select, Table, bindparam, insert
from sqlalchemy.orm import Session

from outfitter.db.copy_rows import complete_columns, copied, copy_rows
from outfitter.db.session import unless_conflicting
from outfitter.db.tenancy import ACROSS_COMPANIES, TenantScopeError, tenant_in
from outfitter.db.write_checks import COMPANY, from_the_path, is_company, prove_cte, prove_select

Rows = Sequence[Mapping[str, Any]]


def company_insert(
    session: Session,
    target: type[Any] | Table | Insert,
    rows: Rows | None = None,
    *,
    unique: Sequence[str] | None = None,
    returning: Sequence[str] = (),
    parameters: Mapping[str, Any] | None = None,
) -> CursorResult[Any] | None:
    """Write company rows in `session`'s transaction, after what the session holds (it flushes).

    `target` a model or its table, with `rows` (dicts with the same keys): one INSERT, ON CONFLICT
    (`unique`) DO NOTHING if given, RETURNING the columns `returning` names; a batch of rows with
    neither, a COPY on PostgreSQL from COPY_FROM rows (every column with a default given). Or
    `target` a statement `company_insert_statement` built, run with `parameters`. The answer is
    the statement's result, or None for a COPY or no rows."""
    session.flush()
    connection = session.connection()
    if isinstance(target, Insert):
        values = dict(parameters or {})
        values[COMPANY] = bound_company(session, str(target.table), values.get(COMPANY))
        return connection.execute(target, values)
    table: Table = target if isinstance(target, Table) else target.__table__
    if not rows:
        return None
    rows = bound_rows(session, table, rows)
    if unique is None and not returning:
        names = complete_columns(table, rows)
        if copied(connection, rows):
            copy_rows(connection, table, names, rows)
            return None
    statement = rows_statement(table, connection.dialect.name, tuple(unique or ()), tuple(returning))
    return connection.execute(statement, dict(rows[0]) if len(rows) == 1 else list(rows))


def insert_unless_taken(
    session: Session, model: type[Any], row: Mapping[str, Any], unique: Sequence[str]
) -> bool:
    """Write one row unless it would break the unique constraint on `unique`: whether it was
    written. `INSERT ... ON CONFLICT DO NOTHING`: the constraint decides, with no read first and no
    failed statement (PostgreSQL's transaction stays usable for the 409's answer)."""
    result = company_insert(session, model, [row], unique=unique, returning=("id",))
    return result is not None and result.first() is not None


def bound_rows(session: Session, table: Table, rows: Rows) -> Rows:
    """`rows` with `company_id` bound to the session's company (module docstring)."""
    companies = {row.get(COMPANY) for row in rows}
    tenant = tenant_in(session.info)
    if isinstance(tenant, uuid.UUID):
        if any(company is not None and not is_company(company, tenant) for company in companies):
            raise TenantScopeError(
                f"a row of {table.name} names another company than the one the session is bound to"
            )
        if None in companies:
            return [row if row.get(COMPANY) is not None else {**row, COMPANY: tenant} for row in rows]
        return rows
    if tenant == ACROSS_COMPANIES:
        if None in companies:
            raise TenantScopeError(
                f"a session across companies must name the company_id of each {table.name} row"
            )
        return rows
    raise TenantScopeError(f"rows of {table.name} written through a session bound to no company")


def bound_company(session: Session, table: str, company: Any) -> uuid.UUID:
    """The company a statement's `company_id` parameter is bound to (module docstring)."""
    tenant = tenant_in(session.info)
    if isinstance(tenant, uuid.UUID):
        if company is not None and not is_company(company, tenant):
            raise TenantScopeError(
                f"company_id of an INSERT into {table} names another company than the session's"
            )
        return tenant
    if tenant == ACROSS_COMPANIES:
        if not isinstance(company, uuid.UUID):
            raise TenantScopeError(
                f"a session across companies must name the company_id it writes into {table}"
            )
        return company
    raise TenantScopeError(f"rows of {table} written through a session bound to no company")


@functools.cache
def rows_statement(table: Table, dialect: str, unique: tuple[str, ...], returning: tuple[str, ...]) -> Insert:
    """The path's INSERT of rows given as parameters into `table`."""
    statement = _insert(table, dialect if unique else None, unique)
    if returning:
        statement = statement.returning(*(table.c[name] for name in returning))
    return from_the_path(statement)


def company_insert_statement(
    table: Table,
    *,
    columns: Sequence[str],
    select: Select[Any] | None = None,
    unique: Sequence[str] | None = None,
    returning: Sequence[str] = (),
    ctes: Sequence[CTE] = (),
) -> Insert:
    """An INSERT into the company-owned `table` for `company_insert` to run (build it once: the
    proof of its SELECT runs here). Without `select`, one row of parameters named as `columns`,
    `company_id` among them, ON CONFLICT (`unique`) DO NOTHING if given (PostgreSQL's syntax: such
    a statement is one of the creates', PostgreSQL only). With `select`, an INSERT ... SELECT of
    `columns`, proven to read and write only the company the parameter `company_id` names (see
    db.write_checks); `company_id` left out of `columns` is written as that parameter. RETURNING
    the columns `returning` names; `ctes` (each an INSERT this function built) added to it."""
    if select is None:
        names = list(dict.fromkeys([*columns, COMPANY]))
        statement = _insert(table, "postgresql" if unique else None, tuple(unique or ())).values(
            {name: bindparam(name, type_=table.c[name].type) for name in names}
        )
    else:
        names = list(columns)
        if COMPANY not in names:
            select = select.add_columns(bindparam(COMPANY, type_=table.c[COMPANY].type))
            names.append(COMPANY)
        prove_select(table.name, select, list(select.selected_columns)[names.index(COMPANY)])
        statement = insert(table).from_select(names, select)
    if returning:
        statement = statement.returning(*(table.c[name] for name in returning))
    for cte in ctes:
        prove_cte(cte)
    if ctes:
        statement = statement.add_cte(*ctes)
    return from_the_path(statement)


def _insert(table: Table, dialect: str | None, unique: tuple[str, ...]) -> Insert:
    """INSERT INTO `table`, ON CONFLICT (`unique`) DO NOTHING in `dialect`'s syntax when given."""
    if not unique or dialect is None:
        return insert(table)
    statement: Insert = unless_conflicting(table, dialect, list(unique))
    return statement
