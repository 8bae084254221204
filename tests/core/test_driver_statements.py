"""Statements run on the driver's cursor (db.driver_statements) behave as SQLAlchemy's execution
of them: the same rows and values, the values a statement carries, its errors as SQLAlchemy's, the
engine's listeners told; tenancy is in test_tenant_writes.py, a lost connection in
test_unavailable.py. On SQLite the statements run through SQLAlchemy, so both must agree."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import Engine, bindparam, event, insert, literal, select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from outfitter.db.base import utcnow
from outfitter.db.bulk_rows import COPY_FROM
from outfitter.db.driver_statements import driver_rows
from outfitter.db.tenancy import TenantScopeError, TenantSession, bind_company
from outfitter.http.auth import token_lookup
from outfitter.models import Country, Employee
from tests.factories import Api, assert_error


@pytest.fixture
def session(engine: Engine, api: Api) -> Iterator[Session]:
    with TenantSession(engine) as session:
        bind_company(session, api.company_id)
        yield session
        session.rollback()


def test_a_tokens_row_is_the_row_sqlalchemy_reads(session: Session, api: Api) -> None:
    """The token's lookup, as every request makes it: the same columns and values, its UTC
    timestamps aware (UTCDateTime's processing), read by attribute as `check_token` reads them."""
    api.get("/client/employees")  # stamps last_used_at: a timestamp to read back
    statement, parameters, digest = token_lookup(api.token)
    connection = session.connection()
    expected = connection.execute(statement, parameters).one()
    [row] = driver_rows(connection, statement, parameters)
    assert row._asdict() == expected._asdict()
    assert row.token_hash == digest and row.company_id == api.company_id and row.id == api.token_id
    assert row.last_used_at is not None and row.last_used_at.tzinfo is UTC
    assert driver_rows(connection, statement, {"digest": "0" * 64}) == []


def test_values_the_statement_carries_are_sent_unless_given(session: Session) -> None:
    statement = select(
        literal(5).label("five"),
        bindparam("carried", value="kept").label("carried"),
        bindparam("given").label("given"),
    )
    connection = session.connection()
    [row] = driver_rows(connection, statement, {"given": "sent"})
    assert (row.five, row.carried, row.given) == (5, "kept", "sent")
    [row] = driver_rows(connection, statement, {"given": "sent", "carried": "replaced"})
    assert row.carried == "replaced"
    with pytest.raises(SQLAlchemyError, match="A value is required for bind parameter 'given'"):
        driver_rows(connection, statement, {})


def _country(**columns: Any) -> Any:
    now = utcnow()
    row = {"id": uuid.uuid4(), "name": "Nowhere", "code": "ZZ", "currency_code": "XXX"}
    return insert(Country.__table__).values(**{**row, "created_at": now, "updated_at": now, **columns})


@contextmanager
def _errors_heard(engine: Engine) -> Iterator[list[BaseException]]:
    """What the engine's `handle_error` listeners are told meanwhile (the original errors)."""
    heard: list[BaseException] = []

    def note(context: Any) -> None:
        heard.append(context.original_exception)

    event.listen(engine, "handle_error", note)
    try:
        yield heard
    finally:
        event.remove(engine, "handle_error", note)


def test_a_database_error_is_raised_as_sqlalchemy_raises_it(engine: Engine, session: Session) -> None:
    """The handlers map SQLAlchemy's errors (an IntegrityError here, a lost connection's 503): the
    driver's own error arrives wrapped the same way, with it as the cause, and the engine's
    `handle_error` listeners hear of it."""
    connection = session.connection()
    driver_rows(connection, _country(), {})
    with _errors_heard(engine) as heard, pytest.raises(IntegrityError, match="countries") as raised:
        driver_rows(connection, _country(), {})  # the same code again
    assert type(raised.value.orig).__module__.split(".")[0] in ("psycopg", "sqlite3")
    assert heard == [raised.value.orig]


def test_a_copys_error_is_handled_as_sqlalchemy_handles_one(
    postgres_only: None, app: FastAPI, api: Api
) -> None:
    """A batch's COPY runs on the driver's cursor too (db.bulk_rows): a serial number the unique
    index refuses mid-COPY reaches the engine's listeners as SQLAlchemy's own errors do, and the
    batch answers its 422 (the numbers are not read before the write)."""
    held = api.post("/client/equipment", {"title": "Held", "serial_number": "SN-HELD"})
    assert held.status_code == 201
    items = [{"title": f"Batch {n}", "serial_number": f"SN-B{n}"} for n in range(COPY_FROM)]
    items[-1]["serial_number"] = "SN-HELD"
    with _errors_heard(app.state.engine) as heard:
        answer = api.post("/client/equipment/bulk", {"equipment": items})
    assert assert_error(answer, 422)["errors"] == {
        f"equipment.{COPY_FROM - 1}.serial_number": [
            "Equipment with serial number 'SN-HELD' already exists in this company: "
            f"device {held.json()['data']['id']} (Unassigned)."
        ]
    }
    assert len(heard) == 1 and "uq_equipment_company_id_serial_number" in str(heard[0])


def test_a_column_left_to_a_python_default_is_refused(postgres_only: None, session: Session) -> None:
    """SQLAlchemy's execution computes a column's Python-side default (here the timestamps); the
    driver's does not, so such a statement is refused rather than written without them (on SQLite
    it runs through SQLAlchemy, which computes them)."""
    statement = insert(Country.__table__).values(id=uuid.uuid4(), name="N", code="ZZ", currency_code="X")
    with pytest.raises(ValueError, match=r"must give its columns' values: \['created_at', 'updated_at'\]"):
        driver_rows(session.connection(), statement, {})


def test_the_engines_listeners_hear_of_each_statement(engine: Engine, session: Session, api: Api) -> None:
    """Statement counts (tests.factories.counting_statements) see what runs on the driver."""
    heard: list[tuple[str, Any]] = []

    def note(_connection: Any, _cursor: Any, statement: str, parameters: Any, *_rest: Any) -> None:
        heard.append((statement, parameters))

    statement, parameters, digest = token_lookup(api.token)
    connection = session.connection()  # begun (SQLite's BEGIN is a statement of its own)
    event.listen(engine, "before_cursor_execute", note)
    try:
        driver_rows(connection, statement, parameters)
    finally:
        event.remove(engine, "before_cursor_execute", note)
    assert len(heard) == 1
    sql, sent = heard[0]
    assert "FROM api_tokens JOIN companies" in sql
    assert digest in (sent.values() if isinstance(sent, dict) else sent)


@pytest.mark.parametrize(
    "statement",
    [
        select(Employee.__table__),
        select(Employee.id).where(Employee.email == bindparam("email")),
        select(select(Employee.id).scalar_subquery().label("any")),
    ],
    ids=["table", "columns", "subquery"],
)
def test_a_read_of_a_companys_table_is_refused(session: Session, statement: Any) -> None:
    """Nothing scopes a statement on the driver: one reading a company's table is refused before it
    is sent, on either database."""
    with pytest.raises(TenantScopeError, match="only as an INSERT"):
        driver_rows(session.connection(), statement, {"email": "a@example.com"})
