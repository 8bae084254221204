"""Equipment: registering, editing and every status move write their events, with the device as
GET /client/equipment/{id} answers it after the change."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import FastAPI
from sqlalchemy import Engine, event, select
from sqlalchemy.orm import Session

from outfitter.db.tenancy import TenantSession, bind_company
from outfitter.equipment.events import record_equipment_events
from outfitter.models import Equipment
from outfitter.models.events import EventType
from tests.equipment.helpers import make_employee, register
from tests.events.helpers import assert_event, log, only, stored_events
from tests.factories import Api, assert_error


def _patch(api: Api, equipment_id: str, body: dict[str, Any]) -> dict[str, Any]:
    response = api.patch(f"/client/equipment/{equipment_id}", body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def test_registering_records_equipment_added(api: Api) -> None:
    device = register(api, serial_number="SN-1")
    assert_event(only(api, "equipment.added"), "equipment.added", device["id"], device)
    assert len(log(api)) == 1


def test_registering_as_assigned_records_added_and_assigned(api: Api, db: Session) -> None:
    employee = make_employee(db, api.company_id)
    device = register(api, status="Assigned", assignee_id=str(employee.id))
    assert device["status"] == "Assigned"
    # One batch: the same created_at, in no defined order between them.
    assert sorted(item["type"] for item in log(api)) == ["equipment.added", "equipment.assigned"]
    assert_event(only(api, "equipment.added"), "equipment.added", device["id"], device)
    assert_event(only(api, "equipment.assigned"), "equipment.assigned", device["id"], device)


def test_every_move_and_edit_records_its_event(api: Api, db: Session) -> None:
    employee = make_employee(db, api.company_id)
    device = register(api)
    moves = [
        ({"status": "In_Storage"}, "equipment.moved_to_storage"),
        ({"assignee_id": str(employee.id)}, "equipment.assigned"),
        ({"status": "Unassigned"}, "equipment.unassigned"),
        ({"status": "Sold"}, "equipment.sold"),
    ]
    for body, type in moves:
        answer = _patch(api, device["id"], body)
        assert_event(only(api, type), type, device["id"], answer)

    edited = _patch(api, device["id"], {"make": "Lenovo", "specs": {"memory": "32GB"}})
    assert_event(only(api, "equipment.updated"), "equipment.updated", device["id"], edited)
    _patch(api, device["id"], {"make": "Lenovo"})  # the value it has: no change, no event
    assert len(log(api, type="equipment.updated")) == 1

    archived = api.delete(f"/client/equipment/{device['id']}")
    assert archived.status_code == 200, archived.text
    assert_event(only(api, "equipment.archived"), "equipment.archived", device["id"], archived.json()["data"])
    assert len(log(api)) == 7


def test_an_edit_with_a_move_records_both(api: Api) -> None:
    device = register(api)
    answer = _patch(api, device["id"], {"status": "In_Storage", "title": "Spare laptop"})
    assert_event(only(api, "equipment.moved_to_storage"), "equipment.moved_to_storage", device["id"], answer)
    assert_event(only(api, "equipment.updated"), "equipment.updated", device["id"], answer)


def test_refused_changes_leave_no_event(api: Api, db: Session) -> None:
    device = register(api, serial_number="SN-1")
    _patch(api, device["id"], {"status": "Sold"})
    before = stored_events(db)
    assert_error(api.patch(f"/client/equipment/{device['id']}", {"status": "In_Storage"}), 409)
    assert_error(api.post("/client/equipment", {"title": "Dup", "serial_number": "SN-1"}), 409)
    assert_error(api.post("/client/equipment", {"title": "Odd", "type": "Toaster"}), 422)
    assert stored_events(db) == before


def test_a_batch_costs_the_same_statements_whatever_its_size(api: Api, engine: Engine, app: FastAPI) -> None:
    ids = [uuid.UUID(register(api, title=f"Device {number}")["id"]) for number in range(12)]
    statements: list[str] = []

    def count(*_args: Any) -> None:
        statements.append("x")

    def record(how_many: int) -> int:
        with TenantSession(engine) as session, session.begin():
            bind_company(session, api.company_id)
            devices = session.scalars(select(Equipment).where(Equipment.id.in_(ids[:how_many]))).all()
            statements.clear()
            event.listen(engine, "before_cursor_execute", count)
            try:
                record_equipment_events(
                    session, [(EventType.EQUIPMENT_UPDATED, item) for item in devices], "t"
                )
            finally:
                event.remove(engine, "before_cursor_execute", count)
            return len(statements)

    # The devices, their history, one INSERT, and the company's webhook endpoints (none: no more).
    assert record(12) == 4
    # One event: its deliveries an INSERT ... SELECT of the endpoints, written with the event in one
    # statement on PostgreSQL (a data-modifying CTE; SQLite has none).
    assert record(1) == (3 if engine.dialect.name == "postgresql" else 4)
