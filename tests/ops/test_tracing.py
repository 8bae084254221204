"""W3C trace context: a request's `traceparent` reaches the events it records, their deliveries,
and the receiver of each delivery, so an operator can follow one change to its webhooks."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.config import Settings
from outfitter.models import Event, WebhookDelivery
from outfitter.worker import Worker
from tests.factories import Api
from tests.webhooks.conftest import register
from tests.webhooks.receiver import Receiver, served_document

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _trace_ids(db: Session) -> tuple[list[str | None], list[str | None]]:
    events = list(db.scalars(select(Event.trace_id).order_by(Event.created_at)))
    deliveries = list(db.scalars(select(WebhookDelivery.trace_id).order_by(WebhookDelivery.created_at)))
    db.commit()
    return events, deliveries


def test_a_patch_carries_its_trace_to_the_event_the_delivery_and_the_receiver(
    client: TestClient,
    api: Api,
    db: Session,
    private_ok: Settings,
    receiver: Receiver,
    worker: Worker,
) -> None:
    served_document()  # the receiver checks bodies against it: made before the sends' deadlines
    register(api, receiver.url, event_types=["department.updated"])
    department = api.post("/client/departments", {"name": "Ops"}).json()["data"]
    updated = api.patch(
        f"/client/departments/{department['id']}",
        {"name": "Operations"},
        headers={"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"},
    )
    assert updated.status_code == 200, updated.text

    events, deliveries = _trace_ids(db)
    assert len(events) == 2 and events[1] == TRACE  # the update's; the create had a trace of its own
    assert events[0] is not None and re.fullmatch(r"[0-9a-f]{32}", events[0]) and events[0] != TRACE
    assert deliveries == [TRACE]

    worker.run_once()
    (received,) = {request.headers["webhook-id"]: request for request in receiver.received}.values()
    header = received.headers["traceparent"]
    assert re.fullmatch(rf"00-{TRACE}-[0-9a-f]{{16}}-01", header), header
    assert header.split("-")[2] != "00f067aa0ba902b7"  # the attempt is a span of its own


@pytest.mark.one_database
def test_a_malformed_traceparent_starts_a_new_trace(client: TestClient, api: Api, db: Session) -> None:
    for number, malformed in enumerate(
        (
            f"00-{'0' * 32}-00f067aa0ba902b7-01",  # an all-zero trace id
            f"ff-{TRACE}-00f067aa0ba902b7-01",  # version ff is invalid
            f"00-{TRACE.upper()}-00f067aa0ba902b7-01",  # upper-case hex
            f"00-{TRACE}-00f067aa0ba902b7-01-extra",  # version 00 has four fields
            "not a traceparent",
        )
    ):
        answer = api.post(
            "/client/departments", {"name": f"Team {number}"}, headers={"traceparent": malformed}
        )
        assert answer.status_code == 201, answer.text
    events, _ = _trace_ids(db)
    assert len(events) == 5 and len(set(events)) == 5
    assert all(trace is not None and re.fullmatch(r"[0-9a-f]{32}", trace) for trace in events)
    assert TRACE not in events and TRACE.upper() not in events
