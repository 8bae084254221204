"""`outbox`: an event commits with the change it describes, or not at all."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from outfitter.db.session import JsonText, json_text
from outfitter.db.tenancy import TenantScopeError, TenantSession, bind_company
from outfitter.models import Event, EventType
from outfitter.outbox import NewEvent, record_event, record_events
from tests.factories import Api


def _events(engine: Engine) -> list[Event]:
    with Session(engine) as session:
        return list(session.scalars(select(Event).order_by(Event.type)))


def test_a_committed_batch_is_one_row_per_event_of_the_bound_company(engine: Engine, api: Api) -> None:
    subject = uuid.uuid4()
    with TenantSession(engine) as session:
        bind_company(session, api.company_id)
        ids = record_events(
            session,
            [
                NewEvent(EventType.EQUIPMENT_ADDED, subject, {"id": str(subject), "status": "Unassigned"}),
                NewEvent(EventType.EQUIPMENT_ASSIGNED, subject, {"id": str(subject), "status": "Assigned"}),
            ],
            actor="ops",
        )
        session.commit()
    events = _events(engine)
    assert sorted(event.id for event in events) == sorted(ids)
    assert [(e.type, e.subject_type, e.subject_id, e.actor, e.company_id) for e in events] == [
        (EventType.EQUIPMENT_ADDED, "equipment", subject, "ops", api.company_id),
        (EventType.EQUIPMENT_ASSIGNED, "equipment", subject, "ops", api.company_id),
    ]
    assert events[1].data == {"id": str(subject), "status": "Assigned"}


def test_a_rolled_back_change_leaves_no_event(engine: Engine, api: Api) -> None:
    with TenantSession(engine) as session:
        bind_company(session, api.company_id)
        record_event(session, EventType.EMPLOYEE_CREATED, uuid.uuid4(), {"id": "x"})
        session.rollback()
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Event)) == 0


def test_a_session_bound_to_no_company_must_name_one(engine: Engine) -> None:
    with TenantSession(engine) as session, pytest.raises(TenantScopeError):
        record_event(session, EventType.EMPLOYEE_CREATED, uuid.uuid4(), {})


def test_json_columns_take_a_rendered_answers_text_and_any_other_json_value(engine: Engine, api: Api) -> None:
    """The engine's JSON serializer (db.session.json_text): data kept as its rendered text is sent
    as that text; any other JSON value as the standard library writes it (an integer beyond 64
    bits, keys that are not strings)."""
    rendered = JsonText('{"id":"x","price":"12.50","nested":{"a":[1,2]}}')
    beyond = {"huge": 2**70, 7: "a key that is an int"}
    with TenantSession(engine) as session:
        bind_company(session, api.company_id)
        record_events(
            session,
            [
                NewEvent(EventType.EQUIPMENT_ADDED, uuid.uuid4(), rendered),
                NewEvent(EventType.EQUIPMENT_ASSIGNED, uuid.uuid4(), beyond),
            ],
        )
        session.commit()
    written = {event.type: event.data for event in _events(engine)}
    assert written[EventType.EQUIPMENT_ADDED] == {"id": "x", "price": "12.50", "nested": {"a": [1, 2]}}
    assert written[EventType.EQUIPMENT_ASSIGNED] == {"huge": 2**70, "7": "a key that is an int"}
    assert json_text(rendered) == rendered.text  # not serialized again
