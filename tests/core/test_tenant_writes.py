"""Tenancy of writes and of the explicit escapes: a session bound to one company cannot insert
another company's rows by any INSERT path, and neither an unscoped read nor an event naming a
company can cross companies silently."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, delete, func, insert, literal, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ClauseElement

from outfitter.db.base import utcnow
from outfitter.db.bulk_rows import COPY_FROM, insert_rows, rows_written_meanwhile
from outfitter.db.reads import AsyncpgReads, Read, run_in_session
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
    }
    if company_id is not None:
        row["company_id"] = company_id
    return row


def _companies_of_employees(engine: Engine) -> dict[uuid.UUID, int]:
    with Session(engine) as session:
        rows = session.execute(select(Employee.company_id, func.count()).group_by(Employee.company_id))
        return {company: count for company, count in rows}


INSERTS_NAMING_ANOTHER_COMPANY: dict[str, Callable[[Session, uuid.UUID], object]] = {
    "ORM insert, multi-row values": lambda s, other: s.execute(
        insert(Employee).values([_employee(s, 1, other), _employee(s, 2, other)])
    ),
    "ORM insert, one row of values": lambda s, other: s.execute(
        insert(Employee).values(**_employee(s, 1, other))
    ),
    "ORM bulk insert (executemany)": lambda s, other: s.execute(
        insert(Employee), [_employee(s, 1, other), _employee(s, 2, other)]
    ),
    "Core table insert through the session": lambda s, other: s.execute(
        insert(Employee.__table__), [_employee(s, 1, other)]
    ),
    "Core insert on the session's connection": lambda s, other: s.connection().execute(
        insert(Employee.__table__), [_employee(s, 1, other), _employee(s, 2, other)]
    ),
    "Core insert on the session's connection, one row": lambda s, other: s.connection().execute(
        insert(Employee.__table__).values(**_employee(s, 1, other))
    ),
    "INSERT ... FROM SELECT": lambda s, other: s.execute(
        insert(Employee).from_select(
            ["id", "company_id", "first_name", "last_name", "email", "country_id", "phone", "address"],
            select(
                literal(uuid.uuid4()),
                literal(other),
                Employee.first_name,
                Employee.last_name,
                literal("copy@example.com"),
                Employee.country_id,
                Employee.phone,
                Employee.address,
            ).limit(1),
        )
    ),
}


@pytest.mark.parametrize("path", list(INSERTS_NAMING_ANOTHER_COMPANY))
def test_a_bound_session_refuses_every_insert_of_another_companys_rows(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID], path: str
) -> None:
    with pytest.raises(TenantScopeError):
        INSERTS_NAMING_ANOTHER_COMPANY[path](bound, two_companies[1])
    bound.rollback()
    assert _companies_of_employees(engine) == {}


_COPIED = ["id", "company_id", "first_name", "last_name", "email", "country_id", "phone", "address"]


def _copy_of_employees(
    company: Any, *where: Any, table: Any = Employee, email: Any = "copy@example.com"
) -> Any:
    """INSERT ... FROM SELECT: a copy of employees read from `table` (Employee or its Table),
    writing `company` as their company and `email` (a value or an expression) as their email."""
    columns = table if table is Employee else table.c
    return insert(table).from_select(
        _COPIED,
        select(
            literal(uuid.uuid4()),
            company,
            columns.first_name,
            columns.last_name,
            email if isinstance(email, ClauseElement) else literal(email),
            columns.country_id,
            columns.phone,
            columns.address,
        )
        .where(*where)
        .limit(1),
    )


_EMAILS = select(Employee.email).cte("emails")

# Each reads (or writes) another company's rows, or cannot be proven not to.
INSERT_SELECTS_CROSSING_COMPANIES: dict[str, Callable[[uuid.UUID, uuid.UUID], Any]] = {
    "reads the other company, writes the bound one": lambda first, other: _copy_of_employees(
        literal(first), Employee.company_id == other
    ),
    "reads and writes the other company": lambda first, other: _copy_of_employees(
        Employee.company_id, Employee.company_id == other
    ),
    "reads every company": lambda first, other: _copy_of_employees(literal(first)),
    "reads the bound company, writes the other": lambda first, other: _copy_of_employees(
        literal(other), Employee.company_id == first
    ),
    "filtered by an OR that lets the other company in": lambda first, other: _copy_of_employees(
        Employee.company_id,
        (Employee.company_id == first) | (Employee.company_id == other),
    ),
    "a subquery reads every company": lambda first, other: _copy_of_employees(
        Employee.company_id,
        Employee.company_id == first,
        Employee.email.in_(select(Country.name).where(Country.code == "NG"))
        | Employee.id.in_(select(Event.subject_id)),
    ),
    # The same table in a subquery's own FROM: the top WHERE's filter does not reach it.
    "a subquery of the filtered table copies the other company's email": lambda first, other: (
        _copy_of_employees(
            Employee.company_id,
            Employee.company_id == first,
            email=select(Employee.email)
            .where(Employee.company_id == other)
            .correlate(None)
            .scalar_subquery(),
        )
    ),
    "a plain CTE of the filtered table reads every company": lambda first, other: _copy_of_employees(
        Employee.company_id,
        Employee.company_id == first,
        email=select(_EMAILS.c.email).limit(1).scalar_subquery(),
    ),
}


@pytest.mark.parametrize("path", list(INSERT_SELECTS_CROSSING_COMPANIES))
@pytest.mark.parametrize("through", ["session", "connection"])
def test_a_bound_session_refuses_an_insert_select_not_proven_its_own(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID], path: str, through: str
) -> None:
    first, other = two_companies
    for company in two_companies:  # something to copy on both sides
        with TenantSession(engine) as session, session.begin():
            bind_company(session, company)
            session.execute(insert(Employee), [_employee(session, 1)])
    statement = INSERT_SELECTS_CROSSING_COMPANIES[path](first, other)
    with pytest.raises(TenantScopeError, match="FROM SELECT"):
        (bound if through == "session" else bound.connection()).execute(statement)
    bound.rollback()
    assert _companies_of_employees(engine) == {first: 1, other: 1}


@pytest.mark.parametrize("table", ["ORM entity", "Table"])
def test_an_insert_select_filtered_to_the_bound_company_is_written(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID], table: str
) -> None:
    """The rule's allowed case (the outbox's fan-out is one): the SELECT reads only the bound
    company's rows (company_id = it, ANDed in the WHERE) and writes its company_id."""
    first, other = two_companies
    for company in two_companies:
        with TenantSession(engine) as session, session.begin():
            bind_company(session, company)
            session.execute(insert(Employee), [_employee(session, 1)])
    source: Any = Employee if table == "ORM entity" else Employee.__table__
    columns = source if table == "ORM entity" else source.c
    bound.execute(_copy_of_employees(columns.company_id, columns.company_id == first, table=source))
    bound.execute(
        _copy_of_employees(
            literal(first), columns.company_id == first, table=source, email="other@example.com"
        )
    )
    bound.commit()
    assert _companies_of_employees(engine) == {first: 3, other: 1}


@pytest.mark.parametrize(
    "path",
    [
        "ORM bulk insert (executemany)",
        "Core table insert through the session",
        "Core insert on the session's connection",
    ],
)
def test_rows_that_name_no_company_are_stamped_with_the_bound_one(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID], path: str
) -> None:
    rows = [_employee(bound, 1), _employee(bound, 2)]
    statement = insert(Employee) if path.startswith("ORM") else insert(Employee.__table__)
    (bound.connection() if "connection" in path else bound).execute(statement, rows)
    bound.commit()
    assert _companies_of_employees(engine) == {two_companies[0]: 2}


def test_values_naming_the_bound_company_are_written(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID]
) -> None:
    first = two_companies[0]
    bound.execute(insert(Employee).values([_employee(bound, 1, first), _employee(bound, 2, first)]))
    bound.connection().execute(insert(Employee.__table__).values(**_employee(bound, 3, first)))
    bound.commit()
    assert _companies_of_employees(engine) == {first: 3}


def test_values_that_name_no_company_are_refused(bound: Session) -> None:
    """Rows written into the statement itself cannot be stamped: they must name the company."""
    with pytest.raises(TenantScopeError, match="name"):
        bound.execute(insert(Employee).values([_employee(bound, 1)]))


def test_an_unbound_session_refuses_every_insert_of_company_rows(
    engine: Engine, two_companies: tuple[uuid.UUID, uuid.UUID]
) -> None:
    with TenantSession(engine) as session:
        with pytest.raises(TenantScopeError):
            session.execute(insert(Employee), [_employee(session, 1, two_companies[0])])
        session.rollback()
        with pytest.raises(TenantScopeError):
            session.connection().execute(
                insert(Employee.__table__), [_employee(session, 1, two_companies[0])]
            )
    with across_companies(TenantSession(engine)) as session:  # said out loud: any company
        session.execute(insert(Employee), [_employee(session, 1, two_companies[1])])
        session.commit()
    assert _companies_of_employees(engine) == {two_companies[1]: 1}


# --- data-modifying CTEs: a record and what it implies, written in one statement ----------------

_EVENT_COLUMNS = ["id", "company_id", "type", "subject_type", "subject_id", "actor", "created_at", "data"]


def _hiring(row: dict[str, Any], *returning: Any) -> Any:
    """`WITH hired AS (INSERT INTO employees ... RETURNING id, company_id)`, the employee's row
    written into the statement (as the creates write theirs)."""
    employees = Employee.__table__
    return (
        insert(employees)
        .values(**row)
        .returning(*(returning or (employees.c.id, employees.c.company_id)))
        .cte("hired")
    )


def _announced(hired: Any, company: Any = None, *where: Any) -> Any:
    """... INSERT INTO events ... SELECT ... FROM hired: the employee's event, its company_id
    `hired.company_id` unless `company` says otherwise."""
    events = Event.__table__
    return insert(events).from_select(
        _EVENT_COLUMNS,
        select(
            literal(uuid.uuid4()),
            hired.c.company_id if company is None else company,
            literal(EventType.EMPLOYEE_CREATED, events.c.type.type),
            literal("employee"),
            hired.c.id,
            literal("test"),
            literal(utcnow(), events.c.created_at.type),
            literal({"n": 1}, events.c.data.type),
        ).where(*where),
    )


def _companies_of_events(engine: Engine) -> dict[uuid.UUID, int]:
    with Session(engine) as session:
        rows = session.execute(select(Event.company_id, func.count()).group_by(Event.company_id))
        return {company: count for company, count in rows}


def _upsert(session: Session) -> Any:
    """The dialect's INSERT, for its ON CONFLICT clauses."""
    return postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert


# Each writes, or could write, another company's rows (or another company's data into the bound
# one's) through a data-modifying CTE, and is refused before it is sent, for the reason given (so
# these are refused on SQLite too, which could not run them).
CTES_CROSSING_COMPANIES: dict[str, tuple[str, Callable[[Session, uuid.UUID, uuid.UUID], Any]]] = {
    "the CTE's row names the other company": (
        "must name the bound company",
        lambda s, first, other: _announced(_hiring(_employee(s, 1, other))),
    ),
    "the CTE's row names no company": (
        "must name the bound company",
        lambda s, first, other: _announced(_hiring(_employee(s, 1))),
    ),
    "the CTE is proven, the SELECT writes the other company": (
        "FROM SELECT into events",
        lambda s, first, other: _announced(_hiring(_employee(s, 1, first)), literal(other)),
    ),
    "the SELECT also reads every company's employees": (
        "FROM SELECT into events",
        lambda s, first, other: _announced(
            _hiring(_employee(s, 1, first)), None, Employee.email == "n1@example.com"
        ),
    ),
    "the SELECT writes as company_id a CTE column that is not its company_id": (
        "FROM SELECT into events",
        lambda s, first, other: _announced(
            _hiring(
                _employee(s, 1, first),
                Employee.__table__.c.id,
                Employee.__table__.c.country_id.label("company_id"),
            )
        ),
    ),
    "the CTE returns another company's data": (
        "may return only the columns of employees",
        lambda s, first, other: _announced(
            _hiring(
                _employee(s, 1, first),
                Employee.__table__.c.id,
                Employee.__table__.c.company_id,
                select(Employee.email).where(Employee.company_id == other).scalar_subquery().label("email"),
            )
        ),
    ),
    "the CTE's INSERT ... SELECT copies the other company's employees": (
        "FROM SELECT into employees",
        lambda s, first, other: _announced(
            insert(Employee.__table__)
            .from_select(_COPIED, _copy_of_employees(literal(first), Employee.company_id == other).select)
            .returning(Employee.__table__.c.id, Employee.__table__.c.company_id)
            .cte("hired")
        ),
    ),
    "the CTE's values read another company's row": (
        "may not read a company's table",
        lambda s, first, other: _announced(
            _hiring(
                {
                    **_employee(s, 1, first),
                    "address": select(Employee.address).where(Employee.company_id == other).scalar_subquery(),
                }
            )
        ),
    ),
    "the CTE updates on conflict (another company's row, by id)": (
        "only DO NOTHING",
        lambda s, first, other: _announced(
            _upsert(s)(Employee.__table__)
            .values(**_employee(s, 1, first))
            .on_conflict_do_update(index_elements=["id"], set_={"first_name": "Taken"})
            .returning(Employee.__table__.c.id, Employee.__table__.c.company_id)
            .cte("hired")
        ),
    ),
    "the SELECT reads a CTE writing a table of no company": (
        "FROM SELECT into events",
        lambda s, first, other: _announced(
            insert(Country.__table__)
            .values(id=uuid.uuid4(), name="Nowhere", code="ZZ")
            .returning(Country.__table__.c.id, literal(first).label("company_id"))
            .cte("hired")
        ),
    ),
    "a plain SELECT of a CTE writing the other company's row": (
        "must name the bound company",
        lambda s, first, other: select(_hiring(_employee(s, 1, other)).c.id),
    ),
    "an UPDATE of every company's employees as a CTE": (
        "UPDATE or DELETE",
        lambda s, first, other: select(
            update(Employee.__table__)
            .values(first_name="Renamed")
            .returning(Employee.__table__.c.id)
            .cte("renamed")
            .c.id
        ),
    ),
    "a DELETE of the other company's employees as a CTE beside a proven INSERT": (
        "UPDATE or DELETE",
        lambda s, first, other: _announced(_hiring(_employee(s, 1, first))).add_cte(
            delete(Employee.__table__).where(Employee.__table__.c.company_id == other).cte("gone")
        ),
    ),
}


def _runner(session: Session, through: str) -> Callable[[Any], Any]:
    """How a test runs a statement: through the session, or on its connection (the single creates'
    path)."""
    return session.execute if through == "session" else session.connection().execute


@pytest.mark.parametrize("path", list(CTES_CROSSING_COMPANIES))
@pytest.mark.parametrize("through", ["session", "connection"])
def test_a_bound_session_refuses_a_data_modifying_cte_not_proven_its_own(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID], path: str, through: str
) -> None:
    first, other = two_companies
    for company in two_companies:  # something to copy, rename or delete on both sides
        with TenantSession(engine) as session, session.begin():
            bind_company(session, company)
            session.execute(insert(Employee), [_employee(session, 1)])
    reason, build = CTES_CROSSING_COMPANIES[path]
    statement = build(bound, first, other)
    with pytest.raises(TenantScopeError, match=reason):
        _runner(bound, through)(statement)
    bound.rollback()
    assert _companies_of_employees(engine) == {first: 1, other: 1}
    assert _companies_of_events(engine) == {}


def test_an_unbound_session_refuses_a_data_modifying_cte(
    engine: Engine, two_companies: tuple[uuid.UUID, uuid.UUID]
) -> None:
    with TenantSession(engine) as session:
        statement = select(_hiring(_employee(session, 1, two_companies[0])).c.id)
        with pytest.raises(TenantScopeError, match="bound to no company"):
            session.connection().execute(statement)
    assert _companies_of_employees(engine) == {}


@pytest.mark.parametrize("through", ["session", "connection"])
def test_a_data_modifying_cte_proven_the_bound_companys_is_written(
    postgres_only: None,
    engine: Engine,
    bound: Session,
    two_companies: tuple[uuid.UUID, uuid.UUID],
    through: str,
) -> None:
    """The rule's allowed case (the creates' statements are such): the CTE's row names the bound
    company, and the SELECT reads only that CTE and writes its company_id (or the bound company).
    PostgreSQL only: SQLite has no data-modifying CTEs."""
    first = two_companies[0]
    run = _runner(bound, through)
    written = run(_announced(_hiring(_employee(bound, 1, first))).returning(Event.__table__.c.id))
    assert len(list(written)) == 1
    run(_announced(_hiring(_employee(bound, 2, first)), literal(first)))
    run(select(_hiring(_employee(bound, 3, first)).c.id))  # a plain SELECT of one
    bound.commit()
    assert _companies_of_employees(engine) == {first: 3}
    assert _companies_of_events(engine) == {first: 2}


@pytest.mark.parametrize("through", ["session", "connection"])
def test_a_data_modifying_cte_is_proven_with_the_values_it_is_sent_with(
    postgres_only: None,
    engine: Engine,
    bound: Session,
    two_companies: tuple[uuid.UUID, uuid.UUID],
    through: str,
) -> None:
    """The same statement again, naming the other company: SQLAlchemy reuses the first one's
    compiled form, and the proof must read the values sent this time, not
    those it was built with."""
    first, other = two_companies
    _runner(bound, through)(_announced(_hiring(_employee(bound, 1, first))))
    with pytest.raises(TenantScopeError, match="name the bound company"):
        _runner(bound, through)(_announced(_hiring(_employee(bound, 1, other))))
    bound.rollback()
    assert _companies_of_employees(engine) == {}


@pytest.mark.parametrize(
    "crossing", ["the employee names the other company", "the deliveries read its endpoints"]
)
def test_the_employee_create_statement_is_refused_naming_another_company(
    postgres_only: None,
    engine: Engine,
    bound: Session,
    two_companies: tuple[uuid.UUID, uuid.UUID],
    crossing: str,
) -> None:
    """The create's own one statement (people.repository), sent with the other company's values in
    either place where it names a company: refused before it is sent, nothing written."""
    first, other = two_companies
    row = _employee(bound, 1, other if crossing.startswith("the employee") else first)
    events = event_rows(bound, [NewEvent(EventType.EMPLOYEE_CREATED, row["id"], {"id": str(row["id"])})])
    values = {**row, **events_written_with_values(other if "deliveries" in crossing else first, events)}
    statement = _employee_created(tuple(row), tuple(events[0]), 1)
    with pytest.raises(TenantScopeError):
        bound.connection().execute(statement, values)  # as people.repository runs it
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


# --- rows written in batches (db.bulk_rows: COPY on PostgreSQL, which no statement hook sees) --


def _batch(session: Session, count: int, company_id: uuid.UUID | None) -> list[dict[str, Any]]:
    now = utcnow()
    return [
        {**_employee(session, number, company_id), "created_at": now, "updated_at": now}
        for number in range(count)
    ]


@pytest.mark.parametrize("count", [2, COPY_FROM], ids=["insert", "copy"])
def test_batch_rows_keep_to_the_company_of_the_session(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID], count: int
) -> None:
    first, second = two_companies
    with TenantSession(engine) as unbound, pytest.raises(TenantScopeError):  # first: SQLite has one writer
        insert_rows(unbound, Employee, _batch(unbound, count, first))
    with pytest.raises(TenantScopeError, match="another company"):
        insert_rows(bound, Employee, _batch(bound, count, second))
    with pytest.raises(TenantScopeError, match="names no company"):
        insert_rows(bound, Employee, _batch(bound, count, None))
    insert_rows(bound, Employee, _batch(bound, count, first))
    bound.commit()
    with across_companies(TenantSession(engine)) as session:  # said out loud: each row names its own
        insert_rows(session, Employee, _batch(session, count, second))
        session.commit()
    assert _companies_of_employees(engine) == {first: count, second: count}


@pytest.mark.parametrize("count", [2, COPY_FROM], ids=["insert", "copy"])
def test_rows_written_meanwhile_are_checked_in_the_callers_thread_before_any_is_written(
    engine: Engine, bound: Session, two_companies: tuple[uuid.UUID, uuid.UUID], count: int
) -> None:
    first, second = two_companies
    with pytest.raises(TenantScopeError, match="another company"), rows_written_meanwhile(bound) as rows:
        rows.write(Employee, _batch(bound, count, first))
        rows.write(Employee, _batch(bound, count, second))  # refused here, in this thread
    bound.rollback()
    with rows_written_meanwhile(bound) as rows:
        rows.write(Employee, _batch(bound, count, first))
    bound.commit()
    assert _companies_of_employees(engine) == {first: count}
