"""The delivery log of an endpoint in cursor mode."""

from __future__ import annotations

from sqlalchemy import Engine

from outfitter.config import Settings
from outfitter.models.events import EventType
from tests.factories import Api, assert_error, walk_cursor
from tests.webhooks.conftest import emit, register
from tests.webhooks.receiver import Receiver


def test_the_delivery_log_walks_by_cursor(
    api: Api, other_api: Api, private_ok: Settings, receiver: Receiver, engine: Engine
) -> None:
    endpoint = register(api, receiver.url)
    # One batch: the deliveries share their created_at, so the id alone orders them.
    emit(engine, api.company_id, *[EventType.EMPLOYEE_CREATED] * 4, EventType.EMPLOYEE_UPDATED)
    path = f"/client/webhook-endpoints/{endpoint['id']}/deliveries"
    paged = api.get(path).json()["data"]
    assert paged["total"] == 5
    for limit in (1, 2, 5):
        assert walk_cursor(api, path, limit=limit) == paged["data"]
    pending = walk_cursor(api, path, limit=2, status="pending")
    assert pending == paged["data"]
    assert walk_cursor(api, path, status="succeeded") == []
    cursor = api.get(path, limit=2).json()["data"]["next_cursor"]
    assert_error(api.get(path, limit=2, cursor=cursor, status="failed"), 422, "other filters")
    # Another company's endpoint is 404 in cursor mode as in page mode.
    assert_error(other_api.get(path, limit=2), 404)
