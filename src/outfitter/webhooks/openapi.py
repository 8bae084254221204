"""The `webhooks` section of the OpenAPI 3.1 document: one entry per event type (and `ping`), each
with the schema of the body a receiver gets (docs/webhooks.md), so that a client generated from the
document has typed events.

The body is the envelope `{id, type, timestamp, data}`; `data` is the subject as the API answers
it, so it refers to the answer's own component (`EmployeeOut`, `EquipmentOut`...). Each event type
gets a component of its own (`EquipmentAssignedEvent`: `type` is that one value), which is what a
generator turns into a model even when it reads no `webhooks` section.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from outfitter.customfields.schemas import CustomFieldOut
from outfitter.equipment.schemas import EquipmentOut
from outfitter.events.schemas import (
    ApiTokenOut,
    CompanyOut,
    ConsoleSettingsOut,
    ConsoleUserOut,
    PaymentAnomalyOut,
    ScimSettingsOut,
)
from outfitter.http.openapi import example_of
from outfitter.locations.schemas import LocationOut
from outfitter.models import PING_EVENT_TYPE, EventType
from outfitter.payments.schemas import OrderOut, TransactionOut, WalletOut
from outfitter.people.schemas import DepartmentOut, EmployeeOut
from outfitter.webhooks.schemas import WebhookDeliveryOut, WebhookEndpointOut

# The answer whose shape an event's `data` has, by the event's subject (the type's part before the dot).
SUBJECT_SCHEMAS: dict[str, type[BaseModel]] = {
    "employee": EmployeeOut,
    "department": DepartmentOut,
    "equipment": EquipmentOut,
    "location": LocationOut,
    "transaction": TransactionOut,
    "order": OrderOut,
    "wallet": WalletOut,
    "console_user": ConsoleUserOut,
    "api_token": ApiTokenOut,
    "webhook_endpoint": WebhookEndpointOut,
    "webhook_delivery": WebhookDeliveryOut,
    "scim_settings": ScimSettingsOut,
    "console_settings": ConsoleSettingsOut,
    "custom_field": CustomFieldOut,
    "company": CompanyOut,
    "payment_anomaly": PaymentAnomalyOut,
}
# Subjects no API operation answers (the console's users and settings, tokens, SCIM settings):
# their components are added here.
EVENT_ONLY_SCHEMAS: tuple[type[BaseModel], ...] = (
    ConsoleUserOut,
    ApiTokenOut,
    ScimSettingsOut,
    ConsoleSettingsOut,
    CompanyOut,
    PaymentAnomalyOut,
)
_PING_DATA = {
    "type": "object",
    "properties": {"endpoint_id": {"type": "string", "format": "uuid"}, "url": {"type": "string"}},
    "required": ["endpoint_id", "url"],
    "additionalProperties": False,
}
_HEADERS = [
    ("webhook-id", "The event's id, the same on every retry of it: the key to process it once"),
    ("webhook-timestamp", "The unix time (seconds) of this attempt"),
    ("webhook-signature", "`v1,` and the base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`"),
]


def component_name(event_type: str) -> str:
    """`equipment.moved_to_storage` -> `EquipmentMovedToStorageEvent`."""
    words = event_type.replace(".", "_").split("_")
    return "".join(word.capitalize() for word in words) + "Event"


def _subject_of(event_type: str) -> str:
    return event_type.partition(".")[0]


def _payload_schema(event_type: str, data: dict[str, Any]) -> dict[str, Any]:
    after = "before the change" if event_type.endswith(".deleted") else "after the change"
    return {
        "title": component_name(event_type),
        "type": "object",
        "description": f"The body of each `{event_type}` delivery: `data` is the subject as the API "
        f"answers it {after}.",
        "properties": {
            "id": {"type": "string", "format": "uuid", "description": "The event's id (`webhook-id`)"},
            "type": {"type": "string", "const": event_type},
            "timestamp": {
                "type": "string",
                "format": "date-time",
                "description": "When the change happened",
            },
            "data": data,
        },
        "required": ["id", "type", "timestamp", "data"],
        "additionalProperties": False,
    }


def add_webhooks(document: dict[str, Any], timeout_seconds: float) -> None:
    """Add the payload components and the `webhooks` section to a completed document; a receiver
    has `timeout_seconds` (the operator's OUTFITTER_WEBHOOK_TIMEOUT_SECONDS) to answer."""
    schemas: dict[str, Any] = document["components"]["schemas"]
    for model in EVENT_ONLY_SCHEMAS:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}", mode="serialization")
        schemas.update(schema.pop("$defs", {}))
        schemas.setdefault(model.__name__, schema)
    webhooks: dict[str, Any] = {}
    for event_type in [*(str(member) for member in EventType), PING_EVENT_TYPE]:
        if event_type == PING_EVENT_TYPE:
            data: dict[str, Any] = _PING_DATA
            summary = "A test delivery, sent by POST /client/webhook-endpoints/{endpointId}/ping"
        else:
            subject = SUBJECT_SCHEMAS[_subject_of(event_type)].__name__
            if subject not in schemas:  # the answers' components are the contract `data` shares
                raise LookupError(f"{subject} is not a component of the document")
            data = {"$ref": f"#/components/schemas/{subject}"}
            summary = f"`{event_type}`: `data` is the {_subject_of(event_type)} ({subject})"
        name = component_name(event_type)
        schemas[name] = _payload_schema(event_type, data)
        reference = {"$ref": f"#/components/schemas/{name}"}
        webhooks[event_type] = {
            "post": {
                "summary": summary,
                "description": "Sent to every enabled endpoint subscribed to this type (or to every "
                f"type). Verify the signature over the raw body, then answer any 2xx within "
                f"{timeout_seconds:g} seconds; anything else is retried (docs/webhooks.md).",
                "parameters": [
                    {
                        "name": header,
                        "in": "header",
                        "required": True,
                        "description": text,
                        "schema": {"type": "string"},
                    }
                    for header, text in _HEADERS
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": reference, "example": example_of(reference, schemas)}
                    },
                },
                "responses": {"2XX": {"description": "Received; nothing more is sent for this event"}},
            }
        }
    document["webhooks"] = webhooks
