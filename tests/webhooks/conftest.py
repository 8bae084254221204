"""Webhook test set-up: a real receiver on 127.0.0.1, the app allowed to register it, and a worker
the tests drive (`run_once`): no background worker runs in tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from outfitter.config import Settings
from outfitter.db.session import make_sessionmaker
from outfitter.db.tenancy import TenantSession, bind_company
from outfitter.models import EventType, WebhookAttempt, WebhookDelivery
from outfitter.outbox import NewEvent, record_events
from outfitter.worker import Worker
from tests.factories import Api
from tests.payments.conftest import live_server  # noqa: F401 (the app under a real server)
from tests.webhooks.receiver import Receiver, event_data, running_receiver


@pytest.fixture
def webhook_settings(settings: Settings) -> Settings:
    """The suite's settings, allowing receivers on 127.0.0.1 and retrying at once."""
    return settings.model_copy(
        update={
            "webhook_allow_private": True,
            "webhook_retry_schedule": [0, 0, 0],
            "webhook_timeout_seconds": 5,
        }
    )


@pytest.fixture
def private_ok(app: FastAPI, webhook_settings: Settings) -> Iterator[Settings]:
    """The app registers 127.0.0.1 URLs during the test (OUTFITTER_WEBHOOK_ALLOW_PRIVATE=true)."""
    original = app.state.settings
    app.state.settings = webhook_settings
    yield webhook_settings
    app.state.settings = original


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as running:
        yield running


def make_worker(engine: Engine, settings: Settings, **kwargs: Any) -> Worker:
    return Worker(make_sessionmaker(engine, TenantSession), settings, jobs=(), **kwargs)


@pytest.fixture
def worker(engine: Engine, webhook_settings: Settings) -> Iterator[Worker]:
    runner = make_worker(engine, webhook_settings, concurrency=4)
    yield runner
    runner.close()


def register(api: Api, url: str, **body: Any) -> dict[str, Any]:
    response = api.post("/client/webhook-endpoints", {"url": url, **body})
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def emit(engine: Engine, company_id: uuid.UUID, *types: EventType) -> list[uuid.UUID]:
    """Events as a service records them: in a session bound to the company, committed."""
    with TenantSession(engine) as session, session.begin():
        bind_company(session, company_id)
        return record_events(
            session,
            [NewEvent(type, uuid.uuid4(), event_data(type)) for type in types],
        )


def deliveries(db: Session) -> list[WebhookDelivery]:
    # populate_existing: the test's session keeps objects across commits (expire_on_commit off).
    statement = select(WebhookDelivery).order_by(WebhookDelivery.created_at, WebhookDelivery.event_type)
    rows = list(db.scalars(statement.execution_options(populate_existing=True)))
    db.commit()
    return rows


def attempts(db: Session, delivery_id: uuid.UUID) -> list[WebhookAttempt]:
    rows = list(
        db.scalars(
            select(WebhookAttempt)
            .where(WebhookAttempt.delivery_id == delivery_id)
            .order_by(WebhookAttempt.attempted_at)
        )
    )
    db.commit()
    return rows


def count(db: Session, model: type) -> int:
    """Rows of a table now; the read ends at once (on SQLite a reader holds the write lock)."""
    value = db.scalar(select(func.count()).select_from(model)) or 0
    db.commit()
    return value
