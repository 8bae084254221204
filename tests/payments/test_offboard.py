"""Offboarding end to end, through HTTP and the operator CLI: initiate, pay, the retrieval order's
stages, the devices coming back, the events of each step, refusals and tenancy."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from outfitter.cli import app as cli
from outfitter.config import get_settings
from outfitter.models import (
    Equipment,
    EquipmentHistory,
    EquipmentReservation,
    EquipmentStatus,
    Event,
    Order,
    SandboxPayment,
    Transaction,
)
from outfitter.payments.gateways.sandbox import SandboxGateway
from tests.factories import Api, assert_error
from tests.payments.conftest import add_assigned_device, add_credit, add_employee, add_storage_device, count

runner = CliRunner()
INITIATE = "/client/transactions/offboard/initiate"


@pytest.fixture
def operator(monkeypatch: pytest.MonkeyPatch, database_url: str, engine: Engine) -> Iterator[None]:
    """The CLI pointed at the test database."""
    monkeypatch.setenv("OUTFITTER_DATABASE_URL", database_url)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def orders_cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, ["orders", *args])
    return result.exit_code, result.stdout, result.stderr


def advance(order_id: str, stage: str, *extra: str) -> dict[str, Any]:
    code, out, err = orders_cli("advance", order_id, stage, *extra, "--json")
    assert code == 0, err
    payload: dict[str, Any] = json.loads(out)
    return payload


def offboard_body(employee: uuid.UUID, devices: list[Any], method: str = "Credit") -> dict[str, Any]:
    return {"payment_method": method, "employee_country_id": "NG", "orders": {str(employee): devices}}


def status_of(db: Session, equipment_id: uuid.UUID) -> tuple[EquipmentStatus, uuid.UUID | None]:
    equipment = db.get(Equipment, equipment_id, populate_existing=True)
    db.commit()
    assert equipment is not None
    return equipment.status, equipment.assignee_id


def history(db: Session, equipment_id: uuid.UUID) -> list[str]:
    entries = db.scalars(
        select(EquipmentHistory.event_type)
        .where(EquipmentHistory.equipment_id == equipment_id)
        .order_by(EquipmentHistory.event_date, EquipmentHistory.seq)
    ).all()
    db.commit()
    return [str(entry) for entry in entries]


def events(db: Session, company_id: uuid.UUID) -> list[tuple[str, uuid.UUID, dict[str, Any]]]:
    rows = db.execute(
        select(Event.type, Event.subject_id, Event.data)
        .where(Event.company_id == company_id)
        .order_by(Event.created_at, Event.id)
    ).all()
    db.commit()
    return [(str(kind), subject, data) for kind, subject, data in rows]


def test_offboarding_by_credit_from_initiate_to_offboarded_employee(
    api: Api, db: Session, operator: None
) -> None:
    employee = add_employee(db, api.company_id)
    laptop = add_assigned_device(db, employee, "MacBook Pro")
    phone = add_assigned_device(db, employee, "iPhone 15")
    add_credit(db, api.company_id, "NGN", "1000000")
    body = offboard_body(employee, [str(laptop), {"equipment_id": str(phone), "destination": "office"}])

    response = api.post(INITIATE, body)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    # NGN defaults: retrieval 25000 and inspection 12000 per device, storage 18000 for the laptop.
    assert data["kind"] == "offboard" and data["status"] == "Fulfilled" and data["link"] is None
    assert (data["retrieval_fee"], data["inspection_fee"], data["storage_fee"]) == (50000.0, 24000.0, 18000.0)
    assert data["amount"] == 0 and data["gateway_fee"] == 0 and data["onboarding_fee"] == 0
    assert data["total_amount"] == 92000.0
    verified = api.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]
    assert verified["kind"] == "offboard" and verified["storage_fee"] == "18000.00"
    assert verified["total_amount"] == "92000.00"
    listed = api.get("/client/transactions").json()["data"]["data"][0]
    assert listed["kind"] == "offboard" and listed["retrieval_fee"] == "50000.00"

    order = api.get(f"/client/orders/{data['order_id']}").json()["data"]
    assert (order["kind"], order["status"], order["tx_ref"]) == ("retrieval", "in_progress", data["tx_ref"])
    items = {item["equipment_id"]: item for item in order["items"]}
    assert items[str(laptop)]["destination"] == "storage" and items[str(phone)]["destination"] == "office"
    for item in items.values():
        assert item["stage"] == "retrieval_scheduled"
        assert [entry["stage"] for entry in item["stages"]] == ["retrieval_scheduled"]
    # The devices stay with the employee until received; the employee shows both on their way back.
    assert status_of(db, laptop) == (EquipmentStatus.ASSIGNED, employee)
    person = api.get(f"/client/employees/{employee}").json()["data"]
    assert {(r["equipment_id"], r["stage"], r["order_id"]) for r in person["open_retrievals"]} == {
        (str(laptop), "retrieval_scheduled", order["id"]),
        (str(phone), "retrieval_scheduled", order["id"]),
    }
    assert_error(api.delete(f"/client/employees/{employee}"), 409, "Assigned equipment")
    assert count(db, EquipmentReservation) == 0  # released at fulfilment

    moved = advance(order["id"], "received", "--note", "Courier DHL 123")
    assert moved["status"] == "in_progress"
    for item in moved["items"]:
        assert item["stage"] == "received"
        assert [entry["stage"] for entry in item["stages"]] == [
            "retrieval_scheduled",
            "picked_up",
            "in_transit",
            "received",
        ]
        assert [entry["note"] for entry in item["stages"]][1:] == [None, None, "Courier DHL 123"]
    assert status_of(db, laptop) == (EquipmentStatus.IN_STORAGE, None)
    assert status_of(db, phone) == (EquipmentStatus.UNASSIGNED, None)
    assert history(db, laptop) == ["equipment_added", "assigned", "moved_to_storage"]
    assert history(db, phone) == ["equipment_added", "assigned", "unassigned"]
    in_storage = api.get("/client/equipment/in-storage").json()["data"]["data"]
    assert [record["id"] for record in in_storage] == [str(laptop)]
    assert api.get(f"/client/employees/{employee}").json()["data"]["open_retrievals"] == []

    done = advance(order["id"], "inspected")
    assert done["status"] == "completed"
    assert {item["stage"] for item in done["items"]} == {"inspected"}
    assert api.get(f"/client/orders/{order['id']}").json()["data"]["status"] == "completed"
    offboarded = api.delete(f"/client/employees/{employee}")
    assert offboarded.status_code == 200, offboarded.text

    recorded = events(db, api.company_id)
    # Events of one change share its instant, so compare them as a multiset; the data says the rest.
    assert Counter(kind for kind, _, _ in recorded) == {
        "wallet.credited": 1,  # the arrangement's credit, by the operator
        "transaction.initiated": 1,
        "wallet.debited": 1,
        "transaction.fulfilled": 1,
        "order.created": 1,
        "order.updated": 2,
        "equipment.moved_to_storage": 1,
        "equipment.unassigned": 1,
        "order.completed": 1,
        "employee.offboarded": 1,
    }
    by_kind = {kind: (subject, data) for kind, subject, data in recorded}
    assert by_kind["transaction.initiated"][1]["tx_ref"] == data["tx_ref"]
    assert by_kind["transaction.initiated"][1]["kind"] == "offboard"
    assert by_kind["order.created"][0] == uuid.UUID(order["id"])
    assert {item["stage"] for item in by_kind["order.created"][1]["items"]} == {"retrieval_scheduled"}
    assert by_kind["equipment.moved_to_storage"] == (laptop, by_kind["equipment.moved_to_storage"][1])
    assert by_kind["equipment.moved_to_storage"][1]["status"] == "In_Storage"
    assert by_kind["equipment.unassigned"][1]["id"] == str(phone)
    updates = [data for kind, _, data in recorded if kind == "order.updated"]
    assert sorted(update["items"][0]["stage"] for update in updates) == ["inspected", "received"]
    assert by_kind["order.completed"][1]["status"] == "completed"


def test_offboarding_by_card_through_the_sandbox(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway, operator: None
) -> None:
    employee = add_employee(db, api.company_id)
    laptop = add_assigned_device(db, employee)
    response = api.post(INITIATE, {**offboard_body(employee, [str(laptop)], "Card"), "country_id": None})
    assert_error(response, 422)  # both spellings of the country: one only
    body = offboard_body(employee, [{"equipment_id": str(laptop)}], "Card")
    body["country_id"] = body.pop("employee_country_id")  # the accepted alias
    response = api.post(INITIATE, body)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["status"] == "Pending" and data["kind"] == "offboard" and data["link"]
    # Card: 1.5 % gateway fee on 25000 + 12000 + 18000 = 55000 -> 825.00.
    assert data["gateway_fee"] == 825.0 and data["total_amount"] == 55825.0
    assert count(db, EquipmentReservation) == 1
    page = client.get(str(data["link"]))
    assert page.status_code == 200
    # The page's lines are the retrieval's, and add up to its total (they were a purchase's, at 0).
    assert "Retrieval of MacBook Pro" in page.text and "Onboarding" not in page.text
    lines = re.findall(r'<tr><td>([^<]+)</td><td class="money">([^<]+)</td></tr>', page.text)
    assert lines == [
        ("Retrieval fee", "25,000.00"),
        ("Inspection fee", "12,000.00"),
        ("Storage fee", "18,000.00"),
        ("Gateway fee", "825.00"),
    ]
    assert '<td>Total (NGN)</td><td class="money">55,825.00</td>' in page.text
    paid = client.post(f"{data['link']}/pay", follow_redirects=False)
    assert paid.status_code == 303
    verified = api.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]
    assert verified["status"] == "Fulfilled" and verified["order_id"]
    order_id = verified["order_id"]
    assert count(db, EquipmentReservation) == 0

    listed = api.get("/client/orders", kind="retrieval", status="in_progress").json()["data"]
    assert [record["id"] for record in listed["data"]] == [order_id]
    assert api.get("/client/orders", kind="purchase").json()["data"]["total"] == 0
    assert api.get("/client/orders", status="completed").json()["data"]["total"] == 0
    assert_error(api.get("/client/orders", kind="nope"), 422)
    assert_error(api.get("/client/orders", status="Completed"), 422)

    item_id = api.get(f"/client/orders/{order_id}").json()["data"]["items"][0]["id"]
    one = advance(order_id, "picked_up", "--item", item_id)
    assert one["items"][0]["stage"] == "picked_up"
    advance(order_id, "received")
    assert status_of(db, laptop) == (EquipmentStatus.IN_STORAGE, None)
    assert history(db, laptop)[-1] == "moved_to_storage"
    assert advance(order_id, "inspected")["status"] == "completed"
    assert api.delete(f"/client/employees/{employee}").status_code == 200
    kinds = [kind for kind, _, _ in events(db, api.company_id)]
    assert kinds[0] == "transaction.initiated" and kinds.count("order.created") == 1
    assert kinds.count("order.updated") == 3 and kinds.count("order.completed") == 1


def test_a_card_offboarding_with_nothing_to_pay_is_fulfilled_without_the_gateway(
    api: Api, db: Session, sandbox: SandboxGateway, operator: None
) -> None:
    """A fee schedule without retrieval fees (an operator's `fees set`, as migration 0005 left the
    currencies it does not list): a Card transaction of 0 was sent to the gateway, which would take
    a payment of 0 or refuse it (a 502)."""
    result = runner.invoke(cli, ["fees", "set", "JPY", "--retrieval-fee", "0", "--inspection-fee", "0"])
    assert result.exit_code == 0, result.output
    employee = add_employee(db, api.company_id, country_code="JP")
    laptop = add_assigned_device(db, employee)
    body = {**offboard_body(employee, [str(laptop)], "Card"), "employee_country_id": "JP"}
    response = api.post(INITIATE, body)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert (data["payment_method"], data["currency"], data["total_amount"]) == ("Card", "JPY", 0)
    assert data["status"] == "Fulfilled" and data["link"] is None and data["order_id"]
    assert count(db, SandboxPayment) == 0  # no checkout was opened
    order = api.get(f"/client/orders/{data['order_id']}").json()["data"]
    assert order["kind"] == "retrieval" and [item["equipment_id"] for item in order["items"]] == [str(laptop)]


def test_refusals_name_the_problem_and_write_nothing(api: Api, other_api: Api, db: Session) -> None:
    ada = add_employee(db, api.company_id, first="Ada")
    grace = add_employee(db, api.company_id, first="Grace")
    kenyan = add_employee(db, api.company_id, "KE", first="Wanjiru")
    stranger = add_employee(db, other_api.company_id, first="Eve")
    adas = add_assigned_device(db, ada)
    graces = add_assigned_device(db, grace)
    kenyans = add_assigned_device(db, kenyan)
    strangers = add_assigned_device(db, stranger)
    stored = add_storage_device(db, api.company_id)
    add_credit(db, api.company_id, "NGN", "1000000")
    arranged = count(db, Event)  # the credit's wallet.credited

    assert_error(api.post(INITIATE, offboard_body(ada, [str(stored)])), 409, "not Assigned")
    assert_error(api.post(INITIATE, offboard_body(ada, [str(graces)])), 409, "not assigned to Ada")
    refused = assert_error(api.post(INITIATE, offboard_body(ada, [str(strangers)])), 422)
    assert list(refused["errors"]) == [f"orders.{ada}.0"]
    refused = assert_error(api.post(INITIATE, offboard_body(kenyan, [str(kenyans)])), 422)
    assert (
        list(refused["errors"]) == [f"orders.{kenyan}"]
        and "Kenya" in refused["errors"][f"orders.{kenyan}"][0]
    )
    refused = assert_error(api.post(INITIATE, offboard_body(stranger, [str(strangers)])), 422)
    assert f"orders.{stranger}" in refused["errors"]
    refused = assert_error(api.post(INITIATE, offboard_body(ada, [str(adas), str(adas)])), 422)
    assert f"orders.{ada}.1" in refused["errors"]
    # A malformed device is named at its own path, once: not once per form it could have taken.
    for item, path, message in [
        ({"equipment_id": str(adas), "destination": "moon"}, "0.destination", "'storage' or 'office'"),
        (5, "0.equipment_id", "valid string"),
        ({"destination": "office"}, "0.equipment_id", "Field required"),
    ]:
        refused = assert_error(api.post(INITIATE, offboard_body(ada, [item])), 422)
        assert list(refused["errors"]) == [f"orders.{ada}.{path}"], refused
        assert message in refused["errors"][f"orders.{ada}.{path}"][0]
    both = {**offboard_body(ada, [str(adas)]), "country_id": "NG"}
    assert_error(
        api.post(INITIATE, both), 422, "Give employee_country_id or country_id (the same field), not both."
    )
    refused = assert_error(api.post(INITIATE, offboard_body(ada, [])), 422)
    assert count(db, Transaction) == 0 and count(db, Event) == arranged

    # Named by a Pending transaction (Card, unpaid): reserved, 409 for any second initiate.
    pending = api.post(INITIATE, offboard_body(ada, [str(adas)], "Card"))
    assert pending.status_code == 200, pending.text
    second = assert_error(api.post(INITIATE, offboard_body(ada, [str(adas)])), 409, "already reserved")
    assert f"({adas}), by {pending.json()['data']['tx_ref']}. It cannot be given again" in second["message"]
    assert count(db, Transaction) == 1 and count(db, EquipmentReservation) == 1
    # Another company cannot see it at all.
    refused = assert_error(other_api.post(INITIATE, offboard_body(ada, [str(adas)])), 422)
    assert f"orders.{ada}" in refused["errors"]


def test_a_retrieval_in_progress_refuses_a_second_offboarding_and_cancel_keeps_the_device(
    api: Api, other_api: Api, db: Session, operator: None
) -> None:
    ada = add_employee(db, api.company_id)
    laptop = add_assigned_device(db, ada)
    add_credit(db, api.company_id, "NGN", "1000000")
    order_id = api.post(INITIATE, offboard_body(ada, [str(laptop)])).json()["data"]["order_id"]
    assert_error(api.post(INITIATE, offboard_body(ada, [str(laptop)])), 409, "already being retrieved")

    # Tenancy: another company sees neither the order nor the open retrieval.
    assert_error(other_api.get(f"/client/orders/{order_id}"), 404)
    assert other_api.get("/client/orders").json()["data"]["total"] == 0
    assert_error(other_api.get(f"/client/employees/{ada}"), 404)

    code, _, err = orders_cli("advance", order_id, "picked_up", "--json")
    assert code == 0, err
    for args, fragment in [
        (("advance", order_id, "retrieval_scheduled"), "only move forward"),
        (("advance", order_id, "picked_up"), "already at picked_up"),
        (("advance", order_id, "order_delivered"), "Unknown stage"),
        (("advance", order_id, "teleported"), "Unknown stage"),
        (("advance", order_id, "received", "--item", str(uuid.uuid4())), "has no item"),
        (("advance", str(uuid.uuid4()), "received"), "no order with id"),
        (("advance", "not-a-uuid", "received"), "ORDER_ID must be a UUID"),
        (("cancel", str(uuid.uuid4())), "no order with id"),
    ]:
        code, out, err = orders_cli(*args)
        assert code == 1 and out == "", (args, out)
        assert err.startswith("error: ") and err.count("\n") == 1 and fragment in err, (args, err)

    code, out, err = orders_cli("cancel", order_id, "--json")
    assert code == 0, err
    cancelled = json.loads(out)
    assert cancelled["status"] == "cancelled" and cancelled["items"][0]["stage"] == "picked_up"
    assert status_of(db, laptop) == (EquipmentStatus.ASSIGNED, ada)  # it stays with the employee
    assert api.get(f"/client/employees/{ada}").json()["data"]["open_retrievals"] == []
    for args in (("cancel", order_id), ("advance", order_id, "received")):
        code, _, err = orders_cli(*args)
        assert code == 1 and "cancelled" in err
    assert [kind for kind, _, _ in events(db, api.company_id)][-2:] == ["order.updated", "order.updated"]
    # The device can be offboarded again.
    again = api.post(INITIATE, offboard_body(ada, [str(laptop)]))
    assert again.status_code == 200, again.text


def test_a_completed_order_cannot_be_cancelled_and_purchases_move_through_their_stages(
    api: Api, db: Session, operator: None
) -> None:
    employee = add_employee(db, api.company_id)
    add_credit(db, api.company_id, "NGN", "100000000")
    pricing = next(
        record
        for record in api.get("/client/assets", country_id="NG", currency_code="NGN").json()["data"]["data"]
    )["asset_pricing"]["id"]
    body = {
        "payment_method": "Credit",
        "employee_country_id": "NG",
        "orders": {str(employee): [{"asset_pricing_id": pricing}]},
    }
    data = api.post("/client/transactions/initiate", body).json()["data"]
    assert data["kind"] == "catalog" and data["retrieval_fee"] == 0 and data["storage_fee"] == 0
    order = api.get(f"/client/orders/{data['order_id']}").json()["data"]
    assert (order["kind"], order["status"]) == ("purchase", "in_progress")
    assert order["items"][0]["stage"] == "order_placed"
    assert api.get("/client/orders", kind="purchase", status="in_progress").json()["data"]["total"] == 1
    code, _, err = orders_cli("advance", order["id"], "received")
    assert code == 1 and "Unknown stage" in err
    done = advance(order["id"], "order_delivered")
    assert done["status"] == "completed" and len(done["items"][0]["stages"]) == 6
    code, _, err = orders_cli("cancel", order["id"])
    assert code == 1 and "completed" in err
    # A delivery does not move the device: it was Assigned at fulfilment.
    device = db.scalars(select(Equipment)).one()
    db.commit()
    assert device.status == EquipmentStatus.ASSIGNED
    assert count(db, Order) == 1
