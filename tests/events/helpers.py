"""Reading the activity log as a client does."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from outfitter.models.events import Event
from tests.factories import Api


def log(api: Api, **filters: Any) -> list[dict[str, Any]]:
    """Every event of the company, newest first (one page of 100)."""
    response = api.get("/client/events", per_page=100, **filters)
    assert response.status_code == 200, response.text
    records: list[dict[str, Any]] = response.json()["data"]["data"]
    return records


def only(api: Api, type: str) -> dict[str, Any]:
    """The one event of `type`: the test fails if there are none or several."""
    found = log(api, type=type)
    assert len(found) == 1, [event["type"] for event in found]
    return found[0]


def assert_event(
    event: dict[str, Any], type: str, subject_id: str, data: dict[str, Any], actor: str | None = None
) -> None:
    """`actor` by default: the test company's token, by its name and id."""
    assert event["type"] == type
    assert event["subject_type"] == type.partition(".")[0]
    assert event["subject_id"] == subject_id
    if actor is None:
        assert re.fullmatch(r"token:Acme Ltd API \([0-9a-f-]{36}\)", event["actor"]), event["actor"]
    else:
        assert event["actor"] == actor
    assert event["data"] == data


def stored_events(db: Session) -> int:
    """Rows of the events table, every company's (the read ends at once, for SQLite's writers)."""
    count = db.scalar(select(func.count()).select_from(Event)) or 0
    db.commit()
    return count
