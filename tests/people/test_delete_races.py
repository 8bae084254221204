"""An employee's DELETE racing, for real on PostgreSQL through a served instance, the writes that
reference the employee: one of the two wins cleanly, every time. Either the write commits first and
the DELETE answers 409 (the employee holds the device) or removes them from the department; or the
DELETE commits first and the write answers 422, the employee unknown. Never both a success and a
device Assigned to no one, never a 500, never a 409 that blames the department's name.

Each once went wrong (a black-box probe, 10 to 23 rounds of 30): the DELETE counted the employee's
devices without holding the employee, and the foreign key's ON DELETE SET NULL emptied the assignee
of a device assigned meanwhile; the key's own violation was a 500."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.factories import Api
from tests.payments.conftest import LiveServer, live_server
from tests.people.helpers import employee_body

__all__ = ["live_server"]

ROUNDS = 12
UNKNOWN = "Unknown employee: give the id of one of your employees."
pytestmark = pytest.mark.usefixtures("postgres_only")


def _race(
    live_server: LiveServer, api: Api, write: Callable[[httpx.Client], httpx.Response], employee: str
) -> tuple[httpx.Response, httpx.Response]:
    """(the write's answer, the DELETE's), both sent at once."""
    start = threading.Barrier(2)

    def send(which: int) -> httpx.Response:
        with live_server.api(api.token) as http:
            start.wait()
            return write(http) if which == 0 else http.delete(f"/client/employees/{employee}")

    with ThreadPoolExecutor(2) as pool:
        written, deleted = pool.map(send, range(2))
    return written, deleted


def _employee(http: httpx.Client) -> str:
    created = http.post("/client/employees", json=employee_body())
    assert created.status_code == 201, created.text
    return str(created.json()["data"]["id"])


def _device(http: httpx.Client) -> str:
    created = http.post("/client/equipment", json={"title": "Laptop", "serial_number": uuid.uuid4().hex})
    assert created.status_code == 201, created.text
    return str(created.json()["data"]["id"])


WRITTEN = {"patch": 200, "bulk-move": 200, "create": 201}  # each write's status when it wins


@pytest.mark.parametrize("how", list(WRITTEN))
def test_an_assignment_and_the_assignees_delete_never_both_succeed(
    live_server: LiveServer, api: Api, how: str
) -> None:
    outcomes: set[tuple[int, int]] = set()
    with live_server.api(api.token) as http:
        for _ in range(ROUNDS):
            employee, device = _employee(http), _device(http)
            assign = {"status": "Assigned", "assignee_id": employee}
            writes: dict[str, Callable[[httpx.Client], httpx.Response]] = {
                "patch": lambda client, device=device, assign=assign: client.patch(
                    f"/client/equipment/{device}", json=assign
                ),
                "bulk-move": lambda client, device=device, assign=assign: client.post(
                    "/client/equipment/bulk-move", json={"equipment_ids": [device], **assign}
                ),
                "create": lambda client, assign=assign: client.post(
                    "/client/equipment", json={"title": "New laptop", **assign}
                ),
            }
            written, deleted = _race(live_server, api, writes[how], employee)
            outcomes.add((written.status_code, deleted.status_code))
            if deleted.status_code == 200:  # the DELETE won: the write found no such employee
                assert written.status_code == 422, written.text
                assert UNKNOWN in written.text
            else:  # the write won: the employee holds the device
                assert written.status_code == WRITTEN[how], written.text
                assert deleted.status_code == 409 and "still holds 1 Assigned" in deleted.text
                assigned = written.json()["data"]
                assigned = assigned[0] if isinstance(assigned, list) else assigned
                shown = http.get(f"/client/equipment/{assigned['id']}").json()["data"]
                assert shown["status"] == "Assigned" and shown["assignee"]["id"] == employee
        assigned_now = http.get("/client/equipment", params={"status": "Assigned", "per_page": 100})
        orphans = assigned_now.json()["data"]["data"]
        assert [device["id"] for device in orphans if device["assignee"] is None] == []
    assert outcomes <= {(200, 409), (201, 409), (422, 200)}, outcomes


def test_department_writes_and_a_patch_racing_the_delete_answer_404_or_422(
    live_server: LiveServer, api: Api
) -> None:
    with live_server.api(api.token) as http:
        department = http.post("/client/departments", json={"name": "Ops"}).json()["data"]["id"]
        for round_ in range(ROUNDS):
            # (the write, given the employee's id; the answers it may give)
            writes: list[tuple[Callable[[httpx.Client, str], httpx.Response], set[int]]] = [
                (
                    lambda client, employee: client.patch(
                        f"/client/departments/{department}", json={"member_ids": [employee]}
                    ),
                    {200, 422},
                ),
                (
                    lambda client, employee, name=f"Headed {round_}": client.post(
                        "/client/departments", json={"name": name, "head_id": employee}
                    ),
                    {201, 422},
                ),
                (
                    lambda client, employee: client.patch(
                        f"/client/employees/{employee}", json={"job_title": "Lead"}
                    ),
                    {200, 404},
                ),
            ]
            for write, allowed in writes:
                employee = _employee(http)
                written, deleted = _race(
                    live_server,
                    api,
                    lambda client, write=write, employee=employee: write(client, employee),
                    employee,
                )
                assert written.status_code in allowed, written.text
                assert deleted.status_code == 200, deleted.text
                if written.status_code == 422:
                    assert UNKNOWN in written.text
        members: list[Any] = http.get(f"/client/departments/{department}").json()["data"]["members"]
        for member in members:
            assert http.get(f"/client/employees/{member['id']}").status_code == 200


def test_writes_naming_the_same_employees_at_once_all_succeed(live_server: LiveServer, api: Api) -> None:
    """Writes that reference employees hold them FOR KEY SHARE, a lock that does not conflict with
    itself: they run side by side. It was FOR NO KEY UPDATE (SQLAlchemy's `key_share=True` alone),
    which made them queue and, crossing in two orders, deadlock (a black-box probe: 181 of 240
    department PATCHes answered 503)."""
    with live_server.api(api.token) as http:
        people = [_employee(http) for _ in range(4)]
        departments = [
            http.post("/client/departments", json={"name": f"Team {n}"}).json()["data"]["id"]
            for n in range(4)
        ]

    def patch(round_: int) -> list[int]:
        with live_server.api(api.token) as client:
            statuses = []
            for step in range(6):
                head = people[(round_ + step) % 4]
                members = [people[(round_ + step + shift) % 4] for shift in (1, 2, 3)][
                    :: 1 if step % 2 else -1
                ]
                department = departments[(round_ * 3 + step) % 4]
                answer = client.patch(
                    f"/client/departments/{department}", json={"head_id": head, "member_ids": members}
                )
                statuses.append(answer.status_code if answer.status_code == 200 else answer.text)
            return statuses

    with ThreadPoolExecutor(8) as pool:
        outcomes = [status for statuses in pool.map(patch, range(8)) for status in statuses]
    assert outcomes == [200] * 48, [outcome for outcome in outcomes if outcome != 200][:3]
