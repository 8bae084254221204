"""db.bulk_rows.rows_written_meanwhile: a batch's rows written by COPY from a thread of their own
while the caller renders its answers (PostgreSQL), in the caller's transaction, in order; what
writing them raised is raised where the block ends, and nothing of a failed batch remains."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from outfitter.db.base import utcnow
from outfitter.db.bulk_rows import FIRST_CHUNK_ROWS, rows_written_meanwhile
from outfitter.db.copy_rows import COPY_CHUNK_ROWS, COPY_FROM
from outfitter.db.session import JsonText
from outfitter.db.tenancy import TenantSession, bind_company
from outfitter.models import Country, Employee, Event
from outfitter.models.events import EventType
from tests.factories import CompanyFactory


@pytest.fixture
def session(engine: Engine, companies: CompanyFactory) -> Any:
    with TenantSession(engine) as session:
        bind_company(session, companies.create().company_id)
        yield session


def _employees(session: Session, count: int, emails: str = "staff") -> list[dict[str, Any]]:
    company, now = session.info["tenant"], utcnow()
    country = session.scalars(select(Country.id).where(Country.code == "NG")).one()
    return [
        {
            "id": uuid.uuid4(),
            "company_id": company,
            "first_name": "Staff",
            "last_name": f"N{number}",
            "email": f"{emails}{number}@example.com",
            "country_id": country,
            "phone": "+234 801 234 5678",
            "address": "1 Marina Road, Lagos",
            "created_at": now,
            "updated_at": now,
            "custom_fields": {},
            "sensitive_fields": {},
        }
        for number in range(count)
    ]


def _count(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Employee)) or 0


def test_the_rows_are_written_in_order_by_another_thread_on_postgresql(
    engine: Engine, session: Session, is_postgres: bool
) -> None:
    writers: list[tuple[str, threading.Thread]] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        writers.append((statement.split()[0], threading.current_thread()))

    first, second = _employees(session, COPY_FROM, "a"), _employees(session, COPY_FROM, "b")
    event.listen(engine, "before_cursor_execute", note)
    try:
        with rows_written_meanwhile(session) as rows:
            rows.write(Employee, first)
            rows.write(Employee, second)
            rows.write(Employee, [])  # nothing to write: nothing sent
    finally:
        event.remove(engine, "before_cursor_execute", note)
    assert [verb for verb, _ in writers] == (["COPY", "COPY"] if is_postgres else ["INSERT", "INSERT"])
    elsewhere = [thread is not threading.current_thread() for _, thread in writers]
    assert elsewhere == [is_postgres, is_postgres]  # SQLite: written at once, in this thread
    names = session.scalars(select(Employee.email).order_by(Employee.created_at, Employee.email)).all()
    assert sorted(names) == sorted(row["email"] for row in first + second)
    session.commit()


def test_a_failed_batch_is_raised_where_the_block_ends_and_the_next_ones_are_not_written(
    engine: Engine, session: Session, is_postgres: bool
) -> None:
    taken = _employees(session, COPY_FROM)
    with rows_written_meanwhile(session) as rows:
        rows.write(Employee, taken)
    session.commit()
    after: list[str] = []
    # made before the block: its body must not use the session (the writer's thread has it)
    again, others = _employees(session, COPY_FROM), _employees(session, COPY_FROM, "other")
    caller, body_ended = threading.current_thread(), threading.Event()

    def hold(*_: Any) -> None:  # the writer's thread sends nothing before the body has ended
        if threading.current_thread() is not caller:
            body_ended.wait(30)

    event.listen(engine, "before_cursor_execute", hold)
    try:
        with pytest.raises(IntegrityError), rows_written_meanwhile(session) as rows:
            rows.write(Employee, again)  # the same emails: refused
            rows.write(Employee, others)
            after.append("the body ran to its end")
            body_ended.set()
    finally:
        event.remove(engine, "before_cursor_execute", hold)
    # On PostgreSQL the body goes on while the rows are written; elsewhere a batch is written (and
    # refused) where it is given.
    assert after == (["the body ran to its end"] if is_postgres else [])
    session.rollback()
    assert _count(session) == COPY_FROM  # neither batch remains


def test_an_error_of_the_body_is_raised_once_the_rows_are_written(engine: Engine, session: Session) -> None:
    batch = _employees(session, COPY_FROM)
    with pytest.raises(ZeroDivisionError), rows_written_meanwhile(session) as rows:
        rows.write(Employee, batch)
        _ = 1 / 0
    assert _count(session) == COPY_FROM  # written, in the transaction: the caller decides
    session.rollback()
    assert _count(session) == 0


def test_rows_a_generator_makes_are_written_as_it_makes_the_next(
    engine: Engine, session: Session, is_postgres: bool
) -> None:
    made = _employees(session, COPY_CHUNK_ROWS * 2 + 1)
    given: list[dict[str, Any]] = []
    copies_begun: list[int] = []  # how many rows had been made when each statement was sent
    copy_begun = threading.Event()

    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        copies_begun.append(len(given))
        copy_begun.set()

    def one_by_one() -> Any:
        for row in made:
            if is_postgres and len(given) == FIRST_CHUNK_ROWS:
                copy_begun.wait(30)  # the first chunk is on its way: the COPY need not wait for more
            given.append(row)
            yield row

    event.listen(engine, "before_cursor_execute", note)
    try:
        with rows_written_meanwhile(session) as rows:
            rows.write(Employee, one_by_one())
    finally:
        event.remove(engine, "before_cursor_execute", note)
    assert _count(session) == len(made)
    # one statement for all the rows: on PostgreSQL sent once the first (smaller) chunk was made,
    # on SQLite once all were
    assert copies_begun == [FIRST_CHUNK_ROWS if is_postgres else len(made)]


def test_a_generator_that_raises_half_way_leaves_none_of_its_rows(engine: Engine, session: Session) -> None:
    made = _employees(session, COPY_CHUNK_ROWS * 2)

    def failing() -> Any:
        for number, row in enumerate(made):
            if number == COPY_CHUNK_ROWS + 10:  # a chunk already on its way
                raise ValueError("no more rows")
            yield row

    with pytest.raises(ValueError, match="no more rows"), rows_written_meanwhile(session) as rows:
        rows.write(Employee, failing())
    session.rollback()
    assert _count(session) == 0
    # the connection is usable again: the block did not hang and nothing is left half-done
    with rows_written_meanwhile(session) as rows:
        rows.write(Employee, made[:COPY_FROM])
    assert _count(session) == COPY_FROM


def test_copied_values_read_back_as_given_whatever_their_form_and_however_shared(session: Session) -> None:
    """The COPY's text of each value (made once per distinct object, times in UTC by orjson, empty
    JSON as a constant) reads back as the value: times with and without microseconds, in another
    offset and at the ends of the calendar; JSON empty, shared, kept as text (JsonText), or with
    the characters COPY escapes."""
    company = session.info["tenant"]
    shared_time = datetime(2026, 11, 27, 12, 30, 15, 123456, tzinfo=UTC)
    times = [
        shared_time,
        datetime(2026, 11, 27, 12, 30, tzinfo=UTC),  # a whole second: no microseconds from orjson
        datetime(2026, 11, 27, 18, 0, 0, 5, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ]
    shared_data = {"name": "tab\there, line\nthere, back\\slash"}
    data: list[Any] = [{}, [], shared_data, JsonText('{"kept":"as text"}'), {"n": [1, 2.5, None]}]
    rows = [
        {
            "id": uuid.uuid4(),
            "company_id": company,
            "type": EventType.EMPLOYEE_CREATED,
            "subject_type": "employee",
            "subject_id": uuid.uuid4(),
            "actor": "Tester",
            "created_at": times[number % len(times)],
            "data": data[number % len(data)],
        }
        for number in range(COPY_FROM * 2)
    ]
    with rows_written_meanwhile(session) as writer:
        writer.write(Event, rows)
    read = {row.id: row for row in session.scalars(select(Event))}
    assert len(read) == len(rows)
    for row in rows:
        assert read[row["id"]].created_at == row["created_at"]
        given = row["data"]
        assert read[row["id"]].data == (json.loads(given.text) if isinstance(given, JsonText) else given)
