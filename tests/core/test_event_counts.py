"""The activity log's kept count (core.event_counts): the unfiltered page's `total` is exact after
commits and rollbacks, per company, without counting the log."""

from __future__ import annotations

import uuid

from fastapi import FastAPI
from sqlalchemy import Engine, func, insert, select

from outfitter.core.events import NewEvent, record_events
from outfitter.core.tenancy import TenantSession, bind_company
from outfitter.db.base import utcnow
from outfitter.models.events import Event, EventCount, EventType
from tests.factories import Api, counting_statements
from tests.people.helpers import create_employee


def _record(engine: Engine, company_id: uuid.UUID, events: int, *, commit: bool = True) -> None:
    with TenantSession(engine) as session:
        bind_company(session, company_id)
        record_events(
            session, [NewEvent(EventType.EMPLOYEE_UPDATED, uuid.uuid4(), {"n": n}) for n in range(events)]
        )
        if commit:
            session.commit()
        else:
            session.rollback()


def test_the_total_is_exact_after_commits_and_rollbacks(
    api: Api, other_api: Api, engine: Engine, is_postgres: bool
) -> None:
    create_employee(api)  # one event through a request
    _record(engine, api.company_id, 7)
    _record(engine, api.company_id, 5, commit=False)  # rolled back: not counted
    with engine.begin() as connection:  # written by hand, not through record_events: counted too
        connection.execute(
            insert(Event),
            [
                {"id": uuid.uuid4(), "company_id": api.company_id, "type": EventType.EMPLOYEE_CREATED,
                 "subject_type": "employee", "subject_id": uuid.uuid4(), "data": {}, "created_at": utcnow()}
            ],
        )  # fmt: skip
    for _ in range(20):  # more commits than counter rows
        _record(engine, api.company_id, 2)
    _record(engine, other_api.company_id, 3)
    page = api.get("/client/events").json()["data"]
    assert page["total"] == 1 + 7 + 1 + 40 and page["last_page"] == 4
    assert other_api.get("/client/events").json()["data"]["total"] == 3
    with TenantSession(engine) as session:
        bind_company(session, api.company_id)
        assert session.scalar(select(func.count()).select_from(Event)) == 49
        shards = session.scalar(select(func.count()).select_from(EventCount))
        assert (1 < shards <= 16) if is_postgres else shards == 1  # spread where commits run at once
    # A filtered page still counts its matches.
    assert api.get("/client/events", type="employee.created").json()["data"]["total"] == 2


def test_the_unfiltered_page_does_not_count_the_log(api: Api, app: FastAPI) -> None:
    create_employee(api)
    with counting_statements(app) as statements:
        assert api.get("/client/events").json()["data"]["total"] == 1
    assert not [sql for sql in statements if "count(*)" in sql.lower() and "FROM events" in sql]
