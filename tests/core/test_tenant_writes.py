"""Tenancy of writes and of the explicit escapes: company rows are written through one path
(db.company_writes), which binds their company to the session's; any other INSERT into a company's
table is refused, and neither an unscoped read nor an event naming a company can cross companies
silently."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from sqlalchemy import Engine, bindparam, delete, func, insert, literal, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ClauseElement

from outfitter.db.asyncpg_reads import AsyncpgReads
from outfitter.db.base import utcnow
from outfitter.db.bulk_rows import rows_written_meanwhile
from outfitter.db.company_writes import company_insert, company_insert_statement, rows_statement
from outfitter.db.copy_rows import COPY_FROM
from outfitter.db.reads import Read, run_in_session
from outfitter.db.tenancy import TenantScopeError, TenantSession, across_companies, bind_company
from outfitter.models import Country, Employee, Event, EventType
from outfitter.outbox import NewEvent, event_rows, events_written_with_values, record_events
from outfitter.people.repository import _employee_created
from tests.factories import CompanyFactory


@pytest.fixture
def two_companies(companies: CompanyFactory) -> tuple[uuid.UUID, uuid.UUID]:
    return companies.create("First Ltd").company_id, companies.create("Second Ltd").company_id


@pytest.fixture
def bound(engine: Engine, two_companies: tuple[uuid.UUID, uuid.UUID]) -> Iterator[Session]:
    """A session bound to the first company, as every request's is."""
    with TenantSession(engine) as session:
        bind_company(session, two_companies[0])
        yield session
        session.rollback()


def _employee(session: Session, number: int, company_id: uuid.UUID | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": uuid.uuid4(),
        "first_name": "Staff",
        "last_name": f"N{number}",
        "email": f"n{number}-{uuid.uuid4().hex[:6]}@example.com",
        "country_id": session.scalars(select(Country.id).where(Country.code == "NG")).one(),
        "phone": "+234 801 234 5678",
        "address": "1 Marina Road, Lagos",
        # Every column given, as the creates give theirs: a statement on the driver computes no default.
        "created_at": utcnow(),
        "updated_at": utcnow(),
        "custom_fields": {},
        "sensitive_fields": {},
    }
    if company_id is not None:
        row["company_id"] = company_id
    return row


def _companies_of_employees(engine: Engine) -> dict[uuid.UUID, int]:
    with Session(engine) as session:
        rows = session.execute(select(Employee.company_id, func.count()).group_by(Employee.company_id))
        return {company: count for company, count in rows}


EMPLOYEES = Employee.__table__


def _seed(engine: Engine, *companies: uuid.UUID) -> None:
    """An employee of each company, written through the path."""
    for company in companies:
        with TenantSession(engine) as session, session.begin():
            bind_company(session, company)
            company_insert(session, Employee, [_employee(session, 1)])


# --- no INSERT into a company's table but the path's --------------------------------------------


def _refused() -> Any:
    return pytest.raises(TenantScopeError, match=r"not made by db\.company_writes")


# Each names the session's own company: what is refused is the way in, not the company.
INSERTS_OUTSIDE_THE_PATH: dict[str, Callable[[Session, uuid.UUID], object]] = {
    "ORM insert, multi-row values": lambda s, own: s.execute(
        insert(Employee).values([_employee(s, 1, own), _employee(s, 2, own)])
    ),
    "ORM insert, one row of values": lambda s, own: s.execute(
        insert(Employee).values(**_employee(s, 1, own))
    ),
    "ORM bulk insert (executemany)": lambda s, own: s.execute(
        insert(Employee), [_employee(s, 1, own), _employee(s, 2, own)]
    ),
    "Core table insert through the session": lambda s, own: s.execute(
        insert(EMPLOYEES), [_employee(s, 1, own)]
    ),
    "Core insert on the session's connection": lambda s, own: s.connection().execute(
        insert(EMPLOYEES), [_employee(s, 1, own), _employee(s, 2, own)]
    ),
    "Core insert on the session's connection, one row": lambda s, own: s.connection().execute(
        insert(EMPLOYEES).values(**_employee(s, 1, own))
    ),
    "INSERT ... FROM SELECT": lambda s, own: s.execute(
        _copy_of_employees(literal(own), Employee.company_id == own)
    ),
    "a copy of the path's statement, its values changed": lambda s, own: s.connection().execute(
        rows_statement(EMPLOYEES, s.get_bind().dialect.name, (), ()).values(first_name="Changed"),
        [_employee(s, 1, own)],
    ),
}


@pytest.mark.parametrize("path", list(INSERTS_OUTSIDE_THE_PATH))
def test_every_insert_into_a_company_table_outside_the_path_is_refused(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID], path: str
) -> None:
    with pytest.raises(TenantScopeError, match=r"not made by db\.company_writes"):
        INSERTS_OUTSIDE_THE_PATH[path](bound, two_companies[0])
    bound.rollback()
    assert _companies_of_employees(engine) == {}


def test_a_session_across_companies_and_an_unbound_one_refuse_them_too(
    engine: Engine, two_companies: tuple[uuid.UUID, uuid.UUID]
) -> None:
    first = two_companies[0]
    with across_companies(TenantSession(engine)) as session, _refused():
        session.execute(insert(Employee), [_employee(session, 1, first)])
    with TenantSession(engine) as session, _refused():
        session.connection().execute(insert(EMPLOYEES), [_employee(session, 1, first)])
    assert _companies_of_employees(engine) == {}


def test_the_orm_keeps_writing_and_a_failed_flush_lets_nothing_else_in(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID]
) -> None:
    """`session.add` is the other way in: the flush's INSERTs pass, its objects stamped first. A
    flush that fails leaves no door open behind it."""
    first, other = two_companies
    row = _employee(bound, 1)
    bound.add(Employee(**row))
    bound.commit()
    bound.add(Employee(**{**row, "id": uuid.uuid4()}))  # the same email: the flush fails
    with pytest.raises(IntegrityError):
        bound.flush()
    bound.rollback()
    with pytest.raises(TenantScopeError, match=r"not made by db\.company_writes"):
        bound.connection().execute(insert(EMPLOYEES), [_employee(bound, 2, first)])
    bound.rollback()
    with pytest.raises(TenantScopeError, match="another company"):
        bound.add(Employee(**_employee(bound, 3, other)))
        bound.flush()
    bound.rollback()
    assert _companies_of_employees(engine) == {first: 1}


# --- the path binds company_id to the session's company ---------------------------------------


@pytest.mark.parametrize("count", [1, 2, COPY_FROM], ids=["one row", "executemany", "copy"])
def test_the_path_binds_rows_to_the_bound_company_and_refuses_another(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID], count: int
) -> None:
    first, other = two_companies
    with pytest.raises(TenantScopeError, match="names another company"):
        company_insert(bound, Employee, [*_batch(bound, count - 1, None), _employee(bound, 99, other)])
    bound.rollback()
    company_insert(bound, Employee, _batch(bound, count, None))  # no company named: the session's
    company_insert(bound, EMPLOYEES, _batch(bound, count, first))  # its own named: the same
    bound.commit()
    assert _companies_of_employees(engine) == {first: 2 * count}


@pytest.mark.parametrize("count", [2, COPY_FROM], ids=["insert", "copy"])
def test_the_path_needs_a_company_and_across_companies_each_rows_own(
    engine: Engine, two_companies: tuple[uuid.UUID, uuid.UUID], count: int
) -> None:
    first, second = two_companies
    with TenantSession(engine) as unbound, pytest.raises(TenantScopeError, match="bound to no company"):
        company_insert(unbound, Employee, _batch(unbound, count, first))
    with across_companies(TenantSession(engine)) as session:
        with pytest.raises(TenantScopeError, match="must name the company_id"):
            company_insert(session, Employee, _batch(session, count, None))
        company_insert(session, Employee, [*_batch(session, count, first), *_batch(session, 1, second)])
        session.commit()
    assert _companies_of_employees(engine) == {first: count, second: 1}


def test_the_paths_statement_run_without_it_is_checked_by_the_session(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID]
) -> None:
    """The path's own statement run on the connection directly, not by `company_insert`: the
    session's check reads the company_id of every row it runs with."""
    first, other = two_companies
    statement = rows_statement(EMPLOYEES, bound.get_bind().dialect.name, (), ())
    for rows in ([_employee(bound, 1, other)], [_employee(bound, 1, first), _employee(bound, 2)]):
        with pytest.raises(TenantScopeError, match="not the session's company"):
            bound.connection().execute(statement, rows)
        bound.rollback()
    bound.connection().execute(statement, [_employee(bound, 3, first)])
    bound.commit()
    assert _companies_of_employees(engine) == {first: 1}


def test_on_conflict_do_nothing_through_the_path(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID]
) -> None:
    row = _employee(bound, 1)
    unique = ["company_id", "email"]
    written = company_insert(bound, Employee, [row], unique=unique, returning=["id"])
    assert written is not None and written.scalar_one() == row["id"]
    again = company_insert(bound, Employee, [{**row, "id": uuid.uuid4()}], unique=unique, returning=["id"])
    assert again is not None and again.first() is None  # taken: nothing written, nothing raised
    bound.commit()
    assert _companies_of_employees(engine) == {two_companies[0]: 1}


# --- INSERT ... SELECT: proven when the path builds it ---------------------------------------------

_COPIED = ["id", "company_id", "first_name", "last_name", "email", "country_id", "phone", "address"]
# A CTE's INSERT runs no Python-side default: every column with one is given.
_HIRED = [*_COPIED, "created_at", "updated_at", "custom_fields", "sensitive_fields"]
COMPANY = bindparam("company_id")  # the parameter the path binds to the session's company


def _copy_of_employees(
    company: Any, *where: Any, table: Any = Employee, email: Any = "copy@example.com"
) -> Any:
    """INSERT ... FROM SELECT (by hand, not the path): a copy of employees read from `table`
    (Employee or its Table), writing `company` as their company and `email` (a value or an
    expression) as their email."""
    return insert(table).from_select(_COPIED, _employees_copied(company, *where, table=table, email=email))


def _employees_copied(
    company: Any, *where: Any, table: Any = Employee, email: Any = "copy@example.com"
) -> Any:
    """The SELECT of `_copy_of_employees`; `company` None leaves its column out."""
    columns = table if table is Employee else table.c
    return (
        select(
            bindparam("copy_id", type_=EMPLOYEES.c.id.type),
            *([] if company is None else [company]),
            columns.first_name,
            columns.last_name,
            email if isinstance(email, ClauseElement) else literal(email),
            columns.country_id,
            columns.phone,
            columns.address,
        )
        .where(*where)
        .limit(1)
    )


_EMAILS = select(Employee.email).cte("emails")

# Each reads (or writes) another company's rows, or cannot be proven not to: refused as it is built.
INSERT_SELECTS_CROSSING_COMPANIES: dict[str, Callable[[uuid.UUID], Any]] = {
    "filtered on a company that is not the parameter": lambda other: _employees_copied(
        COMPANY, Employee.company_id == other
    ),
    "reads every company": lambda other: _employees_copied(COMPANY),
    "reads the bound company, writes another": lambda other: _employees_copied(
        literal(other), Employee.company_id == COMPANY
    ),
    "filtered by an OR that lets another company in": lambda other: _employees_copied(
        Employee.company_id, (Employee.company_id == COMPANY) | (Employee.company_id == other)
    ),
    "a subquery reads every company": lambda other: _employees_copied(
        Employee.company_id,
        Employee.company_id == COMPANY,
        Employee.email.in_(select(Country.name).where(Country.code == "NG"))
        | Employee.id.in_(select(Event.subject_id)),
    ),
    # The same table in a subquery's own FROM: the top WHERE's filter does not reach it.
    "a subquery of the filtered table copies another company's email": lambda other: _employees_copied(
        Employee.company_id,
        Employee.company_id == COMPANY,
        email=select(Employee.email).where(Employee.company_id == other).correlate(None).scalar_subquery(),
    ),
    "a plain CTE of the filtered table reads every company": lambda other: _employees_copied(
        Employee.company_id,
        Employee.company_id == COMPANY,
        email=select(_EMAILS.c.email).limit(1).scalar_subquery(),
    ),
    "reads a CTE the path did not build": lambda other: (
        lambda hired: select(hired.c.id, hired.c.company_id)
    )(_hand_made_hiring(other)).add_columns(
        literal("A"),
        literal("B"),
        literal("c@example.com"),
        literal(uuid.uuid4()),
        literal("1"),
        literal("2"),
    ),
}


def _hand_made_hiring(company: uuid.UUID) -> Any:
    return (
        insert(EMPLOYEES)
        .values(id=uuid.uuid4(), company_id=company)
        .returning(EMPLOYEES.c.id, EMPLOYEES.c.company_id)
        .cte("hired")
    )


@pytest.mark.one_database
@pytest.mark.parametrize("path", list(INSERT_SELECTS_CROSSING_COMPANIES))
def test_the_path_refuses_an_insert_select_not_proven_the_companys(
    two_companies: tuple[uuid.UUID, uuid.UUID], path: str
) -> None:
    with pytest.raises(TenantScopeError, match="FROM SELECT into employees"):
        company_insert_statement(
            EMPLOYEES, columns=_COPIED, select=INSERT_SELECTS_CROSSING_COMPANIES[path](two_companies[1])
        )


@pytest.mark.parametrize("table", ["ORM entity", "Table"])
def test_an_insert_select_through_the_path_is_bound_to_the_company(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID], table: str
) -> None:
    """The allowed case (the outbox's fan-out is one): the SELECT reads only the company that the
    parameter company_id names, which the path binds to the session's, and writes that company_id
    (or leaves it out: the path writes the parameter)."""
    first, other = two_companies
    _seed(engine, first, other)
    source: Any = Employee if table == "ORM entity" else EMPLOYEES
    columns = source if table == "ORM entity" else source.c
    copy = company_insert_statement(
        EMPLOYEES,
        columns=_COPIED,
        select=_employees_copied(columns.company_id, columns.company_id == COMPANY, table=source),
    )
    without_company = company_insert_statement(
        EMPLOYEES,
        columns=[name for name in _COPIED if name != "company_id"],
        select=_employees_copied(
            None, columns.company_id == COMPANY, table=source, email="other@example.com"
        ),
    )
    company_insert(bound, copy, parameters={"copy_id": uuid.uuid4()})
    company_insert(bound, without_company, parameters={"copy_id": uuid.uuid4()})
    bound.commit()
    with pytest.raises(TenantScopeError, match="names another company"):
        company_insert(bound, copy, parameters={"copy_id": uuid.uuid4(), "company_id": other})
    bound.rollback()
    with across_companies(TenantSession(engine)) as session:  # across: the company is named
        with pytest.raises(TenantScopeError, match="must name the company_id"):
            company_insert(session, copy, parameters={"copy_id": uuid.uuid4()})
        company_insert(session, without_company, parameters={"copy_id": uuid.uuid4(), "company_id": other})
        session.commit()
    assert _companies_of_employees(engine) == {first: 3, other: 2}


# --- data-modifying CTEs: a record and what it implies, written in one statement ----------------

_EVENT_COLUMNS = ["id", "company_id", "type", "subject_type", "subject_id", "actor", "created_at", "data"]


def _hiring(columns: Sequence[str], *returning: str) -> Any:
    """`WITH hired AS (INSERT INTO employees ... RETURNING id, company_id)`, by the path: the
    employee's row its parameters (as the creates write theirs)."""
    return company_insert_statement(
        EMPLOYEES,
        columns=columns,
        unique=["company_id", "email"],
        returning=returning or ("id", "company_id"),
    ).cte("hired")


def _announcing(hired: Any, company: Any = None, *where: Any) -> Any:
    """... SELECT for an INSERT INTO events ... FROM hired: the employee's event, its company_id
    `hired.company_id` unless `company` says otherwise."""
    events = Event.__table__
    return select(
        literal(uuid.uuid4()),
        hired.c.company_id if company is None else company,
        literal(EventType.EMPLOYEE_CREATED, events.c.type.type),
        literal("employee"),
        hired.c.id,
        literal("test"),
        literal(utcnow(), events.c.created_at.type),
        literal({"n": 1}, events.c.data.type),
    ).where(*where)


def _announced(hired: Any, company: Any = None, *where: Any, returning: Sequence[str] = ()) -> Any:
    return company_insert_statement(
        Event.__table__,
        columns=_EVENT_COLUMNS,
        select=_announcing(hired, company, *where),
        returning=returning,
    )


def _companies_of_events(engine: Engine) -> dict[uuid.UUID, int]:
    with Session(engine) as session:
        rows = session.execute(select(Event.company_id, func.count()).group_by(Event.company_id))
        return {company: count for company, count in rows}


# Each could write another company's rows (or another company's data into the bound one's)
# through a data-modifying CTE: refused as it is built, whatever the database.
CTES_REFUSED_AS_BUILT: dict[str, Callable[[uuid.UUID], Any]] = {
    "the SELECT writes another company": lambda other: _announced(_hiring(_HIRED), literal(other)),
    "the SELECT also reads every company's employees": lambda other: _announced(
        _hiring(_HIRED), None, Employee.email == "n1@example.com"
    ),
    "the SELECT writes as company_id a CTE column that is not its company_id": lambda other: (
        lambda hired: _announced(hired, hired.c.id)
    )(_hiring(_HIRED)),
    "the SELECT reads a CTE the path did not build": lambda other: _announced(_hand_made_hiring(other)),
    "a DELETE of a company's rows as a CTE of the path's statement": lambda other: company_insert_statement(
        Event.__table__,
        columns=_EVENT_COLUMNS,
        select=_announcing(_hiring(_HIRED)),
        ctes=[delete(EMPLOYEES).where(EMPLOYEES.c.company_id == other).cte("gone")],
    ),
}


@pytest.mark.one_database
@pytest.mark.parametrize("path", list(CTES_REFUSED_AS_BUILT))
def test_the_path_refuses_to_build_a_data_modifying_cte_not_proven_the_companys(
    two_companies: tuple[uuid.UUID, uuid.UUID], path: str
) -> None:
    with pytest.raises(TenantScopeError, match=r"FROM SELECT into events|UPDATE or DELETE"):
        CTES_REFUSED_AS_BUILT[path](two_companies[1])


# Each writes a company's table as a CTE of a statement the path did not build (or no longer is
# the one it built): refused before it is sent, on SQLite too, which could not run them.
CTES_REFUSED_AS_SENT: dict[str, Callable[[uuid.UUID], Any]] = {
    "a plain SELECT of a CTE the path built": lambda other: select(_hiring(_HIRED).c.id),
    "an UPDATE of every company's employees as a CTE": lambda other: select(
        update(EMPLOYEES).values(first_name="Renamed").returning(EMPLOYEES.c.id).cte("renamed").c.id
    ),
    "a DELETE added to the path's statement after it was built": lambda other: _announced(
        _hiring(_HIRED)
    ).add_cte(delete(EMPLOYEES).where(EMPLOYEES.c.company_id == other).cte("gone")),
}


@pytest.mark.parametrize("path", list(CTES_REFUSED_AS_SENT))
def test_a_data_modifying_cte_outside_the_paths_statements_is_refused(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID], path: str
) -> None:
    first, other = two_companies
    _seed(engine, first, other)
    statement = CTES_REFUSED_AS_SENT[path](other)
    hired = {} if "UPDATE" in path else {**_employee(bound, 2, first), "company_id": first}
    with _refused():
        bound.connection().execute(statement, hired)
    bound.rollback()
    assert _companies_of_employees(engine) == {first: 1, other: 1}
    assert _companies_of_events(engine) == {}


def test_a_data_modifying_cte_through_the_path_is_bound_to_the_company(
    postgres_only: None, engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID]
) -> None:
    """The creates' shape: the CTE's row is the path's parameters, the SELECT reads only that CTE
    and writes its company_id; the company is the session's, whatever the caller says.
    PostgreSQL only: SQLite has no data-modifying CTEs."""
    first, other = two_companies
    statement = _announced(_hiring(_HIRED), returning=("id",))
    written = company_insert(bound, statement, parameters=_employee(bound, 1))
    assert written is not None and len(written.all()) == 1
    with pytest.raises(TenantScopeError, match="names another company"):
        company_insert(bound, statement, parameters=_employee(bound, 2, other))
    bound.rollback()
    with pytest.raises(TenantScopeError, match="not the session's company"):
        bound.connection().execute(statement, _employee(bound, 2, other))  # the path left out
    bound.rollback()
    company_insert(bound, statement, parameters=_employee(bound, 3, first))
    bound.commit()
    assert _companies_of_employees(engine) == {first: 1}
    assert _companies_of_events(engine) == {first: 1}


def test_the_employee_create_statement_is_refused_naming_another_company(
    postgres_only: None, engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID]
) -> None:
    """The create's own one statement (people.repository), run with the other company's id: refused
    before it is sent, nothing written."""
    first, other = two_companies
    row = _employee(bound, 1, first)
    events = event_rows(bound, [NewEvent(EventType.EMPLOYEE_CREATED, row["id"], {"id": str(row["id"])})])
    values = {**row, **events_written_with_values(other, events)}
    statement = _employee_created(tuple(row), tuple(events[0]), 1)
    with pytest.raises(TenantScopeError, match="another company"):
        company_insert(bound, statement, parameters=values)  # as people.repository runs it
    bound.rollback()
    assert _companies_of_employees(engine) == {}
    assert _companies_of_events(engine) == {}


# --- the explicit escapes: unscoped reads, events naming their company ---------------------------


def test_an_unscoped_read_of_company_data_is_refused_in_a_session(bound: Session) -> None:
    def plan() -> Any:
        rows = yield Read(select(Employee.id), scoped=False)
        return rows

    with pytest.raises(TenantScopeError, match="scoped=False"):
        run_in_session(bound, plan())

    def reference() -> Any:
        rows = yield Read(select(Country.id).where(Country.code == "NG"), scoped=False)
        return rows

    assert len(run_in_session(bound, reference())) == 1  # data of no company needs no scope


def test_an_unscoped_read_of_company_data_is_refused_through_asyncpg(
    postgres_only: None, database_url: str
) -> None:
    async def fetch() -> None:
        reads = AsyncpgReads(database_url, 1, 5.0)
        await reads.start()
        try:
            async with reads.connection() as connection:
                assert await connection.fetch(Read(select(Country.id).limit(1), scoped=False))
                await connection.fetch(Read(select(Employee.id), scoped=False))
        finally:
            await reads.close()

    with pytest.raises(TenantScopeError, match="scoped=False"):
        asyncio.run(fetch())


def test_an_event_cannot_name_another_company_than_the_bound_one(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID]
) -> None:
    first, second = two_companies
    event = NewEvent(EventType.EMPLOYEE_CREATED, uuid.uuid4(), {"n": 1})
    with pytest.raises(TenantScopeError, match="another company"):
        record_events(bound, [event], company_id=second)
    bound.rollback()
    record_events(bound, [event], company_id=first)  # naming its own company is fine
    bound.commit()
    with across_companies(TenantSession(engine)) as session:
        with pytest.raises(TenantScopeError, match="company_id"):
            record_events(session, [event])  # across companies, the company must be named
        record_events(session, [event], company_id=second)
        session.commit()
    with Session(engine) as session:
        assert sorted(session.scalars(select(Event.company_id))) == sorted([first, second])


# --- rows written in batches while the caller goes on (db.bulk_rows) -----------------------------


def _batch(session: Session, count: int, company_id: uuid.UUID | None) -> list[dict[str, Any]]:
    now = utcnow()
    return [
        {**_employee(session, number, company_id), "created_at": now, "updated_at": now}
        for number in range(count)
    ]


@pytest.mark.parametrize("count", [2, COPY_FROM], ids=["insert", "copy"])
def test_rows_written_meanwhile_are_bound_in_the_callers_thread_before_any_is_written(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID], count: int
) -> None:
    first, second = two_companies
    own, others = _batch(bound, count, first), _batch(bound, count, second)
    with pytest.raises(TenantScopeError, match="another company"), rows_written_meanwhile(bound) as rows:
        rows.write(Employee, own)
        rows.write(Employee, others)  # refused here, in this thread
    bound.rollback()
    own, unnamed = _batch(bound, count, first), _batch(bound, count, None)
    with rows_written_meanwhile(bound) as rows:
        rows.write(Employee, own)
        rows.write(Employee, unnamed)  # bound to the session's company
    bound.commit()
    assert _companies_of_employees(engine) == {first: 2 * count}
