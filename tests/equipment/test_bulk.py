"""Bulk registration and bulk moves: order, all or nothing, errors by position, tenancy, statements."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from fastapi import FastAPI
from sqlalchemy import Engine, event, func, select
from sqlalchemy.orm import Session

from outfitter.core.schemas import Envelope
from outfitter.db.copy_rows import COPY_FROM
from outfitter.equipment.schemas import EquipmentOut
from outfitter.models import Equipment, EquipmentHistory
from outfitter.models.events import Event
from tests.equipment.helpers import events, make_employee, register
from tests.factories import Api, assert_error, assert_rendered_as


def count(db: Session, model: Any) -> int:
    total = db.scalar(select(func.count()).select_from(model)) or 0
    db.rollback()  # end the read: SQLite writers wait for it
    return total


def stored_events(db: Session) -> list[tuple[str, str]]:
    rows = db.execute(select(Event.type, Event.subject_id).order_by(Event.created_at)).all()
    db.rollback()
    return [(str(kind), str(subject)) for kind, subject in rows]


def test_bulk_registers_in_order_as_the_single_create_answers(api: Api, db: Session) -> None:
    employee = make_employee(db, api.company_id)
    items = [
        {
            "title": "Laptop A",
            "serial_number": "A1",
            "country": "NG",
            "currency": "usd",
            "specs": {"memory": "16GB"},
        },
        {"title": "Phone B", "status": "In_Storage", "type": "Phones"},
        {"title": "Tablet C", "status": "Assigned", "assignee_id": str(employee.id), "serial_number": "C1"},
    ]
    response = api.post("/client/equipment/bulk", {"equipment": items})
    assert response.status_code == 201, response.text
    assert_rendered_as(response, Envelope[list[EquipmentOut]])
    body = response.json()
    assert body["success"] is True and body["message"] == "3 equipment created successfully."
    created = body["data"]
    assert [record["title"] for record in created] == ["Laptop A", "Phone B", "Tablet C"]
    assert [record["status"] for record in created] == ["Unassigned", "In_Storage", "Assigned"]
    assert created[0]["country_code"] == "NG" and created[0]["currency"]["code"] == "USD"
    assert created[0]["specs"]["memory"] == "16GB"
    assert created[2]["assignee"]["id"] == str(employee.id)
    assert [events(record) for record in created] == [
        ["equipment_added"],
        ["equipment_added", "moved_to_storage"],
        ["equipment_added", "assigned"],
    ]
    for record in created:
        single = api.get(f"/client/equipment/{record['id']}").json()["data"]
        assert single == record
    # As the single create records them: added, then the move to the device's status.
    assert sorted(stored_events(db)) == sorted(
        [("equipment.added", record["id"]) for record in created]
        + [("equipment.moved_to_storage", created[1]["id"]), ("equipment.assigned", created[2]["id"])]
    )


# What COPY's text format must escape (tab, line breaks, backslash, its NULL `\\N`) and what JSON must.
AWKWARD_TEXTS = [
    "tab\there",
    "line\nbreak",
    "cr\rlf\r\nend",
    "back\\slash",
    "\\N",
    "quote \" and '",
    "naïve €5 ✓",
]


def test_a_batch_written_by_copy_reads_back_as_given_with_events_carrying_the_answers(api: Api) -> None:
    items = [
        {
            "title": f"Device {index} {text}",
            "description": text,
            "serial_number": f"S{index}",
            "other_details": [text, "plain"],
            "specs": {"memory": text, "color": "grey"},
            "purchase_price": "1299.99",
            "currency": "USD",
            "status": ("Unassigned", "In_Storage")[index % 2],
        }
        for index, text in enumerate(AWKWARD_TEXTS * 3)
    ]
    assert len(items) >= COPY_FROM  # written by COPY on PostgreSQL
    response = api.post("/client/equipment/bulk", {"equipment": items})
    assert response.status_code == 201, response.text
    assert_rendered_as(response, Envelope[list[EquipmentOut]])
    created = response.json()["data"]
    assert [record["description"] for record in created] == [item["description"] for item in items]
    assert [record["specs"]["memory"] for record in created] == [item["description"] for item in items]
    assert [record["purchase_price"] for record in created] == ["1299.99"] * len(items)
    by_id = {record["id"]: record for record in created}
    for record in created:
        assert api.get(f"/client/equipment/{record['id']}").json()["data"] == record
    logged = api.get("/client/events", per_page=100).json()["data"]["data"]
    assert len(logged) == len(items) + len(items) // 2  # added, and moved to storage for every other
    for entry in logged:  # every event's data is its device as the single retrieve answers it
        assert entry["data"] == by_id[entry["subject_id"]]


def test_every_bad_item_is_reported_by_position_and_nothing_is_created(
    api: Api, other_api: Api, db: Session
) -> None:
    register(api, title="Existing", serial_number="TAKEN")
    stranger = make_employee(db, other_api.company_id, "Eve", "Other")
    items: list[dict[str, Any]] = [{"title": f"Device {index}"} for index in range(12)]
    items[1] = {"title": ""}
    items[2]["country"] = "Atlantis"
    items[3]["currency"] = "XXQ"
    items[4]["status"] = "Assigned"
    items[5] |= {"status": "Assigned", "assignee_id": str(stranger.id)}
    items[6]["serial_number"] = "TAKEN"
    items[7]["serial_number"] = "DUP"
    items[9]["serial_number"] = "DUP"
    items[10]["assignee_id"] = str(uuid.uuid4())
    items[11]["colour"] = "red"
    body = assert_error(api.post("/client/equipment/bulk", {"equipment": items}), 422)
    assert set(body["errors"]) == {"equipment.1.title", "equipment.11.colour"}  # shapes come first
    del items[11]["colour"]
    items[1]["title"] = "Fixed"
    body = assert_error(api.post("/client/equipment/bulk", {"equipment": items}), 422)
    assert set(body["errors"]) == {
        "equipment.2.country",
        "equipment.3.currency",
        "equipment.4.assignee_id",
        "equipment.5.assignee_id",
        "equipment.6.serial_number",
        "equipment.9.serial_number",
        "equipment.10.assignee_id",
    }
    assert body["errors"]["equipment.5.assignee_id"] == [
        "Unknown employee: give the id of one of your employees."
    ]
    assert "equipment.7" in body["errors"]["equipment.9.serial_number"][0]
    assert "already exists" in body["errors"]["equipment.6.serial_number"][0]
    assert count(db, Equipment) == 1 and count(db, EquipmentHistory) == 1
    assert [kind for kind, _ in stored_events(db)] == ["equipment.added"]  # the arrangement's device only


def test_a_taken_serial_number_alone_is_refused_by_the_write_and_reported_at_its_item(
    api: Api, db: Session
) -> None:
    """With no other error the numbers are not looked up first: the unique index refuses the
    write (a COPY of 30 rows on PostgreSQL), which is undone, and the 422 names the item."""
    existing = register(api, title="Existing", serial_number="TAKEN-7")
    items: list[dict[str, Any]] = [
        {"title": f"Device {index}", "serial_number": f"NEW-{index}", "status": "In_Storage"}
        for index in range(30)
    ]
    items[7]["serial_number"] = "TAKEN-7"
    body = assert_error(api.post("/client/equipment/bulk", {"equipment": items}), 422)
    assert body["errors"] == {
        "equipment.7.serial_number": [
            f"Equipment with serial number 'TAKEN-7' already exists in this company: device {existing['id']} "
            "(Unassigned)."
        ]
    }
    assert count(db, Equipment) == 1 and count(db, EquipmentHistory) == 1
    assert [kind for kind, _ in stored_events(db)] == ["equipment.added"]
    items[7]["serial_number"] = "NEW-7"  # the same batch, fixed, goes through whole
    response = api.post("/client/equipment/bulk", {"equipment": items})
    assert response.status_code == 201, response.text[:300]
    assert [record["serial_number"] for record in response.json()["data"]] == [f"NEW-{i}" for i in range(30)]
    assert count(db, Equipment) == 31 and count(db, EquipmentHistory) == 1 + 2 * 30


def test_the_batch_size_is_limited(api: Api, db: Session) -> None:
    for items in ([], [{"title": "x"}] * 1001):
        body = assert_error(api.post("/client/equipment/bulk", {"equipment": items}), 422)
        assert list(body["errors"]) == ["equipment"]
    assert list(assert_error(api.post("/client/equipment/bulk", {}), 422)["errors"]) == ["equipment"]
    assert count(db, Equipment) == 0


def test_registering_costs_the_same_statements_for_10_or_100_devices(
    api: Api, db: Session, app: FastAPI
) -> None:
    engine: Engine = app.state.engine  # the app's own engine, which serves the requests
    employee = make_employee(db, api.company_id)
    statements: list[str] = []

    def counted(*args: Any) -> None:
        statements.append(args[2])

    def post(size: int, offset: int) -> int:
        items: list[dict[str, Any]] = []
        for index in range(size):
            item: dict[str, Any] = {"title": f"d{index}", "serial_number": f"S{offset + index}"}
            if index % 3 == 0:
                item |= {"country": ("NG", "Kenya")[index % 2], "currency": "USD", "specs": {"memory": "8GB"}}
            if index % 3 == 1:
                item |= {"status": "Assigned", "assignee_id": str(employee.id), "description": "x"}
            if index % 3 == 2:
                item |= {"status": "In_Storage", "purchase_price": "10.5"}
            items.append(item)
        statements.clear()
        event.listen(engine, "before_cursor_execute", counted)
        try:
            response = api.post("/client/equipment/bulk", {"equipment": items})
        finally:
            event.remove(engine, "before_cursor_execute", counted)
        assert response.status_code == 201, response.text[:500]
        assert len(response.json()["data"]) == size
        # the serial numbers are left to the unique index, in a savepoint, not read first
        assert not [sql for sql in statements if "serial_number" in sql and sql.lstrip().startswith("SELECT")]
        assert any(sql.startswith("SAVEPOINT") for sql in statements), statements
        return len(statements)

    post(1, 10_000)  # warm up: the token's last-used stamp is written once
    small, large = post(10, 0), post(100, 1000)
    assert 0 < small == large, (small, large)
    assert (
        count(db, Equipment) == 111 and count(db, EquipmentHistory) == 111 + 6 + 66
    )  # added, plus a move for 2 in 3


def test_bulk_move_moves_every_device_with_history_and_events(api: Api, db: Session) -> None:
    employee_id = str(make_employee(db, api.company_id).id)
    ids = [register(api, title=f"d{index}")["id"] for index in range(3)]
    arranged = len(stored_events(db))  # their equipment.added
    response = api.post(
        "/client/equipment/bulk-move",
        {"equipment_ids": ids, "status": "Assigned", "assignee_id": employee_id},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["message"] == "3 equipment moved to Assigned successfully."
    assert [record["id"] for record in body["data"]] == ids
    for record in body["data"]:
        assert record["status"] == "Assigned" and record["assignee"]["id"] == employee_id
        assert events(record) == ["equipment_added", "assigned"]
        assert api.get(f"/client/equipment/{record['id']}").json()["data"] == record
    assert sorted(stored_events(db)[arranged:]) == sorted(("equipment.assigned", each) for each in ids)
    moved = api.post("/client/equipment/bulk-move", {"equipment_ids": ids[:2], "status": "In_Storage"})
    assert moved.status_code == 200, moved.text
    assert [record["assignee"] for record in moved.json()["data"]] == [None, None]
    assert events(moved.json()["data"][0])[-1] == "moved_to_storage"


def test_bulk_move_409_lists_every_device_that_cannot_move_and_moves_none(api: Api, db: Session) -> None:
    free = register(api, title="free")["id"]
    sold = register(api, title="sold")["id"]
    archived = register(api, title="archived")["id"]
    assert api.patch(f"/client/equipment/{sold}", {"status": "Sold"}).status_code == 200
    assert api.delete(f"/client/equipment/{archived}").status_code == 200
    arranged = stored_events(db)
    body = assert_error(
        api.post(
            "/client/equipment/bulk-move", {"equipment_ids": [free, sold, archived], "status": "In_Storage"}
        ),
        409,
        "2 of the 3 devices cannot move to In_Storage",
    )
    assert body["errors"] == {
        "equipment_ids.1": [f"{sold} is Sold: Equipment cannot move from Sold to In_Storage."],
        "equipment_ids.2": [f"{archived} is Archived: Equipment cannot move from Archived to In_Storage."],
    }
    assert api.get(f"/client/equipment/{free}").json()["data"]["status"] == "Unassigned"
    assert stored_events(db) == arranged


def test_bulk_move_refuses_what_the_request_names_wrongly(api: Api, other_api: Api, db: Session) -> None:
    mine = register(api, title="mine")["id"]
    theirs = register(other_api, title="theirs")["id"]
    stranger = make_employee(db, other_api.company_id, "Eve", "Other")
    unknown = str(uuid.uuid4())
    body = assert_error(
        api.post(
            "/client/equipment/bulk-move",
            {
                "equipment_ids": [mine, theirs, unknown, mine],
                "status": "Assigned",
                "assignee_id": str(stranger.id),
            },
        ),
        422,
    )
    assert body["errors"] == {
        "equipment_ids.3": ["Also given at equipment_ids.0."],
        "assignee_id": ["Unknown employee: give the id of one of your employees."],
        "equipment_ids.1": ["Unknown equipment: give the id of one of your devices."],
        "equipment_ids.2": ["Unknown equipment: give the id of one of your devices."],
    }
    missing = assert_error(
        api.post("/client/equipment/bulk-move", {"equipment_ids": [mine], "status": "Assigned"}), 422
    )
    assert missing["errors"] == {"assignee_id": ["Required when status is Assigned."]}
    extra = {"equipment_ids": [mine], "status": "Sold", "assignee_id": str(uuid.uuid4())}
    assert list(assert_error(api.post("/client/equipment/bulk-move", extra), 422)["errors"]) == [
        "assignee_id"
    ]
    for bad in ({"equipment_ids": [], "status": "Sold"}, {"equipment_ids": ["nope"], "status": "Sold"}):
        assert assert_error(api.post("/client/equipment/bulk-move", bad), 422)["errors"]
    too_many = {"equipment_ids": [str(uuid.uuid4()) for _ in range(1001)], "status": "Sold"}
    assert list(assert_error(api.post("/client/equipment/bulk-move", too_many), 422)["errors"]) == [
        "equipment_ids"
    ]
    assert api.get(f"/client/equipment/{mine}").json()["data"]["status"] == "Unassigned"
    assert other_api.get(f"/client/equipment/{theirs}").json()["data"]["status"] == "Unassigned"


def test_a_bulk_requests_records_have_time_ordered_ids_in_the_requests_order(api: Api) -> None:
    """Ids are version 7 UUIDs (db.base.new_id): made one after another they sort that way, so a
    batch's rows land at the right edge of every index on an id."""
    items = [{"title": f"Laptop {index}", "serial_number": f"S{index}"} for index in range(COPY_FROM + 10)]
    response = api.post("/client/equipment/bulk", {"equipment": items})
    assert response.status_code == 201, response.text
    created = response.json()["data"]
    for made in ([record["id"] for record in created], [record["history"][0]["id"] for record in created]):
        assert {uuid.UUID(value).version for value in made} == {7}
        assert made == sorted(made, key=uuid.UUID)
    # An id's first 48 bits are its record's creation time in milliseconds.
    for record in created:
        shown = uuid.UUID(record["id"]).int >> 80
        assert abs(shown - milliseconds_of(record["created_at"])) <= 1_000
    single = api.post("/client/equipment", {"title": "Phone"}).json()["data"]
    assert uuid.UUID(single["id"]).version == 7
    assert uuid.UUID(single["id"]) > uuid.UUID(created[-1]["id"])


def milliseconds_of(timestamp: str) -> int:
    return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)
