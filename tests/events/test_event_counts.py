"""The page mode's unfiltered `total`: on PostgreSQL the kept count (events.counts), exact whatever
is written, deleted or folded meanwhile; on SQLite a count of the log. Through HTTP where a client
would see it; the concurrency proof compares the kept total with a count in one snapshot."""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine, delete, func, select, text
from sqlalchemy.orm import Session

from outfitter.config import Settings
from outfitter.db.base import utcnow
from outfitter.db.company_writes import company_insert
from outfitter.db.copy_rows import COPY_FROM
from outfitter.db.session import make_sessionmaker
from outfitter.db.tenancy import TenantSession, across_companies, bind_company
from outfitter.events.counts import fold_event_counts, kept_total
from outfitter.models import Company, Event, EventCount, EventCountDelta, EventType, WorkerJob
from outfitter.worker import Worker
from outfitter.worker.jobs import JOBS
from tests.factories import Api, CompanyFactory
from tests.people.helpers import employee_body


def _page(api: Api, **params: Any) -> dict[str, Any]:
    response = api.get("/client/events", **params)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def _stored_ids(engine: Engine, company_id: uuid.UUID) -> list[str]:
    """The company's events as the log orders them, newest first, read from the table."""
    with Session(engine) as session:
        rows = session.scalars(
            select(Event.id)
            .where(Event.company_id == company_id)
            .order_by(Event.created_at.desc(), Event.id.desc())
        )
        return [str(event_id) for event_id in rows]


def assert_log_matches_the_table(api: Api, engine: Engine, per_page: int = 10) -> int:
    """The total, the counters and every page's ids are what the table holds; answers the total."""
    stored = _stored_ids(engine, api.company_id)
    first = _page(api, per_page=per_page)
    last_page = max(1, -(-len(stored) // per_page))
    assert (first["total"], first["last_page"]) == (len(stored), last_page)
    listed = [
        record["id"]
        for number in range(1, last_page + 1)
        for record in _page(api, per_page=per_page, page=number)["data"]
    ]
    assert listed == stored
    total: int = first["total"]
    return total


def _deltas(engine: Engine) -> list[tuple[uuid.UUID, int]]:
    with Session(engine) as session:
        rows = session.execute(select(EventCountDelta.company_id, EventCountDelta.delta))
        return [(company_id, delta) for company_id, delta in rows]


def _counts(engine: Engine) -> dict[uuid.UUID, int]:
    with Session(engine) as session:
        rows = session.execute(select(EventCount.company_id, EventCount.events))
        return {company_id: events for company_id, events in rows}


def _fold_by_the_worker(engine: Engine, settings: Settings) -> None:
    (job,) = (job for job in JOBS if job.name == "fold_event_counts")
    worker = Worker(make_sessionmaker(engine, TenantSession), settings, jobs=(job,))
    try:
        worker.run_due_jobs()
    finally:
        worker.close()


def _event_rows(company_id: uuid.UUID, count: int) -> list[dict[str, Any]]:
    now = utcnow()
    return [
        {
            "id": uuid.uuid4(),
            "company_id": company_id,
            "type": EventType.EQUIPMENT_UPDATED,
            "subject_type": "equipment",
            "subject_id": uuid.uuid4(),
            "actor": "Test",
            "created_at": now,
            "data": {"n": number},
        }
        for number in range(count)
    ]


def _write(engine: Engine, company_id: uuid.UUID, count: int, *, commit: bool = True) -> None:
    """`count` events as record_events writes them: one INSERT, or a COPY from COPY_FROM rows."""
    with across_companies(Session(engine)) as session:
        company_insert(session, Event, _event_rows(company_id, count))
        if commit:
            session.commit()
        else:
            session.rollback()


def test_the_total_and_every_page_follow_writes_and_folds(
    api: Api, other_api: Api, engine: Engine, settings: Settings, is_postgres: bool
) -> None:
    bulk = api.post("/client/employees/bulk", {"employees": [employee_body() for _ in range(COPY_FROM + 5)]})
    assert bulk.status_code == 201, bulk.text
    assert api.post("/client/employees", employee_body()).status_code == 201
    assert other_api.post("/client/employees", employee_body()).status_code == 201
    if is_postgres:  # the bulk's events are one COPY: one delta, as a single INSERT's
        assert sorted(_deltas(engine), key=lambda row: row[1]) == sorted(
            [(api.company_id, COPY_FROM + 5), (api.company_id, 1), (other_api.company_id, 1)],
            key=lambda row: row[1],
        )
    assert assert_log_matches_the_table(api, engine) == COPY_FROM + 6
    assert assert_log_matches_the_table(other_api, engine) == 1

    _fold_by_the_worker(engine, settings)
    with Session(engine) as session:  # SQLite has nothing to fold: the job is not even claimed there
        claimed = session.scalar(select(func.count()).where(WorkerJob.name == "fold_event_counts"))
    assert claimed == int(is_postgres)
    if is_postgres:
        assert _deltas(engine) == []
        assert _counts(engine) == {api.company_id: COPY_FROM + 6, other_api.company_id: 1}
    assert assert_log_matches_the_table(api, engine) == COPY_FROM + 6

    assert api.post("/client/employees", employee_body()).status_code == 201
    assert assert_log_matches_the_table(api, engine) == COPY_FROM + 7  # folded count + one delta
    assert _page(api, type="employee.created", per_page=1)["total"] == COPY_FROM + 7  # counted
    assert _page(api, page=99)["data"] == [] and _page(api, page=99)["total"] == COPY_FROM + 7


def test_a_rolled_back_write_counts_nothing(api: Api, engine: Engine, is_postgres: bool) -> None:
    _write(engine, api.company_id, 3)
    _write(engine, api.company_id, COPY_FROM, commit=False)
    _write(engine, api.company_id, 2, commit=False)
    assert assert_log_matches_the_table(api, engine) == 3
    if is_postgres:  # the committed write's deltas only (an executemany may be several statements)
        assert {company for company, _ in _deltas(engine)} == {api.company_id}
        assert sum(delta for _, delta in _deltas(engine)) == 3


@pytest.mark.usefixtures("postgres_only")
def test_deleted_events_truncation_and_a_deleted_company_keep_the_totals_exact(
    api: Api, other_api: Api, engine: Engine
) -> None:
    _write(engine, api.company_id, 5)
    _write(engine, other_api.company_id, 3)
    with engine.begin() as connection:
        fold_event_counts(connection)
    oldest = _stored_ids(engine, api.company_id)[-2:]
    with engine.begin() as connection:
        connection.execute(delete(Event).where(Event.id.in_([uuid.UUID(each) for each in oldest])))
    assert _deltas(engine) == [(api.company_id, -2)]
    assert assert_log_matches_the_table(api, engine) == 3

    with engine.begin() as connection:  # its events go by the cascade, their delta with no company
        connection.execute(delete(Company).where(Company.id == other_api.company_id))
    with engine.begin() as connection:
        fold_event_counts(connection)  # drops the deleted company's delta
    assert _deltas(engine) == [] and _counts(engine) == {api.company_id: 3}
    assert assert_log_matches_the_table(api, engine) == 3

    _write(engine, api.company_id, 2)
    with engine.begin() as connection:
        connection.execute(text("TRUNCATE events CASCADE"))
    assert _deltas(engine) == [] and _counts(engine) == {}
    assert assert_log_matches_the_table(api, engine) == 0


def _in_thread(work: Callable[[], None], failures: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            work()
        except BaseException as exc:  # reported by the test
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.usefixtures("postgres_only")
def test_the_total_is_exact_while_events_are_written_deleted_and_folded(
    companies: CompanyFactory, engine: Engine
) -> None:
    """Writers (INSERTs and COPYs, some rolled back, some deleting) and two folders run at once;
    each check reads the kept total and a count of the log in one statement: one snapshot, so they
    must be equal every time."""
    apis = [companies.create("Acme Ltd"), companies.create("Globex Corp")]
    writing_done = threading.Event()
    failures: list[BaseException] = []
    folds = [0]

    def write(seed: int) -> None:
        chance = random.Random(seed)
        for round_number in range(120):
            company = chance.choice(apis).company_id
            size = chance.choice([1, 2, 5, COPY_FROM, COPY_FROM + 13])
            if round_number % 7 == 6:
                with engine.begin() as connection:
                    victims = select(Event.id).where(Event.company_id == company).limit(3)
                    connection.execute(delete(Event).where(Event.id.in_(victims)))
            else:
                _write(engine, company, size, commit=round_number % 5 != 4)

    def fold() -> None:
        while not writing_done.is_set():
            with engine.begin() as connection:
                fold_event_counts(connection)
            folds[0] += 1

    sessions = make_sessionmaker(engine, TenantSession)
    statement = select(kept_total(), select(func.count()).select_from(Event).scalar_subquery())
    writers = [_in_thread(lambda seed=seed: write(seed), failures) for seed in (1, 2)]
    folders = [_in_thread(fold, failures) for _ in range(2)]
    checks = 0
    try:
        while any(writer.is_alive() for writer in writers) or checks < 10:
            for api in apis:
                with sessions() as session:
                    bind_company(session, api.company_id)
                    kept, counted = session.execute(statement).one()
                assert kept == counted
                checks += 1
    finally:
        for writer in writers:
            writer.join()
        writing_done.set()
        for folder in folders:
            folder.join()
    assert failures == []
    assert folds[0] > 0
    with engine.begin() as connection:
        fold_event_counts(connection)
    assert _deltas(engine) == []
    for api in apis:
        assert _counts(engine).get(api.company_id, 0) == assert_log_matches_the_table(
            api, engine, per_page=100
        )
