"""The console's locations through HTTP: the tree shows each location's device counts (there and
beneath) as the API answers them, a location's page lists the devices at it and beneath it, the
forms create, move and delete through the API's rules (a cycle or a delete with devices refused,
nothing changed), viewers only read, and another company's location is 404."""

from __future__ import annotations

import re

from fastapi import FastAPI
from sqlalchemy import Engine

from tests.console.conftest import sign_up
from tests.equipment.helpers import register
from tests.factories import Api
from tests.locations.helpers import create_location, get_location

LOCATION_URL = re.compile(r"/console/locations/([0-9a-f-]{36})\?saved=created")


def test_the_tree_and_a_location_page_show_the_apis_counts_and_devices(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    lagos = create_location(api, "Lagos", kind="Site")
    room = create_location(api, "Room 7", create_location(api, "Office", lagos))
    register(api, title="Room laptop", location_id=room["id"])
    register(api, title="Stored phone", location_id=room["id"], status="In_Storage")
    register(api, title="Elsewhere")
    ada = sign_up(app, engine, api.company_id, "ada@example.com")

    tree = ada.get("/locations")
    assert tree.status_code == 200, tree.text
    row = re.search(rf'<tr data-location="{lagos["id"]}">(.*?)</tr>', tree.text, re.S)
    assert row is not None
    assert '<td class="count-here">0</td>' in row.group(
        1
    ) and '<td class="count-beneath">2</td>' in row.group(1)
    assert tree.text.index(">Lagos<") < tree.text.index(">Office<") < tree.text.index(">Room 7<")

    page = ada.get(f"/locations/{lagos['id']}")
    assert page.status_code == 200, page.text
    assert 'Devices here and beneath <span class="muted">(2)</span>' in page.text
    assert "Room laptop" in page.text and "Stored phone" in page.text and "Elsewhere" not in page.text


def test_the_forms_create_move_and_delete_with_the_apis_rules(
    app: FastAPI, engine: Engine, api: Api, other_api: Api
) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    token = ada.csrf("/locations")
    base = {"csrf_token": token, "kind": "Site", "address": "", "country": "NG"}
    created = ada.post("/locations", {**base, "name": "Lagos", "parent": ""})
    assert created.status_code == 303, created.text
    found = LOCATION_URL.search(created.headers["location"])
    assert found
    lagos_id = found.group(1)
    office = ada.post("/locations", {**base, "name": "Office", "kind": "Office", "parent": lagos_id})
    office_id = LOCATION_URL.search(office.headers["location"]).group(1)  # type: ignore[union-attr]
    assert get_location(api, {"id": office_id})["ancestors"] == [{"id": lagos_id, "name": "Lagos"}]

    # Beneath itself: the API's 422 beside the field, nothing moved.
    cycle = ada.post(f"/locations/{lagos_id}", {**base, "name": "Lagos", "parent": office_id})
    assert cycle.status_code == 422 and "cannot move beneath itself" in cycle.text
    assert get_location(api, {"id": lagos_id})["parent_id"] is None

    register(api, title="Desk phone", location_id=office_id)
    refused = ada.post(f"/locations/{office_id}/delete", {"csrf_token": token})
    assert refused.status_code == 409 and "holds 1 device here" in refused.text
    events = api.get("/client/events", type="location.*").json()["data"]["data"]
    assert [(event["type"], event["actor"]) for event in events] == [
        ("location.created", "console:ada@example.com"),
        ("location.created", "console:ada@example.com"),
    ]

    activity = ada.get("/activity")
    assert "created location" in activity.text and f'href="/console/locations/{lagos_id}"' in activity.text

    viewer = sign_up(app, engine, api.company_id, "vic@example.com", role="viewer")
    refused = viewer.post("/locations", {"csrf_token": viewer.csrf("/locations"), "name": "X"})
    assert refused.status_code == 403 and "Only an admin can change locations." in refused.text
    other = sign_up(app, engine, other_api.company_id, "eve@example.com")
    assert other.get(f"/locations/{lagos_id}").status_code == 404
