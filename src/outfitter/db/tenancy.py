"""Tenant scoping by the session itself.

A `TenantSession` is either bound to one company (`bind_company`, done by the request pipeline for
every authenticated request) or declared to work across companies (`across_companies`, for the
few paths that must: the gateways' webhooks and pages, reconciliation, operators' commands). On a
bound session every ORM SELECT, UPDATE and DELETE that touches a company-owned table gets the
company filter added by `_scope_to_company`, relationship loads included, and every new
company-owned ORM object is stamped with the company (or refused if it names another). A session
that is neither refuses to touch company-owned tables at all, so a new query cannot forget the
filter: there is no filter to remember.

Rows written other than by the ORM's flush go through one path, `db.company_writes`, and the
session's connection refuses any other INSERT into a company's table (`db.write_checks`, which
reads here whom a connection works for and whether its session is flushing).
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final, Generic, TypeVar

from sqlalchemy import Connection, Executable, Row, Select, Table, bindparam, event, select
from sqlalchemy.orm import ORMExecuteState, Session, with_loader_criteria
from sqlalchemy.orm.interfaces import ORMOption
from sqlalchemy.sql.elements import ClauseElement
from sqlalchemy.sql.util import find_tables

from outfitter.core.errors import NotFound
from outfitter.db.base import Base, CompanyOwned

_TENANT: Final = "tenant"
_FLUSHING: Final = "flushing"
ACROSS_COMPANIES: Final = "across companies"


class TenantScopeError(RuntimeError):
    """A programming error: company data touched through a session that did not say whose."""


class TenantSession(Session):
    """The application's session class; see the module docstring."""


def bind_company(session: Session, company_id: uuid.UUID) -> None:
    session.info[_TENANT] = company_id


def across_companies(session: Session) -> Session:
    """Declare that `session` legitimately reads and writes every company's records."""
    session.info[_TENANT] = ACROSS_COMPANIES
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
    if tenant == ACROSS_COMPANIES:
        if company_id is None:
            raise TenantScopeError("a session across companies must name the company_id it writes for")
        return company_id
    bound = company_of(session)
    if company_id is not None and company_id != bound:
        raise TenantScopeError("company_id names another company than the one the session is bound to")
    return bound


def tenant_in(info: Mapping[Any, Any]) -> uuid.UUID | str | None:
    """Whom a TenantSession (by its `info`) works for: a company's id, ACROSS_COMPANIES, or None."""
    tenant = info.get(_TENANT)
    return tenant if isinstance(tenant, uuid.UUID) or tenant == ACROSS_COMPANIES else None


_touches_company_data: weakref.WeakKeyDictionary[Executable, bool] = weakref.WeakKeyDictionary()


def touches_company_data(statement: Executable) -> bool:
    """Whether `statement` reads or writes a company-owned table anywhere, subqueries included."""
    known = _touches_company_data.get(statement)
    if known is None:
        assert isinstance(statement, ClauseElement)
        owned = company_tables()
        known = _touches_company_data[statement] = any(
            table in owned for table in find_tables(statement, include_crud=True)
        )
    return known


def company_tables() -> frozenset[Table]:
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
        owned = company_tables()
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
    if tenant == ACROSS_COMPANIES:
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
        elif tenant != ACROSS_COMPANIES:
            raise TenantScopeError(f"a new {type(record).__name__} added through an unbound session")
    session.info[_FLUSHING] = True  # its INSERTs are of the objects just checked


@event.listens_for(TenantSession, "after_flush")
@event.listens_for(TenantSession, "after_soft_rollback")
def _flush_ends(session: Session, *_: Any) -> None:
    session.info.pop(_FLUSHING, None)


def flushing(info: Mapping[Any, Any]) -> bool:
    """Whether the TenantSession (by its `info`) is flushing: from after its new objects were
    checked until the flush ends or fails."""
    return bool(info.get(_FLUSHING))


# The `info` of the TenantSession each connection works for, read when a statement runs
# (db.write_checks), since a request binds its company after its transaction began.
_connection_info: weakref.WeakKeyDictionary[Connection, dict[Any, Any]] = weakref.WeakKeyDictionary()


@event.listens_for(TenantSession, "after_begin")
def _note_connection(session: Session, _transaction: Any, connection: Connection) -> None:
    _connection_info[connection] = session.info


def connection_info(connection: Connection) -> dict[Any, Any] | None:
    """The `info` of the TenantSession `connection` works for, or None (another kind of session)."""
    return _connection_info.get(connection)


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
