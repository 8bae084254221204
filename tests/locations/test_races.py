"""Location writes racing, for real on PostgreSQL through a served instance: two moves that would
each put one location beneath the other (one wins, the other is refused as a cycle: the tree never
loops), and a device checked out to a location while the location is deleted (the delete is
refused with 409, or the device write with 422: never a device at a deleted location)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.factories import Api
from tests.payments.conftest import LiveServer, live_server

__all__ = ["live_server"]

ROUNDS = 6
pytestmark = pytest.mark.usefixtures("postgres_only")


Call = tuple[str, str, dict[str, Any] | None]  # method, path, JSON body


def _at_once(live_server: LiveServer, api: Api, calls: list[Call]) -> list[httpx.Response]:
    start = threading.Barrier(len(calls))

    def send(index: int) -> httpx.Response:
        method, path, body = calls[index]
        with live_server.api(api.token) as http:
            start.wait()
            return http.request(method, path, json=body)

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(send, range(len(calls))))


def _create(http: httpx.Client, name: str, parent: str | None = None) -> str:
    created = http.post("/client/locations", json={"name": name, "parent_id": parent})
    assert created.status_code == 201, created.text
    return str(created.json()["data"]["id"])


def test_two_crossing_moves_never_make_a_loop(live_server: LiveServer, api: Api) -> None:
    with live_server.api(api.token) as http:
        for round_ in range(ROUNDS):
            first = _create(http, f"A{round_}")
            second = _create(http, f"B{round_}")
            # Each under a child of the other: no lock in common but through the ancestors.
            under_first = _create(http, "inside", first)
            under_second = _create(http, "inside", second)
            answers = _at_once(
                live_server,
                api,
                [
                    ("PATCH", f"/client/locations/{first}", {"parent_id": under_second}),
                    ("PATCH", f"/client/locations/{second}", {"parent_id": under_first}),
                ],
            )
            assert sorted(answer.status_code for answer in answers) == [200, 422], [a.text for a in answers]
            refused = next(answer for answer in answers if answer.status_code == 422)
            assert "beneath itself" in refused.text
            for location in (first, second, under_first, under_second):
                record = http.get(f"/client/locations/{location}").json()["data"]
                ids = [ancestor["id"] for ancestor in record["ancestors"]]
                assert location not in ids and len(ids) == len(set(ids)) and len(ids) < 4, record


def test_a_device_put_at_a_location_being_deleted_never_lands_there(
    live_server: LiveServer, api: Api
) -> None:
    with live_server.api(api.token) as http:
        for round_ in range(ROUNDS):
            location = _create(http, f"Room {round_}")
            device = http.post("/client/equipment", json={"title": f"Laptop {round_}"}).json()["data"]["id"]
            moved, deleted = _at_once(
                live_server,
                api,
                [
                    ("PATCH", f"/client/equipment/{device}", {"location_id": location}),
                    ("DELETE", f"/client/locations/{location}", None),
                ],
            )
            statuses = (moved.status_code, deleted.status_code)
            assert statuses in ((200, 409), (422, 200)), (moved.text, deleted.text)
            at = http.get(f"/client/equipment/{device}").json()["data"]["location_id"]
            assert at == (location if statuses == (200, 409) else None)
