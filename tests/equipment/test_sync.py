"""The equipment lists for clients that keep a copy: cursor mode (with the filters, the sort and
the search), `updated_since` (exactly the devices changed, Archived ones included), `q` and `sort`."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, func, select, update
from sqlalchemy.orm import Session

from outfitter.core.timestamps import format_timestamp
from outfitter.db import clock
from outfitter.db.clock import SYNC_HORIZON, change_time
from outfitter.db.tenancy import TenantSession, across_companies
from outfitter.models import Equipment
from tests.equipment.helpers import make_employee, register
from tests.factories import Api, assert_error, walk_cursor


@pytest.fixture
def fleet(api: Api, db: Session) -> dict[str, dict[str, Any]]:
    """Six devices, registered in this order; title -> record."""
    grace = make_employee(db, api.company_id, first="Grace", last="Hopper")
    devices = [
        {"title": "Zenbook", "type": "Laptop", "serial_number": "ZB-100", "country": "NG"},
        {"title": "ThinkPad", "type": "Laptop", "serial_number": "TP-200", "status": "In_Storage"},
        {"title": "iPhone", "type": "Phones", "serial_number": "IP-300", "status": "Assigned",
         "assignee_id": str(grace.id)},
        {"title": "Dell XPS", "type": "Laptop", "serial_number": "DX-400", "country": "NG"},
        {"title": "Pixel", "type": "Phones", "serial_number": "PX_500", "status": "In_Storage"},
        {"title": "MacBook Air", "type": "Laptop", "serial_number": "MB-600", "status": "Assigned",
         "assignee_id": str(grace.id)},
    ]  # fmt: skip
    return {device["title"]: register(api, **device) for device in devices}


def _page(api: Api, path: str = "/client/equipment", **params: Any) -> dict[str, Any]:
    response = api.get(path, **params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _titles(records: list[dict[str, Any]]) -> list[str]:
    return [record["title"] for record in records]


def test_the_cursor_walk_gives_the_pages_records(api: Api, fleet: dict[str, dict[str, Any]]) -> None:
    paged = _page(api, per_page=100)["data"]["data"]
    assert walk_cursor(api, "/client/equipment", limit=4) == paged
    assert _titles(paged) == ["MacBook Air", "Pixel", "Dell XPS", "iPhone", "ThinkPad", "Zenbook"]


def test_cursor_pages_repeat_the_cursor_beside_success(api: Api, fleet: dict[str, dict[str, Any]]) -> None:
    first = _page(api, limit=4)
    assert set(first) == {"success", "message", "data", "next_cursor", "limit"}
    assert first["next_cursor"] == first["data"]["next_cursor"] and first["limit"] == 4
    assert _titles(first["data"]["data"]) == ["MacBook Air", "Pixel", "Dell XPS", "iPhone"]
    # The list records are exactly the page mode's.
    assert first["data"]["data"] == _page(api, per_page=4)["data"]["data"]
    last = _page(api, limit=4, cursor=first["next_cursor"])
    assert _titles(last["data"]["data"]) == ["ThinkPad", "Zenbook"] and last["next_cursor"] is None


def test_in_storage_walks_by_cursor(api: Api, fleet: dict[str, dict[str, Any]]) -> None:
    walked = walk_cursor(api, "/client/equipment/in-storage", limit=1)
    assert _titles(walked) == ["Pixel", "ThinkPad"]
    assert walked == _page(api, "/client/equipment/in-storage")["data"]["data"]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"type": "Laptop/Workstation"}, ["MacBook Air", "Dell XPS", "ThinkPad", "Zenbook"]),
        ({"status": "Assigned"}, ["MacBook Air", "iPhone"]),
        ({"country": "NG", "type": "Laptop/Workstation"}, ["Dell XPS", "Zenbook"]),
        ({"q": "hopper"}, ["MacBook Air", "iPhone"]),
        ({"sort": "name"}, ["Dell XPS", "MacBook Air", "Pixel", "ThinkPad", "Zenbook", "iPhone"]),
        ({"sort": "-name", "type": "Phones"}, ["iPhone", "Pixel"]),
        ({"sort": "created_at", "q": "00"}, ["Zenbook", "ThinkPad", "iPhone", "Dell XPS", "Pixel",
                                             "MacBook Air"]),
        # Ties of status in the same direction: oldest first, or newest first with -status.
        ({"sort": "status"}, ["iPhone", "MacBook Air", "ThinkPad", "Pixel", "Zenbook", "Dell XPS"]),
        ({"sort": "-status"}, ["Dell XPS", "Zenbook", "Pixel", "ThinkPad", "MacBook Air", "iPhone"]),
    ],
)  # fmt: skip
def test_cursor_with_filters_sort_and_search(
    api: Api, fleet: dict[str, dict[str, Any]], params: dict[str, str], expected: list[str]
) -> None:
    """Every page size walks the same records as the page mode, in the same order."""
    paged = _page(api, per_page=100, **params)["data"]["data"]
    assert _titles(paged) == expected
    for limit in (1, 2, 5):
        assert walk_cursor(api, "/client/equipment", limit=limit, **params) == paged


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("zb-1", ["Zenbook"]),  # a serial number, any case
        ("PX_5", ["Pixel"]),  # _ is a character, not a wildcard
        ("X_", ["Pixel"]),
        ("book", ["MacBook Air", "Zenbook"]),  # a part of the name
        ("Grace", ["MacBook Air", "iPhone"]),  # the assignee's first name
        ("grace hop", ["MacBook Air", "iPhone"]),  # their full name
        ("@example.com", ["MacBook Air", "iPhone"]),  # their email
        ("%", []),
        ("nothing like it", []),
    ],
)
def test_search(api: Api, fleet: dict[str, dict[str, Any]], q: str, expected: list[str]) -> None:
    found = _page(api, q=q, per_page=100)["data"]
    assert sorted(_titles(found["data"])) == sorted(expected) and found["total"] == len(expected)


@pytest.mark.parametrize("q", ["Caf\u00e9", "Cafe\u0301"])  # é composed, and e + a combining accent
@pytest.mark.parametrize("title", ["Caf\u00e9 display", "Cafe\u0301 display"])
def test_a_title_is_found_however_its_accents_are_typed(api: Api, title: str, q: str) -> None:
    """Titles and searches are kept composed (NFC): macOS and copy-paste often write "é" as "e"
    and a combining accent, which the other form did not find."""
    created = api.post("/client/equipment", {"title": title})
    assert created.status_code == 201, created.text
    assert created.json()["data"]["title"] == "Caf\u00e9 display"
    found = _page(api, q=q)["data"]
    assert [record["id"] for record in found["data"]] == [created.json()["data"]["id"]]


@pytest.mark.parametrize("q", ["écran", "ÉCRAN", "über-1", "ÜBER-1"])
def test_search_ignores_case_beyond_ascii(api: Api, q: str) -> None:
    created = api.post("/client/equipment", {"title": "Écran Über", "serial_number": "ÜBER-1"})
    assert created.status_code == 201, created.text
    found = _page(api, q=q)["data"]
    assert [record["id"] for record in found["data"]] == [created.json()["data"]["id"]]


def test_sort_in_page_mode_and_its_back_half(api: Api, fleet: dict[str, dict[str, Any]]) -> None:
    names = ["Dell XPS", "MacBook Air", "Pixel", "ThinkPad", "Zenbook", "iPhone"]  # byte order
    pages = [_page(api, sort="name", per_page=2, page=page)["data"] for page in (1, 2, 3)]
    assert [title for page in pages for title in _titles(page["data"])] == names
    assert pages[2]["total"] == 6 and pages[2]["last_page"] == 3
    api.patch(f"/client/equipment/{fleet['Pixel']['id']}", {"description": "cracked screen"})
    assert _titles(_page(api, sort="-updated_at", per_page=1)["data"]["data"]) == ["Pixel"]
    assert _titles(_page(api, sort="updated_at")["data"]["data"])[-1] == "Pixel"


def test_an_unknown_sort_is_422_naming_the_allowed_values(api: Api) -> None:
    body = assert_error(api.get("/client/equipment", sort="price"), 422)
    message = body["errors"]["query.sort"][0]
    for allowed in ("'created_at'", "'-created_at'", "'updated_at'", "'name'", "'-name'", "'status'"):
        assert allowed in message
    assert "query.sort" in assert_error(api.get("/client/equipment", sort="-title"), 422)["errors"]


def test_a_sorted_cursor_is_bound_to_its_sort(api: Api, fleet: dict[str, dict[str, Any]]) -> None:
    cursor = _page(api, sort="name", limit=2)["next_cursor"]
    assert_error(api.get("/client/equipment", sort="-name", limit=2, cursor=cursor), 422, "another sort")
    assert_error(
        api.get("/client/equipment", q="a", sort="name", limit=2, cursor=cursor), 422, "other filters"
    )


def _since(db: Session) -> str:
    """Just after the newest change so far: what a client that has seen everything asks for next."""
    newest = db.scalar(select(func.max(Equipment.updated_at)))
    db.rollback()
    assert newest is not None
    return format_timestamp(newest + timedelta(microseconds=1))


def test_updated_since_gives_exactly_the_devices_changed(
    api: Api, db: Session, fleet: dict[str, dict[str, Any]]
) -> None:
    since = _since(db)
    assert walk_cursor(api, "/client/equipment", updated_since=since) == []
    api.patch(f"/client/equipment/{fleet['Zenbook']['id']}", {"description": "new battery"})
    api.delete(f"/client/equipment/{fleet['Dell XPS']['id']}")  # archived: still reported
    api.patch(f"/client/equipment/{fleet['iPhone']['id']}", {"status": "In_Storage"})  # a lifecycle move
    added = register(api, title="Surface")
    changed = walk_cursor(api, "/client/equipment", updated_since=since, limit=1)
    # Oldest change first, each device as the list shows it now.
    assert _titles(changed) == ["Zenbook", "Dell XPS", "iPhone", "Surface"]
    assert [record["status"] for record in changed] == ["Unassigned", "Archived", "In_Storage", "Unassigned"]
    assert changed[-1] == _page(api, per_page=1)["data"]["data"][0] and changed[-1]["id"] == added["id"]
    # A filter narrows the changes; the Archived ones are there unless the status says otherwise.
    assert _titles(walk_cursor(api, "/client/equipment", updated_since=since, type="Laptop/Workstation")) == [
        "Zenbook",
        "Dell XPS",
    ]
    assert _titles(walk_cursor(api, "/client/equipment", updated_since=since, status="Archived")) == [
        "Dell XPS"
    ]
    # The walk restarted from a later point sees only what changed after it.
    later = _since(db)
    api.patch(f"/client/equipment/{fleet['Zenbook']['id']}", {"description": "new keyboard"})
    assert _titles(walk_cursor(api, "/client/equipment", updated_since=later)) == ["Zenbook"]


def test_updated_since_bulk_moves_and_bulk_registrations_count(
    api: Api, db: Session, fleet: dict[str, dict[str, Any]]
) -> None:
    since = _since(db)
    moved = api.post(
        "/client/equipment/bulk-move",
        {"equipment_ids": [fleet["Pixel"]["id"], fleet["ThinkPad"]["id"]], "status": "Sold"},
    )
    assert moved.status_code == 200, moved.text
    bulk = api.post("/client/equipment/bulk", {"equipment": [{"title": "Kindle"}, {"title": "Nokia"}]})
    assert bulk.status_code == 201, bulk.text
    changed = walk_cursor(api, "/client/equipment", updated_since=since)
    assert sorted(_titles(changed)) == ["Kindle", "Nokia", "Pixel", "ThinkPad"]


@pytest.mark.parametrize(
    ("params", "field", "fragment"),
    [
        ({"updated_since": "yesterday"}, "query.updated_since", "ISO 8601"),
        ({"updated_since": "1700000000"}, "query.updated_since", "ISO 8601"),
        ({"updated_since": "0001-01-01T00:00:00+14:00"}, "query.updated_since", "years 1 to 9999"),
        ({"updated_since": "2026-01-01T00:00:00Z", "sort": "name"}, "query.sort", "oldest first"),
        ({"updated_since": "2026-01-01T00:00:00Z", "per_page": 10}, "query.updated_since", "not both"),
        ({"q": "x" * 201}, "query.q", None),
    ],
)
def test_bad_sync_parameters_are_422(
    api: Api, params: dict[str, Any], field: str, fragment: str | None
) -> None:
    body = assert_error(api.get("/client/equipment", **params), 422, fragment)
    assert field in body["errors"], body["errors"]


def test_in_storage_has_no_updated_since(api: Api, fleet: dict[str, dict[str, Any]]) -> None:
    """Only the main list syncs; elsewhere updated_since is an unknown parameter, ignored as such."""
    page = _page(api, "/client/equipment/in-storage", updated_since="2026-01-01T00:00:00Z")["data"]
    assert page["total"] == 2


def test_search_and_cursors_stay_in_the_company(
    api: Api, other_api: Api, db: Session, fleet: dict[str, dict[str, Any]]
) -> None:
    theirs = make_employee(db, other_api.company_id, first="Grace", last="Hopper")
    register(
        other_api, title="Zenbook Duo", serial_number="ZB-999", status="Assigned", assignee_id=str(theirs.id)
    )
    assert sorted(_titles(_page(api, q="grace")["data"]["data"])) == ["MacBook Air", "iPhone"]
    assert _titles(_page(api, q="zb-")["data"]["data"]) == ["Zenbook"]
    assert _titles(walk_cursor(other_api, "/client/equipment", q="o")) == ["Zenbook Duo"]


def test_updated_since_waits_for_transactions_in_flight(
    postgres_only: None, api: Api, db: Session, engine: Engine, fleet: dict[str, dict[str, Any]]
) -> None:
    """The classic hole: a transaction stamps a change at t1 but commits after another one stamped
    at t2 > t1 has committed. A walk that returned the t2 change would have moved past t1 and
    never see the first. The walk stops before the start of the oldest transaction in flight."""
    since = _since(db)
    slow = engine.connect()
    slow_write = slow.begin()
    slow.execute(
        update(Equipment).where(Equipment.id == fleet["Zenbook"]["id"]).values(description="slow write")
    )
    try:
        api.patch(f"/client/equipment/{fleet['Pixel']['id']}", {"description": "quick write"})
        # The quick change (stamped after the slow transaction began) waits behind it.
        assert walk_cursor(api, "/client/equipment", updated_since=since) == []
        slow_write.commit()
    finally:
        slow.close()
    changed = walk_cursor(api, "/client/equipment", updated_since=since)
    assert _titles(changed) == ["Zenbook", "Pixel"]
    assert [record["description"] for record in changed] == ["slow write", "quick write"]


def test_a_reader_idle_in_its_transaction_does_not_hold_the_feed(
    postgres_only: None, api: Api, db: Session, engine: Engine, fleet: dict[str, dict[str, Any]]
) -> None:
    """A session that has only read (a console, a report) and sits idle in its transaction, begun
    before the change, however long ago: the walk gives the change (it waited for it before)."""
    since = _since(db)
    with engine.connect() as reader, reader.begin():
        reader.execute(select(func.count()).select_from(Equipment))  # its transaction began here
        api.patch(f"/client/equipment/{fleet['Pixel']['id']}", {"description": "while a reader idles"})
        changed = walk_cursor(api, "/client/equipment", updated_since=since)
    assert [(record["title"], record["description"]) for record in changed] == [
        ("Pixel", "while a reader idles")
    ]


def test_a_writer_holds_the_feed_from_before_its_first_write_and_is_not_missed(
    postgres_only: None, api: Api, db: Session, engine: Engine, fleet: dict[str, dict[str, Any]]
) -> None:
    """A session that may write holds a transaction id from its start, so a change it stamps before
    its first write (the clock, then the UPDATE) is waited for, and given once it commits."""
    since = _since(db)
    with across_companies(TenantSession(engine)) as writer:
        writer.begin()
        stamped = change_time(writer)  # taken, nothing written yet
        api.patch(f"/client/equipment/{fleet['Pixel']['id']}", {"description": "quick write"})
        assert walk_cursor(api, "/client/equipment", updated_since=since) == []
        writer.execute(
            update(Equipment)
            .where(Equipment.id == fleet["Zenbook"]["id"])
            .values(description="slow write", updated_at=stamped)
        )
        writer.commit()
    changed = walk_cursor(api, "/client/equipment", updated_since=since)
    assert [(record["title"], record["description"]) for record in changed] == [
        ("Zenbook", "slow write"),
        ("Pixel", "quick write"),
    ]


def test_a_feed_held_too_long_logs_the_writer_holding_it(
    postgres_only: None,
    api: Api,
    db: Session,
    engine: Engine,
    fleet: dict[str, dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(clock, "HELD_TOO_LONG", timedelta(0))
    since = _since(db)
    with engine.connect() as stuck, stuck.begin():
        stuck.exec_driver_sql("SET LOCAL application_name = 'stuck-job'")
        pid = stuck.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        stuck.execute(update(Equipment).where(Equipment.id == fleet["Zenbook"]["id"]).values(description="x"))
        with caplog.at_level(logging.WARNING, logger="outfitter.sync"):
            assert walk_cursor(api, "/client/equipment", updated_since=since) == []
        stuck.rollback()
    (warning,) = [record.getMessage() for record in caplog.records if record.name == "outfitter.sync"]
    assert f"held by backend pid {pid} (application 'stuck-job'" in warning
    assert "idle_in_transaction_session_timeout" in warning


def test_a_writer_of_another_role_holds_the_feed_though_its_start_is_hidden(
    postgres_only: None, engine: Engine
) -> None:
    """A role without pg_read_all_stats sees another role's backend_xid but not its start (nor its
    backend_type): the horizon holds the whole feed while that writer is open (the old horizon
    left it out and passed its changes)."""
    role = f"otf_sync_reader_{uuid.uuid4().hex[:8]}"
    with engine.connect() as admin:
        admin.exec_driver_sql(f"CREATE ROLE {role}")
        admin.commit()
    try:
        with engine.connect() as writer, engine.connect() as reader:
            reader.exec_driver_sql(f"SET ROLE {role}")
            writer.begin()
            writer.exec_driver_sql("SELECT pg_current_xact_id()")  # has written, as far as anyone knows
            assert reader.execute(SYNC_HORIZON).scalar_one() == datetime.fromtimestamp(0, UTC)
            reader.commit()  # a transaction reads pg_stat_activity once; the role stays set
            writer.commit()
            assert reader.execute(SYNC_HORIZON).scalar_one() > datetime.now(UTC) - timedelta(minutes=1)
            reader.exec_driver_sql("RESET ROLE")
            reader.commit()
    finally:
        with engine.connect() as admin:
            admin.exec_driver_sql(f"DROP ROLE {role}")
            admin.commit()
