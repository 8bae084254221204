"""The `webhooks` section of the OpenAPI document: one entry per event type, each body typed with
the answer of its subject; and the suite's receiver holds every delivery to it (receiver.py), so a
payload that drifts from the document fails the test that delivered it."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.models import PING_EVENT_TYPE, EventType
from tests.webhooks.receiver import event_data, payload_problems, running_receiver

SUBJECT_ANSWERS = {
    "employee": "EmployeeOut",
    "department": "DepartmentOut",
    "equipment": "EquipmentOut",
    "location": "LocationOut",
    "transaction": "TransactionOut",
    "order": "OrderOut",
    "wallet": "WalletOut",
    "console_user": "ConsoleUserOut",
    "console_settings": "ConsoleSettingsOut",
    "api_token": "ApiTokenOut",
    "webhook_endpoint": "WebhookEndpointOut",
    "webhook_delivery": "WebhookDeliveryOut",
    "scim_settings": "ScimSettingsOut",
    "custom_field": "CustomFieldOut",
    "company": "CompanyOut",
    "payment_anomaly": "PaymentAnomalyOut",
}


def envelope(event_type: str, data: Any) -> bytes:
    body = {
        "id": str(uuid.uuid4()),
        "type": event_type,
        "timestamp": "2026-11-22T15:00:00.000000Z",
        "data": data,
    }
    return json.dumps(body).encode()


@pytest.mark.one_database
def test_the_documented_deadline_is_the_operators(settings: Settings) -> None:
    """Every webhook's description gives the answer deadline the workers apply, not a fixed one."""
    app = create_app(settings.model_copy(update={"webhook_timeout_seconds": 5}))
    try:
        webhooks = TestClient(app).get("/api/v2/openapi.json").json()["webhooks"]
    finally:
        app.state.engine.dispose()
    descriptions = {entry["post"]["description"] for entry in webhooks.values()}
    assert len(descriptions) == 1
    assert "answer any 2xx within 5 seconds" in descriptions.pop()


@pytest.mark.one_database
def test_one_webhook_per_event_type_typed_by_its_subject(client: TestClient) -> None:
    document = client.get("/api/v2/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    webhooks = document["webhooks"]
    assert set(webhooks) == {str(member) for member in EventType} | {PING_EVENT_TYPE}
    schemas = document["components"]["schemas"]
    for event_type, entry in webhooks.items():
        operation = entry["post"]
        assert operation["summary"] and operation["description"]
        assert {p["name"] for p in operation["parameters"]} == {
            "webhook-id",
            "webhook-timestamp",
            "webhook-signature",
        }
        body = operation["requestBody"]["content"]["application/json"]
        component = schemas[body["schema"]["$ref"].rsplit("/", 1)[1]]
        assert component["required"] == ["id", "type", "timestamp", "data"]
        assert component["properties"]["type"] == {"type": "string", "const": event_type}
        subject = event_type.partition(".")[0]
        if event_type != PING_EVENT_TYPE:
            assert component["properties"]["data"] == {
                "$ref": f"#/components/schemas/{SUBJECT_ANSWERS[subject]}"
            }
        assert not payload_problems(json.dumps(body["example"]).encode()), event_type
    assert "EquipmentMovedToStorageEvent" in schemas and "PingEvent" in schemas


@pytest.mark.one_database
def test_a_payload_that_does_not_match_is_named(client: TestClient) -> None:
    employee = event_data("employee.created")
    assert payload_problems(envelope("employee.created", employee)) == []
    wrong_money = {**event_data("transaction.fulfilled"), "total_amount": 12.5}
    assert any(
        "total_amount" in problem
        for problem in payload_problems(envelope("transaction.fulfilled", wrong_money))
    )
    missing = {key: value for key, value in employee.items() if key != "email"}
    assert any("email" in problem for problem in payload_problems(envelope("employee.updated", missing)))
    assert payload_problems(envelope("employee.promoted", employee)) == [
        "'employee.promoted' is not an event type of the document's webhooks"
    ]
    assert payload_problems(b"not json")[0].startswith("not an event envelope")


@pytest.mark.one_database
def test_the_receiver_fails_its_test_on_a_payload_that_does_not_match() -> None:
    with pytest.raises(AssertionError, match=r"employee\.created"), running_receiver() as receiver:
        answer = httpx.post(receiver.url, content=envelope("employee.created", {"id": "x"}), timeout=10)
        assert answer.status_code == 200
    with running_receiver() as receiver:  # a matching one passes
        httpx.post(
            receiver.url, content=envelope("department.deleted", event_data("department.deleted")), timeout=10
        )
