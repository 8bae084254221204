"""New rows of company-owned tables written as Core statements, not ORM objects, in the session's
own transaction: many rows of one table in one go (`insert_rows`: COPY on PostgreSQL from COPY_FROM
rows, an executemany otherwise), or one row unless a unique constraint refuses it
(`insert_unless_taken`, the single creates' hot path).

The batch writers (CSV imports, bulk creation, the events they record) build their rows as dicts
and write them here, not through ORM objects: for 10,000 devices the unit of work's bookkeeping
and one bound statement per row cost seconds, COPY a fraction of that. COPY passes by the
session's statement hooks, so the tenancy rule is kept here: in a session bound to a company every
row must name that company (`company_id`, set explicitly by the caller; a row naming another is a
TenantScopeError, as a new ORM object naming another company is); a session working across
companies (the worker, a gateway webhook) names each row's. Each value goes through its column type's bind
processing (JSON, money, UTC timestamps; None in a JSON column is JSON null), as an INSERT's
would. Rows are complete: COPY runs no Python-side column defaults, so a row leaving out a column
that has one is refused. The COPY is announced to the engine's `before_cursor_execute` listeners
like any statement (statement counts see it).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Insert, Table
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from outfitter.core.tenancy import TenantScopeError, company_named
from outfitter.db.session import unless_conflicting

# Below this many rows one INSERT costs less than a COPY's two round trips.
COPY_FROM = 20


def insert_rows(session: Session, model: type[Any], rows: Sequence[Mapping[str, Any]]) -> None:
    """Write `rows` (dicts with the same keys, each naming its company) into `model`'s table."""
    if not rows:
        return
    table: Table = model.__table__
    _check_companies(session, table, rows)
    names = list(rows[0])
    missing = [column.name for column in table.c if column.default is not None and column.name not in names]
    if missing:
        raise ValueError(f"rows of {table.name} leave out {', '.join(missing)}, which have defaults")
    session.flush()  # what the ORM holds (the rows these may refer to) is written first
    connection = session.connection()
    dialect = connection.dialect
    if len(rows) == 1:  # one row: a plain execute, not an executemany's batching
        connection.execute(table.insert(), dict(rows[0]))
        return
    if dialect.name != "postgresql" or len(rows) < COPY_FROM:
        connection.execute(table.insert(), list(rows))
        return
    processors = [table.c[name].type._cached_bind_processor(dialect) for name in names]
    quote = dialect.identifier_preparer.quote
    statement = (
        f"COPY {dialect.identifier_preparer.format_table(table)} "
        f"({', '.join(quote(name) for name in names)}) FROM STDIN"
    )
    driver = connection.connection.driver_connection
    assert driver is not None
    try:
        with driver.cursor() as cursor:
            connection.dispatch.before_cursor_execute(connection, cursor, statement, (), None, False)
            with cursor.copy(statement) as copy:
                for row in rows:
                    copy.write_row(
                        [
                            value if process is None else process(value)
                            for process, value in zip(processors, (row[name] for name in names), strict=True)
                        ]
                    )
    except dialect.loaded_dbapi.Error as error:  # raised as SQLAlchemy raises it for an INSERT
        raise DBAPIError.instance(statement, None, error, dialect.loaded_dbapi.Error) from error


def insert_unless_taken(
    session: Session, model: type[Any], row: Mapping[str, Any], unique: tuple[str, ...]
) -> bool:
    """Write one row (naming its company) unless it would break the unique constraint on `unique`:
    whether it was written. `INSERT ... ON CONFLICT DO NOTHING`: the constraint decides, with no read
    first and no failed statement (PostgreSQL's transaction stays usable for the 409's answer)."""
    table: Table = model.__table__
    _check_companies(session, table, [row])
    session.flush()
    connection = session.connection()
    statement = _insert_unless_taken(table, unique, connection.dialect.name)
    return connection.execute(statement, dict(row)).first() is not None


@functools.cache
def _insert_unless_taken(table: Table, unique: tuple[str, ...], dialect: str) -> Insert:
    statement: Insert = unless_conflicting(table, dialect, list(unique)).returning(table.c.id)
    return statement


def _check_companies(session: Session, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Each row names its company: the bound one in a bound session, any in a session across
    companies; a session bound to none writes nothing (`company_named` says which)."""
    for company in {row.get("company_id") for row in rows}:
        if company is None:
            raise TenantScopeError(f"a new row of {table.name} names no company")
        company_named(session, company)
