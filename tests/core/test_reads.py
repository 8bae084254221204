"""The read-only hot paths (db.reads): on PostgreSQL they run on the event loop through asyncpg,
and answer byte for byte what the SQLAlchemy session answers for the same read plan; an outage
there is a 503 like anywhere else."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import asyncpg
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, literal, select, text
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.core.errors import DATABASE_UNAVAILABLE, POOL_EXHAUSTED, ServiceUnavailable
from outfitter.db.asyncpg_reads import APPLICATION_NAME, AsyncpgReads, OptionsAsyncpgLacks, pool_arguments
from outfitter.db.reads import Read
from tests.core.test_unavailable import ANY_TOKEN, assert_unavailable
from tests.equipment.helpers import add_to_department, make_employee, register
from tests.factories import Api, CompanyFactory, counting_statements


@pytest.fixture
def estate(api: Api, db: Session) -> dict[str, str]:
    """A few devices of every kind the answers show: assigned (with a department), in storage,
    archived, with specs and a serial number; and one of another company."""
    ada = make_employee(db, api.company_id, "Ada", "Obi")
    add_to_department(db, ada, "Engineering")
    assigned = register(
        api,
        title="MacBook Pro",
        type="Laptop",
        serial_number="SN-1",
        specs={"memory": "16 GB", "storage": "512GB", "color": "grey"},
        purchase_price="2400.5",
        currency="USD",
        country="NG",
        status="Assigned",
        assignee_id=str(ada.id),
    )
    stored = register(api, title="Spare phone", type="Phones", status="In_Storage", country="KE")
    archived = register(api, title="Old tablet", type="Tablet")
    assert (
        api.client.delete(f"/api/v2/client/equipment/{archived['id']}", headers=api.headers).status_code
        == 200
    )
    return {"assigned": assigned["id"], "stored": stored["id"], "archived": archived["id"]}


PATHS = [
    "/api/v2/client/equipment",
    "/api/v2/client/equipment?per_page=2&page=2",
    "/api/v2/client/equipment?type=Laptop/Workstation&status=Assigned&memory=16gb&storage=512 GB",
    "/api/v2/client/equipment?country=kenya",
    "/api/v2/client/equipment?serial_number=SN-1,SN-404",
    "/api/v2/client/equipment?status=Archived",
    "/api/v2/client/equipment?country=Atlantis",
    "/api/v2/client/equipment/in-storage",
    "/api/v2/client/equipment/{assigned}",
    "/api/v2/client/equipment/{stored}",
    "/api/v2/client/equipment/{archived}",
    "/api/v2/client/equipment/00000000-0000-4000-8000-000000000000",
]


def test_asyncpg_and_the_session_answer_the_same_bytes(
    postgres_only: None, app: FastAPI, api: Api, estate: dict[str, str]
) -> None:
    # Outside `with`, the app runs without its lifespan: no asyncpg pool, the session serves.
    through_session = TestClient(app, base_url="http://testserver", headers=api.headers)
    with TestClient(app, base_url="http://testserver", headers=api.headers) as through_asyncpg:
        for path in PATHS:
            url = path.format(**estate)
            with counting_statements(app) as statements:
                fast = through_asyncpg.get(url)
            assert statements and not any("BEGIN" in sql for sql in statements), url
            slow = through_session.get(url)
            assert fast.status_code == slow.status_code, url
            assert fast.content == slow.content, url
    assert through_asyncpg.get(PATHS[-2].format(**estate)).status_code == 200


def test_on_postgresql_the_hot_reads_take_no_session_and_no_thread(
    postgres_only: None, app: FastAPI, api: Api, estate: dict[str, str]
) -> None:
    sent_by_engine: list[str] = []
    with counting_statements(app) as statements:
        from sqlalchemy import event

        def on_cursor(*args: object) -> None:
            sent_by_engine.append(str(args[2]))

        event.listen(app.state.engine, "before_cursor_execute", on_cursor)
        try:
            listed = api.get("/client/equipment")
            one = api.get(f"/client/equipment/{estate['assigned']}")
        finally:
            event.remove(app.state.engine, "before_cursor_execute", on_cursor)
    assert listed.status_code == 200 and one.status_code == 200
    assert one.json()["data"]["assignee"]["department"] == "Engineering"
    assert sent_by_engine == []
    assert any("FROM equipment_history" in sql for sql in statements)


def test_another_companys_device_is_not_found_through_asyncpg(
    api: Api, other_api: Api, estate: dict[str, str]
) -> None:
    unknown = other_api.get("/client/equipment/00000000-0000-4000-8000-000000000000")
    theirs = other_api.get(f"/client/equipment/{estate['assigned']}")
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.json() == unknown.json()
    assert other_api.get("/client/equipment").json()["data"]["total"] == 0


@pytest.fixture
def unreachable_postgres() -> Iterator[TestClient]:
    app = create_app(Settings(database_url="postgresql://127.0.0.1:1/nothing", rate_limit="off"))
    with TestClient(app, base_url="http://testserver") as client:
        yield client


def test_an_unreachable_database_is_503_on_the_hot_reads(
    unreachable_postgres: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="outfitter"):
        for path in ("/api/v2/client/equipment", "/api/v2/client/equipment/in-storage"):
            assert_unavailable(unreachable_postgres.get(path, headers=ANY_TOKEN), DATABASE_UNAVAILABLE)
    warnings = [record for record in caplog.records if "answered 503" in record.getMessage()]
    assert len(warnings) == 2 and all(record.exc_info is None for record in warnings)


@pytest.mark.parametrize("attempt", range(3))
def test_a_killed_backend_costs_a_hot_read_at_most_a_503_then_the_pool_recovers(
    postgres_only: None, database_url: str, engine: Engine, attempt: int
) -> None:
    """asyncpg usually learns of the kill while the connection is idle and replaces it unseen; when
    it learns too late, that one request is a 503, never a 500. Run a few times: it is a race."""
    app = create_app(Settings(database_url=database_url, rate_limit="off", db_pool_size=1))
    with TestClient(app, base_url="http://testserver") as client:
        api = CompanyFactory(engine, client).create("Restarted Ltd")
        assert api.get("/client/equipment").status_code == 200
        with engine.connect() as admin:
            killed = admin.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND application_name = :name"
                ),
                {"name": APPLICATION_NAME},
            ).scalar_one()
        assert killed >= 1
        after = api.get("/client/equipment")
        if after.status_code != 200:
            assert_unavailable(after, DATABASE_UNAVAILABLE)
        assert api.get("/client/equipment").status_code == 200
    app.state.engine.dispose()


def test_an_exhausted_pool_is_503_pool_exhausted(postgres_only: None, database_url: str) -> None:
    async def hold_the_only_connection() -> None:
        reads = AsyncpgReads(database_url, pool_size=1, acquire_timeout=0.2)
        await reads.start()
        try:
            async with reads.connection():
                with pytest.raises(ServiceUnavailable) as refused:
                    async with reads.connection():
                        pass
            assert refused.value.message == POOL_EXHAUSTED
            assert refused.value.headers == {"Retry-After": "2"}
            async with reads.connection():  # free again
                pass
        finally:
            await reads.close()

    asyncio.run(hold_the_only_connection())


def test_connections_go_to_requests_in_the_order_they_asked(postgres_only: None, database_url: str) -> None:
    """Under load, requests keep asking for a connection at every turn of the event loop, so one
    asks just as a connection comes back: it must not take it ahead of the requests already
    waiting (asyncpg's own queue lets it, which was the tail of the hot reads)."""

    async def served_in_order() -> list[str]:
        reads = AsyncpgReads(database_url, pool_size=1, acquire_timeout=10)
        await reads.start()
        served: list[str] = []

        async def request(name: str, hold: asyncio.Event | None = None) -> None:
            async with reads.connection() as connection:
                served.append(name)
                await connection.fetch(Read(select(literal(1)), {}, scoped=False))
                if hold is not None:
                    await hold.wait()

        try:
            release = asyncio.Event()
            first = asyncio.create_task(request("first", hold=release))
            await asyncio.sleep(0.05)  # `first` holds the only connection
            waiting = [asyncio.create_task(request(f"waiting {n}")) for n in (1, 2)]
            await asyncio.sleep(0.05)  # both wait, in order
            release.set()
            arrivals = []
            for n in range(30):  # a new request at every turn of the loop meanwhile
                arrivals.append(asyncio.create_task(request(f"arrival {n}")))
                await asyncio.sleep(0)
            await asyncio.wait_for(asyncio.gather(first, *waiting, *arrivals), timeout=20)
            return served
        finally:
            await reads.close()

    served = asyncio.run(served_in_order())
    assert served[:3] == ["first", "waiting 1", "waiting 2"], served[:6]
    assert served[3:] == [f"arrival {n}" for n in range(30)]


def _with_options(database_url: str, options: str) -> str:
    return f"{database_url}{'&' if '?' in database_url else '?'}{options}"


def _listed_after_registering(
    client: TestClient, engine: Engine, company: str, device: dict[str, str]
) -> list[str]:
    """A new company registers `device` and lists its equipment (the hot read): the titles listed."""
    api = CompanyFactory(engine, client).create(company)
    assert api.post("/client/equipment", device).status_code == 201
    listed = api.get("/client/equipment")
    assert listed.status_code == 200, listed.text
    return [record["title"] for record in listed.json()["data"]["data"]]


def test_libpq_options_of_the_database_url_reach_the_hot_reads_as_libpq_reads_them(
    postgres_only: None, database_url: str, engine: Engine
) -> None:
    """asyncpg sent every option it does not read itself to the server as a setting of that name:
    with `?connect_timeout=5` in the URL (which psycopg, the other pool, takes) every hot read was
    a 500 ("unrecognized configuration parameter"). Now connect_timeout is its timeout, `options`'
    settings its server settings, and its connections keep their own application_name."""
    options = "connect_timeout=5&application_name=ops&options=-c%20statement_timeout%3D4321ms"
    url = _with_options(database_url, options)
    app = create_app(Settings(database_url=url, rate_limit="off"))
    with TestClient(app, base_url="http://testserver") as client:
        dock = {"title": "Dock", "type": "Laptop"}
        assert _listed_after_registering(client, engine, "Options Ltd", dock) == ["Dock"]
        assert app.state.reads is not None

        async def settings_of_a_read_connection() -> list[Any]:
            reads = AsyncpgReads(url, pool_size=1, acquire_timeout=5)
            await reads.start()
            try:
                async with reads.connection() as connection:
                    shown = select(
                        func.current_setting("statement_timeout"), func.current_setting("application_name")
                    )
                    return await connection.fetch(Read(shown, {}, scoped=False))
            finally:
                await reads.close()

        assert [tuple(row) for row in asyncio.run(settings_of_a_read_connection())] == [
            ("4321ms", APPLICATION_NAME)
        ]
    app.state.engine.dispose()


def test_a_database_url_option_asyncpg_lacks_leaves_the_hot_reads_to_the_session(
    postgres_only: None, database_url: str, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """libpq's TCP keepalives have no asyncpg equivalent: rather than drop them, or send them to the
    server, the hot reads go through the session, which honours them, and the log says why."""
    url = _with_options(database_url, "keepalives=1&keepalives_idle=30")
    with caplog.at_level(logging.WARNING, logger="outfitter"):
        app = create_app(Settings(database_url=url, rate_limit="off"))
    assert app.state.reads is None
    assert (
        "the hot reads go through psycopg, not asyncpg, which cannot honour the database URL's option(s) "
        "keepalives, keepalives_idle (docs/operations.md, 'Database connections')"
    ) in caplog.messages
    with TestClient(app, base_url="http://testserver") as client:
        phone = {"title": "Phone", "type": "Phones"}
        assert _listed_after_registering(client, engine, "Keepalive Ltd", phone) == ["Phone"]
    app.state.engine.dispose()


def test_a_connection_a_killed_backend_left_unusable_is_dropped_with_a_503(
    postgres_only: None, database_url: str
) -> None:
    """asyncpg's InternalClientError (a backend killed while its connection sat idle can leave the
    protocol in a state it cannot leave) is a 503, and that connection is terminated rather than
    pooled again: the next read gets a new backend. Without the fault, the one connection of the
    pool is the one reused."""
    backend = Read(select(func.pg_backend_pid()), {}, scoped=False)

    async def backends() -> list[int]:
        reads = AsyncpgReads(database_url, pool_size=1, acquire_timeout=5)
        await reads.start()
        seen = []
        try:
            async with reads.connection() as connection:
                seen.append((await connection.fetch(backend))[0][0])
            with pytest.raises(ServiceUnavailable) as refused:
                async with reads.connection() as connection:
                    seen.append((await connection.fetch(backend))[0][0])
                    raise asyncpg.exceptions.InternalClientError("cannot switch to state 15")
            assert (refused.value.message, refused.value.headers) == (
                DATABASE_UNAVAILABLE,
                {"Retry-After": "2"},
            )
            async with reads.connection() as connection:
                seen.append((await connection.fetch(backend))[0][0])
        finally:
            await reads.close()
        return seen

    first, again, after = asyncio.run(backends())
    assert first == again and after != again


@pytest.mark.parametrize(
    ("options", "settings"),
    [
        ("-c statement_timeout=5s -c search_path=app", {"statement_timeout": "5s", "search_path": "app"}),
        ("-cwork_mem=4MB --lock-timeout=1s", {"work_mem": "4MB", "lock_timeout": "1s"}),
        (r"-c search_path=my\ app -c application_name=ops", {"search_path": "my app"}),  # its own name wins
    ],
)
def test_libpq_options_become_the_read_pool_s_server_settings(options: str, settings: dict[str, str]) -> None:
    url = f"postgresql+psycopg://u@db.example/outfitter?options={quote(options)}"
    assert pool_arguments(url).server_settings == {**settings, "application_name": APPLICATION_NAME}


@pytest.mark.parametrize(
    ("options", "named"), [("-X", "options ('-X')"), ("-c nothing", "options ('nothing')")]
)
def test_libpq_options_asyncpg_cannot_honour_are_named(options: str, named: str) -> None:
    url = f"postgresql+psycopg://u@db.example/outfitter?options={quote(options)}"
    with pytest.raises(OptionsAsyncpgLacks) as lacking:
        pool_arguments(url)
    assert str(lacking.value) == named
