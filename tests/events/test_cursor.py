"""The activity log in cursor mode: the same events as the pages, with every filter, and no count."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import Api, walk_cursor
from tests.people.helpers import create_employee


@pytest.fixture
def activity(api: Api) -> list[dict[str, Any]]:
    people = [create_employee(api, first_name=name) for name in ("Ada", "Bola", "Chidi")]
    api.patch(f"/client/employees/{people[0]['id']}", {"job_title": "CTO"})
    api.post("/client/departments", {"name": "Ops", "member_ids": [people[1]["id"]]})
    return people


@pytest.mark.parametrize(
    "filters",
    [{}, {"type": "employee.*"}, {"type": "department.created,employee.updated"}, {"subject": True}],
)
def test_the_log_walks_by_cursor(api: Api, activity: list[dict[str, Any]], filters: dict[str, Any]) -> None:
    filters = dict(filters)  # the parameter's dict is shared by both databases' runs
    if filters.pop("subject", False):
        filters["subject_id"] = activity[0]["id"]
    paged = api.get("/client/events", per_page=100, **filters).json()["data"]["data"]
    assert paged
    for limit in (1, 2):
        assert walk_cursor(api, "/client/events", limit=limit, **filters) == paged


def test_the_log_in_a_time_window(api: Api, activity: list[dict[str, Any]]) -> None:
    events = api.get("/client/events", per_page=100).json()["data"]["data"]
    window = {"since": events[-2]["created_at"], "until": events[0]["created_at"]}
    paged = api.get("/client/events", per_page=100, **window).json()["data"]["data"]
    assert walk_cursor(api, "/client/events", limit=2, **window) == paged == events[1:-1]
