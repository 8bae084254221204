"""A retrieval in progress holds its devices, and the company marks the ones coming back to its
office received (docs/orders.md): through HTTP, as a client would."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from outfitter.cli import app as cli
from outfitter.config import get_settings
from outfitter.models import EquipmentStatus
from tests.factories import Api, assert_error
from tests.payments.conftest import add_assigned_device, add_credit, add_employee
from tests.payments.test_offboard import INITIATE, history, offboard_body, status_of

runner = CliRunner()


def received(api: Api, order_id: str, body: Any = None) -> Any:
    return api.post(f"/client/orders/{order_id}/received", body)


def offboarded(
    api: Api, db: Session, destinations: dict[str, str]
) -> tuple[uuid.UUID, dict[str, uuid.UUID], str]:
    """An employee holding one device per title, offboarded by Credit to the destinations given: the
    employee, the devices by title, and the retrieval order's id."""
    employee = add_employee(db, api.company_id)
    devices = {title: add_assigned_device(db, employee, title) for title in destinations}
    add_credit(db, api.company_id, "NGN", "1000000")
    body = offboard_body(
        employee,
        [{"equipment_id": str(devices[title]), "destination": to} for title, to in destinations.items()],
    )
    response = api.post(INITIATE, body)
    assert response.status_code == 200, response.text
    return employee, devices, response.json()["data"]["order_id"]


def test_a_retrieval_holds_its_devices_until_the_company_receives_them(api: Api, db: Session) -> None:
    employee, devices, order_id = offboarded(api, db, {"MacBook Pro": "storage", "iPhone 15": "office"})
    laptop, phone = devices["MacBook Pro"], devices["iPhone 15"]
    order = api.get(f"/client/orders/{order_id}").json()["data"]
    item_of = {item["equipment_id"]: item["id"] for item in order["items"]}

    # Held as a Pending transaction holds: unassigning, moving or archiving is a 409 naming the order.
    for response in (
        api.patch(f"/client/equipment/{phone}", {"assignee_id": None}),
        api.patch(f"/client/equipment/{laptop}", {"status": "In_Storage"}),
        api.delete(f"/client/equipment/{phone}"),
    ):
        assert_error(response, 409, f"retrieval order {order_id}")
    moved = api.post("/client/equipment/bulk-move", {"equipment_ids": [str(laptop)], "status": "Unassigned"})
    assert_error(moved, 409, f"retrieval order(s) {order_id}")
    assert moved.json()["errors"]["equipment_ids.0"][0].startswith("Equipment MacBook Pro")
    edited = api.patch(f"/client/equipment/{phone}", {"description": "cracked screen"})  # no move: fine
    assert edited.status_code == 200 and edited.json()["data"]["status"] == "Assigned"
    refused = api.delete(f"/client/employees/{employee}")
    assert_error(refused, 409, f"2 of it on its way back in the retrieval order {order_id}")
    assert status_of(db, phone) == (EquipmentStatus.ASSIGNED, employee)

    # The company receives what comes back to its office, not what goes to storage.
    assert_error(received(api, order_id, {"item_ids": [item_of[str(laptop)]]}), 409, "goes to storage")
    answer = received(api, order_id)
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    stages = {item["equipment_id"]: item for item in data["items"]}
    assert stages[str(phone)]["stage"] == "received" and stages[str(laptop)]["stage"] == "retrieval_scheduled"
    assert [entry["stage"] for entry in stages[str(phone)]["stages"]] == [
        "retrieval_scheduled",
        "picked_up",
        "in_transit",
        "received",
    ]
    assert data["status"] == "in_progress"  # the laptop is still on its way to storage
    assert status_of(db, phone) == (EquipmentStatus.UNASSIGNED, None)
    device = api.get(f"/client/equipment/{phone}").json()["data"]
    actor = f"token:Acme Ltd API ({api.token_id})"
    assert device["history"][-1]["event_type"] == "unassigned" and device["history"][-1]["actor"] == actor
    assert device["history"][-1]["payload"] == {"order_id": order_id, "tx_ref": order["tx_ref"]}
    assert history(db, phone)[-1] == "unassigned"
    log = api.get("/client/events", type="order.*,equipment.*").json()["data"]["data"]
    assert [(event["type"], event["subject_id"], event["actor"]) for event in log[:2]] == [
        ("order.updated", order_id, actor),
        ("equipment.unassigned", str(phone), actor),
    ]
    assert_error(received(api, order_id), 409, "no item coming back to the office still to receive")
    assert_error(received(api, order_id, {"item_ids": [item_of[str(phone)]]}), 409, "already at received")

    # The phone is free to move again; the laptop still holds the employee until storage receives it.
    assert api.patch(f"/client/equipment/{phone}", {"status": "In_Storage"}).status_code == 200
    assert_error(api.delete(f"/client/employees/{employee}"), 409, "1 of it on its way back")


@pytest.fixture
def operator(monkeypatch: pytest.MonkeyPatch, database_url: str, engine: Engine) -> Iterator[None]:
    monkeypatch.setenv("OUTFITTER_DATABASE_URL", database_url)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.mark.one_database
def test_receiving_every_office_item_completes_the_order_and_the_offboarding(
    api: Api, other_api: Api, db: Session, operator: None
) -> None:
    employee, devices, order_id = offboarded(api, db, {"MacBook Air": "office", "Pixel 8": "office"})
    items = api.get(f"/client/orders/{order_id}").json()["data"]["items"]
    assert_error(received(other_api, order_id), 404)  # another company's order
    assert_error(received(api, str(uuid.uuid4())), 404)
    unknown = str(uuid.uuid4())
    refused = received(api, order_id, {"item_ids": [items[0]["id"], unknown]})
    assert_error(refused, 422)
    assert refused.json()["errors"] == {"item_ids.1": [f"Order {order_id} has no item {unknown}."]}
    assert_error(received(api, order_id, {"item_ids": []}), 422)

    code = runner.invoke(
        cli, ["orders", "advance", order_id, "in_transit", "--item", items[0]["id"]]
    ).exit_code
    assert code == 0  # the operator tracked one parcel; the company receives both
    first = received(api, order_id, {"item_ids": [items[0]["id"]]}).json()["data"]
    assert first["status"] == "in_progress"
    done = received(api, order_id, {"item_ids": [items[1]["id"]]}).json()["data"]
    assert done["status"] == "completed" and {item["stage"] for item in done["items"]} == {"received"}
    assert {status_of(db, device) for device in devices.values()} == {(EquipmentStatus.UNASSIGNED, None)}
    completed = api.get("/client/events", type="order.completed").json()["data"]["data"]
    assert [event["subject_id"] for event in completed] == [order_id]
    assert_error(received(api, order_id), 409, "completed")
    deleted = api.delete(f"/client/employees/{employee}")
    assert deleted.status_code == 200, deleted.text
