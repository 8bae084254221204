"""The checks of every write of company rows other than the ORM's flush.

Such rows go through one path, `db.company_writes` (`company_insert`), which builds its statements
itself and binds their `company_id` from the session. On a TenantSession's connection
(`_check_inserts`) an INSERT into a company's table is refused unless it is a statement that path
built (`from_the_path`: that very object; a copy made from one by `.values`, `.returning` or
`.add_cte` is another statement, and refused) and every set of parameters it runs with names the
session's company as `company_id` (a session across companies: some company). The flush's own
INSERTs pass: the session stamps and checks the new objects first (db.tenancy). Registered on
every Engine when `outfitter.db` is imported.

An INSERT ... SELECT is proven when the path builds it (`prove_select`), once per statement, not
per execution: every company-owned table its SELECT reads is in that SELECT's own FROM, filtered on
`company_id = :company_id` (the parameter the session's company is bound to) in a term ANDed at the
top of its WHERE (one read in a subquery, a plain CTE or through an alias is refused, correlated or
not: the filter does not reach it), and the `company_id` it writes is that filtered column, the
parameter itself, or the `company_id` returned by a data-modifying CTE the path built.

A data-modifying CTE of a company's table (`_check_data_modifying_ctes`, on the compiled form: only
it tells cheaply whether a statement holds one) may only be inside a statement the path built, which
added it itself after checking it is an INSERT the path built: an UPDATE or DELETE as a CTE, or any
such CTE in a plain SELECT, is refused (the session's filter does not reach inside a CTE).
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import (
    CTE,
    AliasedReturnsRows,
    Column,
    ColumnElement,
    CompoundSelect,
    Connection,
    Engine,
    Executable,
    Insert,
    Join,
    Select,
    TableClause,
    TableValuedAlias,
    UpdateBase,
    Values,
    event,
)
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.sql import operators
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import BinaryExpression, BindParameter, BooleanClauseList, ClauseElement, Label
from sqlalchemy.sql.visitors import iterate

from outfitter.db.tenancy import TenantScopeError, company_tables, connection_info, flushing, tenant_in

COMPANY: Final = "company_id"  # the column, and the parameter the path binds to the session's company

_path_statements: weakref.WeakSet[Executable] = weakref.WeakSet()


def from_the_path(statement: Insert) -> Insert:
    """Note `statement` (just built by db.company_writes) as the path's: the checks let it run."""
    _path_statements.add(statement)
    return statement


@event.listens_for(Engine, "before_execute")
def _check_inserts(
    connection: Connection,
    statement: Executable,
    multiparams: list[dict[str, Any]],
    params: dict[str, Any],
    _options: Any,
) -> None:
    """Every INSERT into a company's table through a TenantSession (module docstring)."""
    if not isinstance(statement, Insert):
        return
    info = connection_info(connection)
    if info is None or flushing(info) or statement.table not in company_tables():
        return
    table = _name(statement)
    if statement not in _path_statements:
        raise TenantScopeError(
            f"an INSERT into {table} not made by db.company_writes: write company rows with "
            "company_insert (or session.add), which binds their company_id to the session's"
        )
    tenant = tenant_in(info)
    if tenant is None:
        raise TenantScopeError(f"rows inserted into {table} through a session bound to no company")
    for row in multiparams or [params]:
        company = row.get(COMPANY)
        if company is None or (isinstance(tenant, uuid.UUID) and not is_company(company, tenant)):
            raise TenantScopeError(
                f"an INSERT into {table} run with company_id {company}, not the session's company "
                f"({tenant}): run it through company_insert, which binds it"
            )


# --- data-modifying CTEs -------------------------------------------------------------------------

_writes_of_compiled: weakref.WeakKeyDictionary[SQLCompiler, bool] = weakref.WeakKeyDictionary()


def _writes_company_rows_in_a_cte(compiled: SQLCompiler) -> bool:
    """Whether a compiled statement writes a company's table as a CTE, at any depth: found once per
    compiled form (SQLAlchemy caches those), so any other statement pays one dict lookup."""
    found = _writes_of_compiled.get(compiled)
    if found is None:
        statement = compiled.statement
        owned = company_tables()
        found = _writes_of_compiled[compiled] = statement is not None and any(
            isinstance(element, CTE)
            and isinstance(element.element, UpdateBase)
            and element.element.table in owned
            for element in iterate(statement)
        )
    return found


@event.listens_for(Engine, "before_cursor_execute")
def _check_data_modifying_ctes(
    connection: Connection,
    _cursor: Any,
    _statement: str,
    _parameters: Any,
    context: DefaultExecutionContext | None,
    _executemany: bool,
) -> None:
    """A statement writing a company's table as a CTE, through a TenantSession, must be one the path
    built (module docstring); its parameters were checked in `_check_inserts`."""
    # None: a COPY (db.company_writes), whose rows the path checked.
    if context is None or not isinstance(context.compiled, SQLCompiler):
        return
    if connection_info(connection) is None or not _writes_company_rows_in_a_cte(context.compiled):
        return
    if context.invoked_statement not in _path_statements:
        raise TenantScopeError(
            "a company's table written as a CTE of a statement not made by db.company_writes: an "
            "UPDATE or DELETE as a CTE escapes the session's filter, and an INSERT must be the path's"
        )


# --- the proof of an INSERT ... SELECT ------------------------------------------------------------


def prove_select(table: str, rows: Select[Any], company: ColumnElement[Any]) -> None:
    """Refuse an INSERT ... SELECT into `table` of `rows`, writing `company` as company_id, unless
    its rows are provably the bound company's (module docstring). Conservative: only plain
    `table.company_id = :company_id` terms ANDed at the top of the WHERE count, for the tables of
    the SELECT's own FROM (`_reads` refuses any other). The rows of a data-modifying CTE it reads
    count as the company's only when that CTE is an INSERT the path built."""
    written: Any = company.element if isinstance(company, Label) else company
    filtered = {
        column.table
        for column, value in _equalities(rows.whereclause)
        if column.key == COMPANY and value.key == COMPANY
    }
    reads = _reads(rows)
    unfiltered = (reads.tables & company_tables()) - filtered
    names_tenant = (
        (isinstance(written, Column) and written.key == COMPANY and written.table in filtered)
        or (isinstance(written, BindParameter) and written.key == COMPANY)
        or (isinstance(written, Column) and _returns_company_of(written, reads.ctes))
    )
    unproven = reads.unprovable or any(
        not (isinstance(cte.element, Insert) and cte.element in _path_statements) for cte in reads.ctes
    )
    if unfiltered or unproven or not names_tenant:
        raise TenantScopeError(
            f"INSERT ... FROM SELECT into {table} must read only the bound company's rows "
            "(company_id = :company_id in the WHERE, for every company table; a CTE only if it is an "
            "INSERT made by company_insert_statement) and write that company_id"
        )


def prove_cte(cte: CTE) -> None:
    """Refuse as a CTE of a path's statement anything but an INSERT the path built."""
    element = cte.element
    if (
        isinstance(element, UpdateBase)
        and element.table in company_tables()
        and not (isinstance(element, Insert) and element in _path_statements)
    ):
        raise TenantScopeError(
            f"{_name(element)} written as a CTE other than by an INSERT made by "
            "company_insert_statement: an UPDATE or DELETE escapes the session's filter"
        )


@dataclass(frozen=True)
class _Reads:
    """What a SELECT reads rows from, as the proof sees it."""

    tables: frozenset[Any]  # the tables in its own FROM (through joins)
    ctes: tuple[CTE, ...]  # the data-modifying CTEs read anywhere in it
    unprovable: bool  # a company's table read where no filter of its WHERE applies, or a FROM unknown


def _reads(root: Select[Any]) -> _Reads:
    """What `root` reads rows from. A company's table is provable only in `root`'s own FROM, where
    its WHERE can filter it: in any SELECT nested in it (a subquery, EXISTS, a plain CTE), or
    through an alias, it is not, correlated or not. A data-modifying CTE is not looked into: the
    path built it, and proved it then."""
    tables: set[Any] = set()
    ctes: dict[CTE, None] = {}
    unprovable = False
    for select_ in _selects_in(root, ctes):
        for source in _sources(select_.get_final_froms()):
            if isinstance(source, CTE) and isinstance(source.element, UpdateBase):
                ctes[source] = None
            elif isinstance(source, TableClause):
                if select_ is root:
                    tables.add(source)
                else:
                    unprovable |= source in company_tables()
            elif isinstance(source, TableValuedAlias | Values):
                pass  # a function's rows (json_each) or rows written into the statement
            elif isinstance(source, AliasedReturnsRows) and isinstance(source.element, TableClause):
                unprovable |= source.element in company_tables()  # no filter of the WHERE names it
            elif isinstance(source, AliasedReturnsRows) and isinstance(
                source.element, Select | CompoundSelect
            ):
                pass  # a subquery or a plain CTE: its SELECTs are among those walked
            else:  # text, or anything else the proof cannot follow
                unprovable = True
    return _Reads(frozenset(tables), tuple(ctes), unprovable)


def _selects_in(root: ClauseElement, ctes: dict[CTE, None]) -> Iterator[Select[Any]]:
    """Every SELECT in `root`, itself included, except inside data-modifying CTEs (noted in `ctes`)."""
    seen: set[int] = set()
    pending: list[ClauseElement] = [root]
    while pending:
        element = pending.pop()
        if id(element) in seen:
            continue
        seen.add(id(element))
        if isinstance(element, CTE) and isinstance(element.element, UpdateBase):
            ctes[element] = None
            continue
        if isinstance(element, Select):
            yield element
        pending.extend(element.get_children())


def _sources(froms: Sequence[Any]) -> Iterator[Any]:
    """FROM elements, joins taken apart."""
    for source in froms:
        if isinstance(source, Join):
            yield from _sources([source.left, source.right])
        else:
            yield source


def _returns_company_of(column: Column[Any], ctes: tuple[CTE, ...]) -> bool:
    """Whether `column` is of one of `ctes` and is the company_id of the rows that CTE INSERTs."""
    cte: Any = column.table
    if cte not in ctes or not isinstance(cte.element, Insert):
        return False
    position = next((at for at, each in enumerate(cte.c) if each is column), None)
    if position is None:
        return False
    source = list(cte.element.exported_columns)[position]
    if isinstance(source, Label):
        source = source.element
    return isinstance(source, Column) and source.key == COMPANY and source.table in (cte.element.table,)


def _equalities(where: ColumnElement[Any] | None) -> list[tuple[Column[Any], BindParameter[Any]]]:
    """The `column = :value` terms ANDed at the top of a WHERE clause."""
    if where is None:
        return []
    if isinstance(where, BooleanClauseList) and where.operator is operators.and_:
        return [pair for clause in where.clauses for pair in _equalities(clause)]
    if isinstance(where, BinaryExpression) and where.operator is operators.eq:
        left, right = where.left, where.right
        if isinstance(right, Column) and isinstance(left, BindParameter):
            left, right = right, left
        if isinstance(left, Column) and isinstance(right, BindParameter):
            return [(left, right)]
    return []


def _name(statement: UpdateBase) -> str:
    """The name of the table an INSERT, UPDATE or DELETE writes."""
    table: Any = statement.table
    return str(table.name)


def is_company(value: object, tenant: uuid.UUID) -> bool:
    """Whether `value` (a UUID, or its text) is `tenant`."""
    if isinstance(value, str):
        try:
            return uuid.UUID(value) == tenant
        except ValueError:
            return False
    return value == tenant
