"""A PATCH's cost is bounded by the request, not by the Group it meets: it costs what its
operations name (counted here by the copies of members made), takes at most MAX_OPERATIONS of
them, and locks the Group's row only for the write."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from scim2_models import GroupMember

from outfitter.scim.patching import MAX_OPERATIONS
from tests.factories import Api, counting_statements
from tests.people.helpers import employee_body
from tests.scim.conftest import GROUP_URN, Scim, assert_scim_error

MEMBERS = 300


def _employees(api: Api, count: int) -> list[str]:
    response = api.post("/client/employees/bulk", {"employees": [employee_body() for _ in range(count)]})
    assert response.status_code == 201, response.text
    return [employee["id"] for employee in response.json()["data"]]


@pytest.fixture
def copies(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a Group's member is copied (scim2-models copies the whole Group for each
    PatchOp it applies: the cost that grew with the Group's size times the operations)."""
    made = [0]
    deepcopy = GroupMember.__deepcopy__

    def counted(self: GroupMember, memo: dict[int, Any] | None = None) -> GroupMember:
        made[0] += 1
        return deepcopy(self, memo)

    monkeypatch.setattr(GroupMember, "__deepcopy__", counted)
    return made


def test_a_group_patch_costs_what_its_operations_name(
    scim: Scim, api: Api, app: FastAPI, copies: list[int]
) -> None:
    members = _employees(api, MEMBERS)
    created = scim.post(
        "/Groups", {"schemas": [GROUP_URN], "displayName": "Big", "members": [{"value": m} for m in members]}
    )
    assert created.status_code == 201, created.text
    group = created.json()["id"]
    removed, added = members[: MAX_OPERATIONS - 3], _employees(api, 1)[0]
    operations: list[dict[str, Any]] = [
        {"op": "replace", "path": "displayName", "value": "Bigger"},
        *({"op": "remove", "path": f'members[value eq "{member}"]'} for member in removed),
        {"op": "add", "path": "members", "value": [{"value": added}]},
        {"op": "Remove", "path": "members", "value": [{"value": members[-1]}]},  # as Entra sends it
    ]
    assert len(operations) == MAX_OPERATIONS
    copies[0] = 0
    with counting_statements(app) as statements:
        patched = scim.patch(f"/Groups/{group}", operations)
    assert patched.status_code == 200, patched.text
    kept = set(members) - set(removed) - {members[-1]}
    assert {member["value"] for member in patched.json()["members"]} == kept | {added}
    assert patched.json()["displayName"] == "Bigger"
    # none of the Group's members was copied per operation (it was MEMBERS per operation and more)
    assert copies[0] <= MEMBERS, copies[0]
    department = api.get(f"/client/departments/{group}").json()["data"]
    assert (department["name"], department["member_count"]) == ("Bigger", len(kept) + 1)
    # the work is done on the Group as read; its row is locked after, for the write (PostgreSQL)
    read = next(number for number, sql in enumerate(statements) if "FROM user_departments" in sql)
    locks = [number for number, sql in enumerate(statements) if "FOR UPDATE" in sql]
    assert all(number > read for number in locks)


def test_a_patch_takes_at_most_max_operations(scim: Scim, api: Api) -> None:
    member = _employees(api, 1)[0]
    group = scim.post("/Groups", {"schemas": [GROUP_URN], "displayName": "Ops"}).json()
    events = api.get("/client/events").json()["data"]["total"]
    many = [{"op": "add", "path": "members", "value": [{"value": member}]}] * (MAX_OPERATIONS + 1)
    for path in (f"/Groups/{group['id']}", f"/Users/{member}"):
        refused = assert_scim_error(scim.patch(path, many), 400, "invalidValue")
        assert refused["detail"] == (
            f"A PATCH takes at most {MAX_OPERATIONS} operations; this one has {MAX_OPERATIONS + 1}: "
            "send them in several requests."
        )
    assert "members" not in scim.get(f"/Groups/{group['id']}").json()
    assert api.get("/client/events").json()["data"]["total"] == events
    accepted = scim.patch(f"/Groups/{group['id']}", many[:MAX_OPERATIONS])
    assert accepted.status_code == 200, accepted.text
    assert [item["value"] for item in accepted.json()["members"]] == [member]
