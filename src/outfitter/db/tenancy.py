"""Tenant scoping by the session itself.

A `TenantSession` is either bound to one company (`bind_company`, done by the request pipeline for
every authenticated request) or declared to work across companies (`across_companies`, for the
few paths that must: the gateways' webhooks and pages, reconciliation, operators' commands). On a
bound session every ORM SELECT, UPDATE and DELETE that touches a company-owned table gets the
company filter added by `_scope_to_company`, relationship loads included, and every new
company-owned row is stamped with the company (or refused if it names another). A session that is
neither refuses to touch company-owned tables at all, so a new query cannot forget the filter:
there is no filter to remember.

INSERTs are checked where every path meets, on the session's connection (`_check_inserts`): an ORM
flush, `session.execute(insert(...))` with rows as parameters (stamped with the bound company when
they name none) or written into the statement (`.values(...)`: they must name it), a Core insert on
`session.connection()`. A row naming another company is refused. An `INSERT ... FROM SELECT`, whose
rows cannot be checked one by one, is let through only when the statement itself proves them the
bound company's (`_check_scoped_select`): every company-owned table the SELECT reads is in its own
FROM, filtered on `company_id` = the bound company in its WHERE (one read in a subquery, a plain CTE
or through an alias is refused, correlated or not), and the `company_id` it writes is that filtered
column or the bound company itself. A session across companies writes any company's rows.

A data-modifying CTE (`WITH device AS (INSERT ... RETURNING ...) INSERT ... SELECT ... FROM device`,
one statement for a record and its history) is proven the same way, whatever the statement around
it (`_check_data_modifying_ctes`): its rows written into it (`.values`) must name the bound company,
its SELECT must pass the same proof, it returns only its own table's columns, and an ON CONFLICT may
only DO NOTHING (an update could land on another company's row). A SELECT may read such an INSERT's
rows, which are then proven the company's, and write its `company_id`. An UPDATE or DELETE of a
company's table as a CTE, or a SELECT reading one, is refused: the session's filter does not reach
inside a CTE. Anything else the proof cannot follow is refused too.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Generic, TypeVar

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
    Row,
    Select,
    Table,
    TableClause,
    TableValuedAlias,
    UpdateBase,
    Values,
    bindparam,
    event,
    select,
)
from sqlalchemy.dialects.postgresql.dml import OnConflictDoNothing as PostgresDoNothing
from sqlalchemy.dialects.sqlite.dml import OnConflictDoNothing as SqliteDoNothing
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.orm import ORMExecuteState, Session, SessionTransaction, with_loader_criteria
from sqlalchemy.orm.interfaces import ORMOption
from sqlalchemy.sql import operators
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import BinaryExpression, BindParameter, BooleanClauseList, ClauseElement, Label
from sqlalchemy.sql.util import find_tables
from sqlalchemy.sql.visitors import iterate

from outfitter.core.errors import NotFound
from outfitter.db.base import Base, CompanyOwned

_TENANT: Final = "tenant"
_ACROSS_COMPANIES: Final = "across companies"


class TenantScopeError(RuntimeError):
    """A programming error: company data touched through a session that did not say whose."""


class TenantSession(Session):
    """The application's session class; see the module docstring."""


def bind_company(session: Session, company_id: uuid.UUID) -> None:
    session.info[_TENANT] = company_id


def across_companies(session: Session) -> Session:
    """Declare that `session` legitimately reads and writes every company's records."""
    session.info[_TENANT] = _ACROSS_COMPANIES
    return session


def company_of(session: Session) -> uuid.UUID:
    """The company a bound session works for."""
    tenant = session.info.get(_TENANT)
    if not isinstance(tenant, uuid.UUID):
        raise TenantScopeError("this session is not bound to a company")
    return tenant


def company_named(session: Session, company_id: uuid.UUID | None) -> uuid.UUID:
    """The company a write through `session` is for: a bound session's own (`company_id`, when
    given, must be it); a session across companies must name it with `company_id`."""
    tenant = session.info.get(_TENANT)
    if tenant == _ACROSS_COMPANIES:
        if company_id is None:
            raise TenantScopeError("a session across companies must name the company_id it writes for")
        return company_id
    bound = company_of(session)
    if company_id is not None and company_id != bound:
        raise TenantScopeError("company_id names another company than the one the session is bound to")
    return bound


_touches_company_data: weakref.WeakKeyDictionary[Executable, bool] = weakref.WeakKeyDictionary()


def touches_company_data(statement: Executable) -> bool:
    """Whether `statement` reads or writes a company-owned table anywhere, subqueries included."""
    known = _touches_company_data.get(statement)
    if known is None:
        assert isinstance(statement, ClauseElement)
        owned = _company_tables()
        known = _touches_company_data[statement] = any(
            table in owned for table in find_tables(statement, include_crud=True)
        )
    return known


def _company_tables() -> frozenset[Table]:
    """The company-owned tables, worked out again only when a table has been declared since (every
    INSERT asks)."""
    global _known_company_tables
    declared = len(Base.metadata.tables)
    if _known_company_tables[0] != declared:
        owned = frozenset(
            model.__table__ for model in _subclasses(CompanyOwned) if hasattr(model, "__table__")
        )
        _known_company_tables = (declared, owned)
    return _known_company_tables[1]


_known_company_tables: tuple[int, frozenset[Table]] = (-1, frozenset())


def _company_owned(state: ORMExecuteState) -> bool:
    """Whether the statement reads or writes a company-owned table anywhere, subqueries included."""
    statement = state.statement
    known = _touches_company_data.get(statement)
    if known is None:
        assert isinstance(statement, ClauseElement)
        owned = _company_tables()
        known = _touches_company_data[statement] = any(
            issubclass(mapper.class_, CompanyOwned) for mapper in state.all_mappers
        ) or any(table in owned for table in find_tables(statement, include_crud=True))
    return known


def _subclasses(cls: type) -> list[type]:
    found: list[type] = []
    direct: type
    for direct in cls.__subclasses__():
        found += [direct, *_subclasses(direct)]
    return found


# One criteria option for every statement and every company: the company is a bound parameter,
# so a statement built once (a module constant) and scoped once is compiled once, whoever asks.
_TENANT_PARAMETER: Final = "tenant_company_id"
_TENANT_CRITERIA: Final = with_loader_criteria(
    # The name is written out: the lambda may name no variable, or SQLAlchemy would track it.
    CompanyOwned,
    lambda cls: cls.company_id == bindparam("tenant_company_id"),
    include_aliases=True,
)
_scoped_statements: weakref.WeakKeyDictionary[Executable, Executable] = weakref.WeakKeyDictionary()


def _scoped(statement: Executable) -> Executable:
    scoped = _scoped_statements.get(statement)
    if scoped is None:
        scoped = _scoped_statements[statement] = statement.options(_TENANT_CRITERIA)
    return scoped


@event.listens_for(TenantSession, "do_orm_execute")
def _scope_to_company(state: ORMExecuteState) -> None:
    if not (state.is_select or state.is_update or state.is_delete):
        return
    tenant = state.session.info.get(_TENANT)
    if tenant == _ACROSS_COMPANIES:
        return
    if isinstance(tenant, uuid.UUID):
        if not (state.is_column_load or state.is_relationship_load):
            state.statement = _scoped(state.statement)
        # Relationship and column loads carry the criteria of the statement that started them.
        state.parameters = _with_tenant(state.parameters, tenant)
        return
    if _company_owned(state):
        raise TenantScopeError(
            "company-owned records queried through a session bound to no company: "
            "use the request's session, or declare across_companies(session)"
        )


def company_rows(session: Session, statement: Select[Any], parameters: dict[str, Any]) -> Sequence[Row[Any]]:
    """The rows of a column SELECT of a bound session's company, scoped exactly as `session.execute`
    would scope it, but executed at the cost of Core: no ORM result machinery. For the hot reads,
    whose statements are module constants (see equipment/reads.py)."""
    session.flush()  # what the request wrote so far is part of what it reads
    return (
        session.connection().execute(_scoped(statement), _with_tenant(parameters, company_of(session))).all()
    )


def scoped_for_company(
    statement: Executable, parameters: dict[str, Any], company_id: uuid.UUID
) -> tuple[Executable, dict[str, Any]]:
    """`statement` and `parameters` scoped to `company_id` exactly as a bound session scopes them,
    for a driver that runs compiled statements itself (db.reads)."""
    return _scoped(statement), _with_tenant(parameters, company_id)


def _with_tenant(parameters: Any, tenant: uuid.UUID) -> Any:
    if isinstance(parameters, list):
        return [{**each, _TENANT_PARAMETER: tenant} for each in parameters]
    return {**(parameters or {}), _TENANT_PARAMETER: tenant}


@event.listens_for(TenantSession, "before_flush")
def _stamp_new_rows(session: Session, _context: Any, _instances: Any) -> None:
    tenant = session.info.get(_TENANT)
    for record in session.new:
        if not isinstance(record, CompanyOwned):
            continue
        if isinstance(tenant, uuid.UUID):
            if record.company_id is None:
                record.company_id = tenant
            elif record.company_id != tenant:
                raise TenantScopeError(f"a new {type(record).__name__} names another company")
        elif tenant != _ACROSS_COMPANIES:
            raise TenantScopeError(f"a new {type(record).__name__} added through an unbound session")


# The tenancy of each connection a TenantSession works on: its `info`, read when a statement runs,
# since a request binds its company after its transaction began (authentication reads first).
_connection_tenancy: weakref.WeakKeyDictionary[Connection, dict[Any, Any]] = weakref.WeakKeyDictionary()
_COMPANY_COLUMN: Final = "company_id"
_UNNAMED: Final = object()


@event.listens_for(TenantSession, "after_begin")
def _note_connection(session: Session, _transaction: SessionTransaction, connection: Connection) -> None:
    _connection_tenancy[connection] = session.info


@event.listens_for(Engine, "before_execute", retval=True)
def _check_inserts(
    connection: Connection,
    statement: Executable,
    multiparams: list[dict[str, Any]],
    params: dict[str, Any],
    _options: Any,
) -> tuple[Executable, list[dict[str, Any]], dict[str, Any]]:
    """Every INSERT into a company's table through a TenantSession, by any path (module docstring)."""
    if not isinstance(statement, Insert):
        return statement, multiparams, params
    info = _connection_tenancy.get(connection)
    if info is None or statement.table not in _company_tables():
        return statement, multiparams, params
    tenant = info.get(_TENANT)
    if tenant == _ACROSS_COMPANIES:
        return statement, multiparams, params
    table = statement.table.name
    if not isinstance(tenant, uuid.UUID):
        raise TenantScopeError(f"rows inserted into {table} through a session bound to no company")
    if statement.select is not None:
        _check_scoped_select(statement, params if not multiparams else {}, tenant, table)
        return statement, multiparams, params
    written = _companies_written(statement)
    if statement._multi_values or not (multiparams or params):  # the rows are in the statement
        if not written or any(not _is(company, tenant) for company in written):
            raise TenantScopeError(f"rows written into an INSERT into {table} must name the bound company")
        return statement, multiparams, params
    in_statement = written[0] if written else _UNNAMED
    rows = [_stamped(row, in_statement, tenant, table) for row in (multiparams or [params])]
    return (statement, rows, {}) if multiparams else (statement, [], rows[0])


@dataclass(frozen=True)
class _SelectShape:
    """What the proof needs of an INSERT ... FROM SELECT, read once per statement (a traversal
    costs more than the INSERT's own execution): the company filters of its WHERE, the tables its
    SELECT reads, the data-modifying CTEs it reads, and what it writes as company_id."""

    filters: tuple[tuple[Any, BindParameter[Any]], ...]  # (table, value) of `table.company_id = :value`
    reads: _Reads
    written: Any  # a Column (of a table or of a CTE it reads), a BindParameter or None


_select_shapes: weakref.WeakKeyDictionary[Insert, _SelectShape] = weakref.WeakKeyDictionary()


def _select_shape(statement: Insert, table: str) -> _SelectShape:
    shape = _select_shapes.get(statement)
    if shape is not None:
        return shape
    chosen = statement.select
    if not isinstance(chosen, Select):  # a UNION...: each part would need the proof
        raise TenantScopeError(f"INSERT ... FROM SELECT into {table} by a bound session: one SELECT only")
    names = statement._select_names or []
    written: Any = (
        list(chosen.selected_columns)[names.index(_COMPANY_COLUMN)] if _COMPANY_COLUMN in names else None
    )
    if isinstance(written, Label):
        written = written.element
    shape = _select_shapes[statement] = _SelectShape(
        filters=tuple(
            (column.table, value)
            for column, value in _equalities(chosen.whereclause)
            if column.key == _COMPANY_COLUMN
        ),
        reads=_reads(chosen),
        written=written,
    )
    return shape


def _check_scoped_select(statement: Insert, params: Mapping[str, Any], tenant: uuid.UUID, table: str) -> None:
    """Refuse an INSERT ... FROM SELECT unless its rows are provably the bound company's (module
    docstring). Conservative: only plain `table.company_id = :value` terms ANDed at the top of the
    WHERE count, for the tables of the SELECT's own FROM (`_reads` refuses any other). The rows of
    a data-modifying CTE it reads count as the company's only when that CTE is an INSERT into a
    company's table: `_check_data_modifying_ctes` proves each one before the statement is sent."""
    shape = _select_shape(statement, table)
    reads = shape.reads
    filtered = {found for found, value in shape.filters if _is(_bound_value(value, params), tenant)}
    unfiltered = (reads.tables & _company_tables()) - filtered
    written = shape.written
    names_tenant = (
        (isinstance(written, Column) and written.key == _COMPANY_COLUMN and written.table in filtered)
        or (isinstance(written, BindParameter) and _is(_bound_value(written, params), tenant))
        or (isinstance(written, Column) and _returns_company_of(written, reads.ctes))
    )
    unproven = reads.unprovable or any(not _inserts_company_rows(cte) for cte in reads.ctes)
    if unfiltered or unproven or not names_tenant:
        raise TenantScopeError(
            f"INSERT ... FROM SELECT into {table} through a bound session must read only the bound company's "
            "rows (company_id = it in the WHERE, for every company table; a CTE only if it INSERTs the "
            "company's rows) and write its company_id"
        )


@dataclass(frozen=True)
class _Reads:
    """What a SELECT reads rows from, as the proof sees it."""

    tables: frozenset[Any]  # the tables in its own FROM (through joins)
    ctes: tuple[CTE, ...]  # the data-modifying CTEs read anywhere in it, proven on their own
    unprovable: bool  # a company's table read where no filter of its WHERE applies, or a FROM unknown


def _reads(root: ClauseElement) -> _Reads:
    """What `root` (a SELECT, or a value written) reads rows from. A company's table is provable
    only in `root`'s own FROM, where its WHERE can filter it: in any SELECT nested in it (a
    subquery, EXISTS, a plain CTE), or through an alias, it is not, correlated or not. A
    data-modifying CTE is not looked into: its tables are its own to prove."""
    tables: set[Any] = set()
    ctes: dict[CTE, None] = {}
    unprovable = False
    for select_ in _selects_in(root, ctes):
        for source in _sources(_froms(select_)):
            if isinstance(source, CTE) and isinstance(source.element, UpdateBase):
                ctes[source] = None
            elif isinstance(source, TableClause):
                if select_ is root:
                    tables.add(source)
                else:
                    unprovable |= source in _company_tables()
            elif isinstance(source, TableValuedAlias | Values):
                pass  # a function's rows (json_each) or rows written into the statement
            elif isinstance(source, AliasedReturnsRows) and isinstance(source.element, TableClause):
                unprovable |= source.element in _company_tables()  # no filter of the WHERE names it
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


def _froms(select_: Select[Any]) -> list[Any]:
    """The FROM list of `select_` on its own, before any correlation with an enclosing SELECT."""
    return list(select_.get_final_froms())


def _sources(froms: Sequence[Any]) -> Iterator[Any]:
    """FROM elements, joins taken apart."""
    for source in froms:
        if isinstance(source, Join):
            yield from _sources([source.left, source.right])
        else:
            yield source


def _inserts_company_rows(cte: CTE) -> bool:
    """Whether `cte` is an INSERT into a company's table (whose rows are proven the bound company's
    before the statement is sent), rather than an UPDATE, a DELETE or another table's rows."""
    return isinstance(cte.element, Insert) and cte.element.table in _company_tables()


def _returns_company_of(column: Column[Any], ctes: tuple[CTE, ...]) -> bool:
    """Whether `column` is of one of `ctes` and is the company_id of the rows that CTE INSERTs."""
    cte: Any = column.table
    if cte not in ctes:
        return False
    position = next((at for at, each in enumerate(cte.c) if each is column), None)
    if position is None:
        return False
    source = list(cte.element.exported_columns)[position]
    if isinstance(source, Label):
        source = source.element
    return (
        isinstance(source, Column) and source.key == _COMPANY_COLUMN and source.table in (cte.element.table,)
    )


# --- data-modifying CTEs -------------------------------------------------------------------------

_writes_of_compiled: weakref.WeakKeyDictionary[SQLCompiler, tuple[UpdateBase, ...]] = (
    weakref.WeakKeyDictionary()
)


def _cte_writes(compiled: SQLCompiler) -> tuple[UpdateBase, ...]:
    """The INSERTs, UPDATEs and DELETEs a compiled statement runs as CTEs, at any depth: found once
    per compiled form (SQLAlchemy caches those), so any other statement pays one dict lookup."""
    found = _writes_of_compiled.get(compiled)
    if found is None:
        statement = compiled.statement
        found = _writes_of_compiled[compiled] = (
            tuple(
                dict.fromkeys(
                    element.element
                    for element in iterate(statement)
                    if isinstance(element, CTE) and isinstance(element.element, UpdateBase)
                )
            )
            if statement is not None
            else ()
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
    """Every INSERT, UPDATE or DELETE into a company's table that a statement runs as a CTE, through
    a TenantSession, whatever the statement around it (module docstring). Checked here, on the
    compiled statement with the values it is about to be sent with, rather than in `_check_inserts`:
    only the compiled form tells cheaply whether a statement holds such a CTE."""
    # None: a COPY (db.bulk_rows), which checks its own rows.
    if context is None or not isinstance(context.compiled, SQLCompiler):
        return
    compiled = context.compiled
    if not _cte_writes(compiled):
        return
    # The values by each parameter's key, as `_bound_value` reads them: the compiled form may be
    # another statement's of the same shape, whose own values are not these.
    _check_cte_writes(
        connection,
        compiled,
        [
            {parameter.key: values[name] for parameter, name in compiled.bind_names.items() if name in values}
            for values in context.compiled_parameters
        ],
    )


def _check_cte_writes(
    connection: Connection, compiled: SQLCompiler, executions: list[Mapping[str, Any]]
) -> None:
    """The data-modifying CTEs of `compiled`, run once per mapping of `executions` (values by key)."""
    writes = _cte_writes(compiled)
    if not writes:
        return
    info = _connection_tenancy.get(connection)
    owned = _company_tables()
    writing = [written for written in writes if written.table in owned]
    if info is None or not writing:
        return
    tenant = info.get(_TENANT)
    if tenant == _ACROSS_COMPANIES:
        return
    if not isinstance(tenant, uuid.UUID):
        raise TenantScopeError(f"rows written into {_name(writing[0])} through a session bound to no company")
    for params in executions:
        for written in writing:
            _check_cte_write(written, params, tenant)


def _check_cte_write(statement: UpdateBase, params: Mapping[str, Any], tenant: uuid.UUID) -> None:
    """Refuse a data-modifying CTE of a company's table unless its rows are provably the bound
    company's (module docstring)."""
    table = _name(statement)
    if not isinstance(statement, Insert):
        raise TenantScopeError(
            f"an UPDATE or DELETE of {table} as a CTE through a bound session: the company filter does "
            "not reach inside a CTE"
        )
    shape = _cte_shape(statement, table)
    if statement.select is not None:
        _check_scoped_select(statement, params, tenant, table)
    elif not shape.companies or any(
        not _is(_bound_value(value, params), tenant) for value in shape.companies
    ):
        raise TenantScopeError(f"the rows of a CTE's INSERT into {table} must name the bound company")


@dataclass(frozen=True)
class _CteShape:
    """What the proof needs of a CTE's INSERT besides its SELECT's shape, read once per statement."""

    companies: tuple[Any, ...]  # each row's company_id as written into the statement


_cte_shapes: weakref.WeakKeyDictionary[Insert, _CteShape] = weakref.WeakKeyDictionary()


def _cte_shape(statement: Insert, table: str) -> _CteShape:
    """Refuses what no values can make the company's: an ON CONFLICT that may update (a row of
    another company with the same key), RETURNING more than the table's own columns, rows given
    only as execution parameters, or values that read a company's table."""
    shape = _cte_shapes.get(statement)
    if shape is not None:
        return shape
    conflict = statement._post_values_clause
    if conflict is not None and not isinstance(conflict, PostgresDoNothing | SqliteDoNothing):
        raise TenantScopeError(
            f"a CTE's INSERT into {table} through a bound session may only DO NOTHING on conflict"
        )
    for returned in statement.exported_columns:  # what it RETURNs
        column = returned.element if isinstance(returned, Label) else returned
        if not (isinstance(column, Column) and column.table in (statement.table,)):
            raise TenantScopeError(f"a CTE's INSERT into {table} may return only the columns of {table}")
    rows = list(_rows_written(statement))
    if statement.select is None and not rows:
        raise TenantScopeError(
            f"a CTE's INSERT into {table} through a bound session must write its rows into the statement"
        )
    reads = [_reads(value) for row in rows for value in row.values() if isinstance(value, ClauseElement)]
    if any(read.unprovable or read.ctes for read in reads):
        raise TenantScopeError(f"the values of a CTE's INSERT into {table} may not read a company's table")
    shape = _cte_shapes[statement] = _CteShape(
        companies=tuple(row.get(_COMPANY_COLUMN, _UNNAMED) for row in rows),
    )
    return shape


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


def _bound_value(parameter: Any, params: Mapping[str, Any]) -> object:
    """The value a bind parameter takes when the statement runs with `params`."""
    if not isinstance(parameter, BindParameter):
        return _UNNAMED
    if parameter.key in params:
        return params[parameter.key]
    return _UNNAMED if parameter.callable is not None else parameter.value


def _name(statement: UpdateBase) -> str:
    """The name of the table an INSERT, UPDATE or DELETE writes."""
    table: Any = statement.table
    return str(table.name)


def _rows_written(statement: Insert) -> Iterator[dict[str, Any]]:
    """Each row written into `statement` (`.values(...)`), by column name."""
    rows: list[Any] = [row for group in statement._multi_values for row in group]
    if statement._values:
        rows.append(statement._values)
    positions = [column.key for column in statement.table.columns]
    for row in rows:
        if isinstance(row, dict | Mapping):
            yield {key if isinstance(key, str) else key.key: value for key, value in row.items()}
        else:
            yield dict(zip(positions, row, strict=False))


def _companies_written(statement: Insert) -> list[object]:
    """The company each row written into `statement` (`.values(...)`) names, or _UNNAMED."""
    named: list[object] = []
    for row in _rows_written(statement):
        value = row.get(_COMPANY_COLUMN, _UNNAMED)
        named.append(value.value if isinstance(value, BindParameter) else value)
    return named


def _stamped(row: dict[str, Any], in_statement: object, tenant: uuid.UUID, table: str) -> dict[str, Any]:
    company = row.get(_COMPANY_COLUMN, in_statement)
    if company is _UNNAMED or company is None:
        return {**row, _COMPANY_COLUMN: tenant}
    if not _is(company, tenant):
        raise TenantScopeError(f"a row inserted into {table} names another company")
    return row


def _is(company: object, tenant: uuid.UUID) -> bool:
    return company == tenant or (isinstance(company, str) and parse_uuid(company) == tenant)


ModelT = TypeVar("ModelT", bound=CompanyOwned)


class CompanyRepository(Generic[ModelT]):
    """Base repository of a company-owned model: the session's company scopes every statement."""

    model: ClassVar[type[Any]]
    label: ClassVar[str]  # how errors name a record, e.g. "Employee"

    def __init__(self, session: Session) -> None:
        self.session = session

    def select(self, *options: ORMOption) -> Select[ModelT]:
        """The model's SELECT; no company filter here: the session adds it when it runs."""
        statement: Select[ModelT] = select(self.model)
        return statement.options(*options) if options else statement

    def find(
        self, record_id: uuid.UUID | str, *options: ORMOption, for_update: bool = False
    ) -> ModelT | None:
        parsed = parse_uuid(record_id)
        if parsed is None:
            return None
        statement = self.select(*options).where(self.model.id == parsed)
        if for_update:  # the record's row only, not those its options join; read afresh
            statement = statement.with_for_update(of=self.model).execution_options(populate_existing=True)
        return self.session.scalars(statement).unique().one_or_none()

    def get(self, record_id: uuid.UUID | str, *options: ORMOption, for_update: bool = False) -> ModelT:
        record = self.find(record_id, *options, for_update=for_update)
        if record is None:
            raise NotFound.record(self.label)
        return record

    def add(self, record: ModelT) -> ModelT:
        self.session.add(record)
        return record


def parse_uuid(value: uuid.UUID | str) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        return None


_CLAIM_TRANSACTION_ID = "SELECT pg_current_xact_id()"
_READS_ONLY = "reads_only"


def reads_only(session: Session) -> Session:
    """Declare that `session` only reads (a GET's): its transactions are not given an id when they
    begin, so one left open never holds the `updated_since` feed."""
    session.info[_READS_ONLY] = True
    return session


@event.listens_for(TenantSession, "after_begin")
def claim_transaction_id(session: Session, _transaction: Any, connection: Connection) -> None:
    """A session that may write gets its transaction id as its transaction begins on PostgreSQL,
    before the code stamps any change (`updated_at` from the clock, the ORM's defaults): the horizon
    (db.clock's horizon) then waits for every transaction that may already hold a stamp."""
    if connection.dialect.name == "postgresql" and not session.info.get(_READS_ONLY):
        connection.exec_driver_sql(_CLAIM_TRANSACTION_ID)
