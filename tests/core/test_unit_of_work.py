"""The request pipeline's promises, proven by breaking things on purpose.

- One commit, after the answer is rendered: a failure while rendering a request that has already
  written rolls the writes back, and an Idempotency-Key retry of that 500 writes once.
- Tenancy by structure: a session bound to a company sees, changes and creates only that company's
  rows; one bound to none refuses to touch company data at all.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, delete, func, select, update
from sqlalchemy.orm import Session

from outfitter.db.tenancy import TenantScopeError, TenantSession, across_companies, bind_company
from outfitter.http import unit_of_work
from outfitter.models import Country, Employee
from tests.factories import Api, CompanyFactory, assert_error
from tests.people.helpers import employee_body


def _employees(db: Session) -> int:
    count = db.scalar(select(func.count()).select_from(Employee)) or 0
    db.commit()
    return count


def test_a_failure_while_rendering_rolls_back_and_a_retry_writes_once(
    app: FastAPI, api: Api, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = unit_of_work.render

    def render_fails(answer: unit_of_work.JsonAnswer, result: Any) -> Any:
        raise RuntimeError("injected: the answer could not be serialised")

    headers = {**api.headers, "Idempotency-Key": "hire-grace-1"}
    body = employee_body(email="grace@example.com")
    monkeypatch.setattr(unit_of_work, "render", render_fails)
    with TestClient(app, raise_server_exceptions=False) as client:
        failed = client.post("/api/v2/client/employees", json=body, headers=headers)
    assert_error(failed, 500)
    assert _employees(db) == 0  # the insert had been flushed; the rollback took it back

    monkeypatch.setattr(unit_of_work, "render", rendered)
    first = api.client.post("/api/v2/client/employees", json=body, headers=headers)
    assert first.status_code == 201, first.text
    assert first.json()["data"]["email"] == "grace@example.com"
    again = api.client.post("/api/v2/client/employees", json=body, headers=headers)
    assert again.status_code == 201 and again.headers.get("idempotent-replayed") == "true"
    assert again.json() == first.json()
    assert _employees(db) == 1


def test_a_conflict_after_a_flush_leaves_nothing(api: Api, db: Session) -> None:
    """A service error raised after writes were flushed (here: the unique email, caught at flush)
    answers its 4xx and the request's earlier writes go too."""
    created = api.post("/client/employees", employee_body(email="ada@example.com"))
    assert created.status_code == 201, created.text
    duplicate = api.post("/client/employees", employee_body(email="ada@example.com"))
    assert_error(duplicate, 409)
    assert _employees(db) == 1


def _tenant_session(engine: Engine, company_id: uuid.UUID | None) -> Session:
    session = TenantSession(engine, expire_on_commit=False)
    if company_id is not None:
        bind_company(session, company_id)
    return session


@pytest.fixture
def two_companies(companies: CompanyFactory, engine: Engine) -> tuple[uuid.UUID, uuid.UUID]:
    first, second = companies.create("First Ltd"), companies.create("Second Ltd")
    with across_companies(TenantSession(engine)) as session, session.begin():
        country = session.scalars(select(Country).where(Country.code == "NG")).one()
        for api in (first, second):
            session.add(
                Employee(
                    company_id=api.company_id,
                    first_name="Staff",
                    last_name=str(api.company_id)[:8],
                    email=f"{api.company_id.hex[:8]}@example.com",
                    country_id=country.id,
                    phone="+234 801 234 5678",
                    address="1 Marina Road, Lagos",
                )
            )
    return first.company_id, second.company_id


def test_a_bound_session_reads_and_changes_only_its_company(
    engine: Engine, two_companies: tuple[uuid.UUID, uuid.UUID]
) -> None:
    first, _ = two_companies
    with _tenant_session(engine, first) as session:
        assert {e.company_id for e in session.scalars(select(Employee))} == {first}
        assert session.scalar(select(func.count()).select_from(Employee)) == 1
        inner = select(Employee.id).subquery()
        assert session.scalar(select(func.count()).select_from(inner)) == 1
        changed = session.execute(update(Employee).values(job_title="Changed").returning(Employee.company_id))
        assert [row.company_id for row in changed] == [first]
        deleted = session.execute(delete(Employee).returning(Employee.company_id))
        assert [row.company_id for row in deleted] == [first]
        session.rollback()
    with across_companies(TenantSession(engine)) as session:
        assert session.scalar(select(func.count()).select_from(Employee)) == 2


def test_a_bound_session_stamps_new_rows_and_refuses_another_company(
    engine: Engine, two_companies: tuple[uuid.UUID, uuid.UUID]
) -> None:
    first, second = two_companies
    with _tenant_session(engine, first) as session:
        country_id = session.scalars(select(Country.id).where(Country.code == "NG")).one()
        fields = {
            "first_name": "N",
            "last_name": "N",
            "country_id": country_id,
            "phone": "+234 801 234 5678",
            "address": "1 Marina Road, Lagos",
        }
        stamped = Employee(email="new@example.com", **fields)
        session.add(stamped)
        session.flush()
        assert stamped.company_id == first
        session.add(Employee(company_id=second, email="smuggled@example.com", **fields))
        with pytest.raises(TenantScopeError, match="names another company"):
            session.flush()
        session.rollback()


def test_an_unbound_session_refuses_company_data(
    engine: Engine, two_companies: tuple[uuid.UUID, uuid.UUID]
) -> None:
    with _tenant_session(engine, None) as session:
        with pytest.raises(TenantScopeError):
            session.scalars(select(Employee)).all()
        with pytest.raises(TenantScopeError):
            session.scalar(select(func.count()).select_from(Employee))
        with pytest.raises(TenantScopeError):
            session.execute(update(Employee).values(job_title="x"))
        # Reference data belongs to no company and needs no binding.
        assert session.scalar(select(func.count()).select_from(Country))
