"""The tenant walk of /scim/v2: every SCIM operation with an id in its path, called with another
company's scim token on a company's record, answers the 404 an unknown id gets, and changes nothing
the company sees. New SCIM operations with a path id fail the walk until they are listed here.
Ids of another company inside bodies and filters are unknown ids too."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import Mount

from outfitter.scim.router import router
from tests.scim.conftest import ENTERPRISE_URN, GROUP_URN, PATCH_URN, Scim, assert_scim_error, user_body

SCIM = "/scim/v2"
# How each operation is called (a body the owner may send with success on its own record).
BODIES: dict[tuple[str, str], Any] = {
    ("GET", "/Users/{user_id}"): None,
    ("PUT", "/Users/{user_id}"): user_body("mallory@evil.example", title="Intruder"),
    ("PATCH", "/Users/{user_id}"): {
        "schemas": [PATCH_URN],
        "Operations": [{"op": "replace", "value": {"active": False, "title": "Intruder"}}],
    },
    ("DELETE", "/Users/{user_id}"): None,
    ("GET", "/Groups/{group_id}"): None,
    ("PUT", "/Groups/{group_id}"): {"schemas": [GROUP_URN], "displayName": "Pwned", "members": []},
    ("PATCH", "/Groups/{group_id}"): {
        "schemas": [PATCH_URN],
        "Operations": [{"op": "replace", "path": "displayName", "value": "Pwned"}],
    },
    ("DELETE", "/Groups/{group_id}"): None,
}
# Operations whose path id names no company's record.
NOT_COMPANY_OWNED = {("GET", "/ResourceTypes/{type_id}"), ("GET", "/Schemas/{schema_id}")}


def _scim_routes(app: FastAPI) -> set[tuple[str, str]]:
    """The operations with a path id of the SCIM router the app mounts at /scim/v2."""
    assert any(isinstance(route, Mount) and route.path == SCIM for route in app.routes)
    return {
        (method, route.path)
        for route in router.routes
        if isinstance(route, APIRoute) and "{" in route.path
        for method in route.methods
    }


def _snapshot(scim: Scim, user_id: str, group_id: str) -> list[Any]:
    return [
        scim.get("/Users").json(),
        scim.get("/Groups").json(),
        scim.get(f"/Users/{user_id}").json(),
        scim.get(f"/Groups/{group_id}").json(),
    ]


def test_every_scim_path_id_is_walled_off(app: FastAPI, scim: Scim, other_scim: Scim) -> None:
    routes = _scim_routes(app)
    assert routes - NOT_COMPANY_OWNED == set(BODIES), "list every new SCIM operation with a path id in BODIES"
    user = scim.post("/Users", user_body("ada@acme.example")).json()
    eng = {"schemas": [GROUP_URN], "displayName": "Eng", "members": [{"value": user["id"]}]}
    group = scim.post("/Groups", eng)
    ids = {"user_id": user["id"], "group_id": group.json()["id"]}
    before = _snapshot(scim, ids["user_id"], ids["group_id"])

    for (method, template), body in BODIES.items():
        foreign = other_scim.request(method, template.format(**ids), body)
        unknown = other_scim.request(method, template.format(**dict.fromkeys(ids, str(uuid.uuid4()))), body)
        assert_scim_error(foreign, 404)
        assert foreign.json() == unknown.json(), (method, template)

    assert _snapshot(scim, ids["user_id"], ids["group_id"]) == before
    # the owner may send each body with success
    for (method, template), body in BODIES.items():
        response = scim.request(method, template.format(**ids), body)
        assert response.status_code in (200, 204), (method, template, response.text)


@pytest.mark.parametrize("attribute", ["id", "externalId", "userName"])
def test_filters_never_find_another_companys_users(scim: Scim, other_scim: Scim, attribute: str) -> None:
    theirs = other_scim.post("/Users", user_body("ada@acme.example", externalId="00u1")).json()
    value = {"id": theirs["id"], "externalId": "00u1", "userName": "ada@acme.example"}[attribute]
    assert scim.get("/Users", filter=f'{attribute} eq "{value}"').json()["totalResults"] == 0
    # and the same userName and externalId are free in this company
    assert scim.post("/Users", user_body("ada@acme.example", externalId="00u1")).status_code == 201


def test_another_companys_user_is_no_member_and_no_manager(scim: Scim, other_scim: Scim) -> None:
    theirs = other_scim.post("/Users", user_body("eve@globex.example")).json()
    group = {"schemas": [GROUP_URN], "displayName": "Eng", "members": [{"value": theirs["id"]}]}
    assert_scim_error(scim.post("/Groups", group), 400, "invalidValue")
    body = user_body("ada@acme.example")
    body[ENTERPRISE_URN] = {"manager": {"value": theirs["id"]}}
    assert_scim_error(scim.post("/Users", body), 400, "invalidValue")
    assert scim.get("/Groups").json()["totalResults"] == 0
    assert scim.get("/Users").json()["totalResults"] == 0
