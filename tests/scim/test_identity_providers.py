"""The request sequences Okta and Microsoft Entra ID document for provisioning, replayed as they
send them (their quirks included), with the resulting state read back through the REST API.

Okta: developer.okta.com/docs/api/openapi/okta-scim/guides/scim-20 ("SCIM 2.0 protocol reference");
its `okta.local` addresses become `okta.example.com`: `.local` is reserved, no validator accepts it.
Entra: learn.microsoft.com/entra/identity/app-provisioning/use-scim-to-provision-users-and-groups
("Request and response examples")."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from outfitter.scim.settings import change_settings
from tests.factories import Api
from tests.scim.conftest import ENTERPRISE_URN, GROUP_URN, USER_URN, Scim

PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
OKTA_USER = "test.user@okta.example.com"


@pytest.fixture
def default_country_ng(engine: Engine, api: Api) -> None:
    """Neither IdP sends an address by default: the company names the country of its people."""
    with Session(engine) as session, session.begin():
        change_settings(session, api.company_id, default_country="NG")


def _ok(response: Any, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json() if response.content else {}
    return body


def _patch(scim: Scim, path: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
    return _ok(scim.request("PATCH", path, {"schemas": [PATCH], "Operations": operations}))


def _employee(api: Api, employee_id: str) -> dict[str, Any]:
    body: dict[str, Any] = api.get(f"/client/employees/{employee_id}").json()["data"]
    return body


def _member_ids(api: Api, department_id: str) -> list[str]:
    department = api.get(f"/client/departments/{department_id}").json()["data"]
    return [member["id"] for member in department["members"]]


@pytest.mark.usefixtures("default_country_ng")
def test_okta_provisioning_sequence(scim: Scim, api: Api) -> None:
    # Okta looks the user up first, then creates it (with its password and groups attributes)
    by_user_name = f'userName eq "{OKTA_USER}"'
    lookup = _ok(scim.get("/Users", filter=by_user_name, startIndex="1", count="100"))
    assert lookup["totalResults"] == 0 and lookup["Resources"] == []
    user = _ok(
        scim.post(
            "/Users",
            {
                "schemas": [USER_URN],
                "userName": OKTA_USER,
                "name": {"givenName": "Test", "familyName": "User"},
                "emails": [{"primary": True, "value": OKTA_USER, "type": "work"}],
                "displayName": "Test User",
                "locale": "en-US",
                "externalId": "00ujl29u0le5T6Aj10h7",
                "groups": [],
                "password": "1mz050nq",
                "active": True,
            },
        ),
        201,
    )
    user_id = user["id"]
    assert _ok(scim.get(f"/Users/{user_id}"))["userName"] == OKTA_USER
    employee = _employee(api, user_id)
    assert (employee["email"], employee["first_name"], employee["country_code"]) == (
        OKTA_USER,
        "Test",
        "NG",
    )

    # profile update: Okta PUTs the whole user
    put = {
        "schemas": [USER_URN],
        "id": user_id,
        "userName": OKTA_USER,
        "name": {"givenName": "Another", "middleName": "", "familyName": "User"},
        "emails": [{"primary": True, "value": OKTA_USER, "type": "work"}],
        "displayName": "Another User",
        "locale": "en-US",
        "externalId": "00ujl29u0le5T6Aj10h7",
        "groups": [],
        "active": True,
        "meta": {"resourceType": "User"},
    }
    assert _ok(scim.put(f"/Users/{user_id}", put))["name"]["givenName"] == "Another"
    assert _employee(api, user_id)["first_name"] == "Another"

    # group push: create, rename (with the id in the value), add and remove members
    new_group = {"schemas": [GROUP_URN], "displayName": "Test SCIMv2", "members": []}
    group = _ok(scim.post("/Groups", new_group), 201)
    group_id = group["id"]
    renamed = _patch(
        scim,
        f"/Groups/{group_id}",
        [{"op": "replace", "value": {"id": group_id, "displayName": "Test SCIMv2 renamed"}}],
    )
    assert renamed["displayName"] == "Test SCIMv2 renamed"
    added = _patch(
        scim,
        f"/Groups/{group_id}",
        [{"op": "add", "path": "members", "value": [{"value": user_id, "display": "Test User"}]}],
    )
    assert [member["value"] for member in added["members"]] == [user_id]
    department = api.get(f"/client/departments/{group_id}").json()["data"]
    assert (department["name"], department["member_count"]) == ("Test SCIMv2 renamed", 1)
    assert _member_ids(api, group_id) == [user_id]
    _patch(scim, f"/Groups/{group_id}", [{"op": "remove", "path": f'members[value eq "{user_id}"]'}])
    assert _member_ids(api, group_id) == []

    # deactivation: a path-less replace
    deactivated = _patch(scim, f"/Users/{user_id}", [{"op": "replace", "value": {"active": False}}])
    assert deactivated["active"] is False
    assert _employee(api, user_id)["status"] == "Offboarded"
    assert _ok(scim.get("/Users", filter=by_user_name))["Resources"][0]["active"] is False

    _ok(scim.delete(f"/Groups/{group_id}"), 204)
    assert api.get(f"/client/departments/{group_id}").status_code == 404
    events = [event["type"] for event in api.get("/client/events", per_page=50).json()["data"]["data"]]
    assert events == [
        "department.deleted",
        "employee.offboarded",
        "department.updated",  # member removed
        "department.updated",  # member added
        "department.updated",  # renamed
        "department.created",
        "employee.updated",
        "employee.created",
    ]


@pytest.mark.usefixtures("default_country_ng")
def test_entra_provisioning_sequence(scim: Scim, api: Api) -> None:
    user_name = "Test_User_ab6490ee-1e48-479e-a20b-2d77186b5dd1"
    assert _ok(scim.get("/Users", filter=f'userName eq "{user_name}"'))["totalResults"] == 0
    user = _ok(
        scim.post(
            "/Users",
            {
                "schemas": [USER_URN, ENTERPRISE_URN],
                "externalId": "0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef",
                "userName": user_name,
                "active": True,
                "emails": [
                    {
                        "primary": True,
                        "type": "work",
                        "value": "Test_User_fd0ea19b-0777-472c-9f96-4f70d2226f2e@testuser.com",
                    }
                ],
                "meta": {"resourceType": "User"},
                "name": {
                    "formatted": "givenName familyName",
                    "familyName": "familyName",
                    "givenName": "givenName",
                },
                "roles": [],
            },
        ),
        201,
    )
    user_id = user["id"]
    found = _ok(scim.get("/Users", filter=f'userName eq "{user_name}"'))
    assert [item["id"] for item in found["Resources"]] == [user_id]
    assert _employee(api, user_id)["email"] == "test_user_fd0ea19b-0777-472c-9f96-4f70d2226f2e@testuser.com"

    # attribute updates: Entra's capitalised ops, a value-path on emails, a typed address that
    # does not exist yet, the department and the manager of the enterprise extension
    boss = _ok(
        scim.post(
            "/Users",
            {
                "schemas": [USER_URN],
                "externalId": "b055",
                "userName": "boss@testuser.com",
                "active": True,
                "name": {"familyName": "Boss", "givenName": "Big"},
            },
        ),
        201,
    )
    updated = _patch(
        scim,
        f"/Users/{user_id}",
        [
            {"op": "Replace", "path": 'emails[type eq "work"].value', "value": "updatedEmail@microsoft.com"},
            {"op": "Replace", "path": "name.familyName", "value": "updatedFamilyName"},
            {"op": "Add", "path": 'addresses[type eq "work"].country', "value": "KE"},
            {"op": "Add", "path": f"{ENTERPRISE_URN}:department", "value": "Engineering"},
            {"op": "Add", "path": f"{ENTERPRISE_URN}:manager", "value": boss["id"]},
        ],
    )
    assert updated["emails"] == [{"value": "updatedemail@microsoft.com"}]
    assert updated[ENTERPRISE_URN]["manager"]["value"] == boss["id"]
    employee = _employee(api, user_id)
    assert (employee["email"], employee["last_name"], employee["country_code"]) == (
        "updatedemail@microsoft.com",
        "updatedFamilyName",
        "KE",
    )

    # groups: Entra's own schema URN beside the Group's, then membership add / remove by value list
    group = _ok(
        scim.post(
            "/Groups",
            {
                "schemas": [
                    GROUP_URN,
                    "http://schemas.microsoft.com/2006/11/ResourceManagement/ADSCIM/Group",
                ],
                "externalId": "8aa1a0c0-c4c3-4bc0-b4a5-2ef676900159",
                "displayName": "displayName",
                "meta": {"resourceType": "Group"},
            },
        ),
        201,
    )
    group_id = group["id"]
    lookup = _ok(scim.get("/Groups", excludedAttributes="members", filter='displayName eq "displayName"'))
    assert [item["id"] for item in lookup["Resources"]] == [group_id]
    member = [{"$ref": None, "value": user_id}]
    _patch(scim, f"/Groups/{group_id}", [{"op": "Add", "path": "members", "value": member}])
    assert _member_ids(api, group_id) == [user_id]
    members_filter = f'id eq "{group_id}" and members[value eq "{user_id}"]'
    assert _ok(scim.get("/Groups", filter=members_filter, excludedAttributes="members"))["totalResults"] == 1
    _patch(scim, f"/Groups/{group_id}", [{"op": "Remove", "path": "members", "value": member}])
    assert _member_ids(api, group_id) == []
    renamed = _patch(
        scim, f"/Groups/{group_id}", [{"op": "Replace", "path": "displayName", "value": "updatedDisplayName"}]
    )
    assert renamed["displayName"] == "updatedDisplayName"

    # disable: Entra sends the boolean as a string
    disabled = _patch(scim, f"/Users/{user_id}", [{"op": "Replace", "path": "active", "value": "False"}])
    assert disabled["active"] is False
    assert _employee(api, user_id)["status"] == "Offboarded"
    # re-enable, then delete: offboarded again, and gone from SCIM
    assert _patch(scim, f"/Users/{user_id}", [{"op": "Replace", "path": "active", "value": "True"}])["active"]
    assert _employee(api, user_id)["status"] == "Active"
    _ok(scim.delete(f"/Users/{user_id}"), 204)
    assert scim.get(f"/Users/{user_id}").status_code == 404
    assert _employee(api, user_id)["status"] == "Offboarded"
    _ok(scim.delete(f"/Groups/{group_id}"), 204)
