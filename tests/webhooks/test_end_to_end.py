"""A client's whole day through HTTP, with an endpoint registered: every change it makes, every
payment, order and wallet move reaches the receiver once, signed, with the same id and data as the
activity log shows, and the delivery log accounts for each."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session
from standardwebhooks.webhooks import Webhook

from outfitter.config import Settings
from outfitter.worker import Worker
from tests.factories import Api, load_demo_catalog
from tests.payments.conftest import add_credit, card_body, prices
from tests.people.helpers import create_employee
from tests.webhooks.conftest import register
from tests.webhooks.receiver import Receiver


def _activity_log(api: Api) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    page = 1
    while True:
        body = api.get("/client/events", per_page=100, page=page).json()["data"]
        events += body["data"]
        if page >= body["last_page"]:
            return events
        page += 1


def test_every_change_of_a_day_reaches_the_endpoint_once_signed(
    api: Api,
    other_api: Api,
    private_ok: Settings,
    receiver: Receiver,
    worker: Worker,
    engine: Engine,
    db: Session,
) -> None:
    load_demo_catalog(engine)
    endpoint = register(api, receiver.url)  # every type
    register(other_api, receiver.url)  # another company's endpoint hears nothing of this one

    employee = create_employee(api)
    assert api.patch(f"/client/employees/{employee['id']}", {"job_title": "CTO"}).status_code == 200
    department = api.post("/client/departments", {"name": "Engineering", "member_ids": [employee["id"]]})
    assert department.status_code == 201, department.text
    department_id = department.json()["data"]["id"]
    assert api.patch(f"/client/departments/{department_id}", {"name": "R&D"}).status_code == 200
    device = api.post("/client/equipment", {"title": "Spare laptop", "status": "In_Storage"}).json()["data"]
    assert api.patch(f"/client/equipment/{device['id']}", {"make": "Lenovo"}).status_code == 200
    assert api.patch(f"/client/equipment/{device['id']}", {"status": "Sold"}).status_code == 200
    assert api.delete(f"/client/equipment/{device['id']}").status_code == 200
    add_credit(db, api.company_id, "NGN", "100000000")
    pricing_id = prices(api)[0]["asset_pricing"]["id"]
    bought = api.post(
        "/client/transactions/initiate", card_body(employee["id"], pricing_id, payment_method="Credit")
    )
    assert bought.status_code == 200 and bought.json()["data"]["status"] == "Fulfilled", bought.text
    assert api.delete(f"/client/departments/{department_id}").status_code == 200

    logged = _activity_log(api)
    while worker.run_once(jobs=False):
        pass

    assert Counter(event["type"] for event in logged) == {
        "employee.created": 1,
        "employee.updated": 1,
        "department.created": 1,
        "department.updated": 1,
        "department.deleted": 1,
        "equipment.added": 2,  # the registered device, and the one the purchase made
        "equipment.moved_to_storage": 1,
        "equipment.updated": 1,
        "equipment.sold": 1,
        "equipment.archived": 1,
        "equipment.assigned": 1,
        "wallet.credited": 1,
        "wallet.debited": 1,
        "transaction.initiated": 1,
        "transaction.fulfilled": 1,
        "order.created": 1,
    }
    received = {request.headers["webhook-id"]: request for request in receiver.received}
    assert len(received) == len(receiver.received) == len(logged)  # once each, nothing else
    for event in logged:
        request = received[event["id"]]
        payload = Webhook(endpoint["secret"]).verify(request.body, request.headers)
        assert payload == {
            "id": event["id"],
            "type": event["type"],
            "timestamp": event["created_at"],
            "data": event["data"],
        }
    assert json.loads(received[logged[0]["id"]].body)["data"] == logged[0]["data"]

    log = api.get(f"/client/webhook-endpoints/{endpoint['id']}/deliveries", per_page=100).json()["data"]
    assert log["total"] == len(logged)
    assert {row["event_id"] for row in log["data"]} == set(received)
    assert {(row["status"], row["attempts"], row["last_status_code"]) for row in log["data"]} == {
        ("succeeded", 1, 200)
    }
