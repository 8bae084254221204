"""Devices and locations through HTTP: the two locations in every write, the moves in the history
and as `equipment.moved` events, the list filters that take everything beneath a location, the
counts by status there and beneath, the delete refused while devices are there, storage landing in
a location, and the CSV columns."""

from __future__ import annotations

import csv
import io
import uuid
from typing import Any

import httpx
from sqlalchemy.orm import Session

from tests.equipment.helpers import register
from tests.factories import Api, assert_error, walk_cursor
from tests.locations.helpers import counts, create_location, get_location
from tests.payments.conftest import add_assigned_device, add_credit, add_employee
from tests.payments.test_offboard import INITIATE, offboard_body
from tests.people.helpers import create_employee


def device(api: Api, record: dict[str, Any]) -> dict[str, Any]:
    response = api.get(f"/client/equipment/{record['id']}")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def moves(record: dict[str, Any]) -> list[tuple[str | None, str | None]]:
    """The `moved` entries of a device's history: (from, to) location names."""

    def name(place: dict[str, str] | None) -> str | None:
        return place["name"] if place else None

    return [
        (name(entry["payload"]["from_location"]), name(entry["payload"]["to_location"]))
        for entry in record["history"]
        if entry["event_type"] == "moved"
    ]


def listed(api: Api, **params: Any) -> list[str]:
    response = api.get("/client/equipment", per_page=100, **params)
    assert response.status_code == 200, response.text
    return sorted(record["title"] for record in response.json()["data"]["data"])


def test_every_write_carries_the_locations_and_the_history_records_each_move(api: Api) -> None:
    office = create_location(api, "Lagos office", kind="Office")
    room = create_location(api, "Room 7", office, kind="Room")
    warehouse = create_location(api, "Warehouse", kind="Warehouse", is_default_storage=True)
    laptop = register(api, title="Laptop", location_id=room["id"], home_location_id=office["id"])
    assert (laptop["location_id"], laptop["home_location_id"]) == (room["id"], office["id"])

    # Put in storage with nothing said: the default storage location, whatever its home.
    stored = register(api, title="Stored", status="In_Storage")
    assert stored["location_id"] == warehouse["id"]
    stored_home = register(api, title="Stored home", status="In_Storage", home_location_id=office["id"])
    assert stored_home["location_id"] == warehouse["id"]

    # Checked out to another location: a `moved` entry and an equipment.moved event.
    moved = api.patch(f"/client/equipment/{laptop['id']}", {"location_id": office["id"]})
    assert moved.status_code == 200, moved.text
    assert moved.json()["data"]["location_id"] == office["id"]
    events = api.get("/client/events", type="equipment.moved").json()["data"]["data"]
    assert [(event["subject_id"], event["data"]["location_id"]) for event in events] == [
        (laptop["id"], office["id"])
    ]

    # Assigned to an employee: with them, at no location; returned to storage: the warehouse.
    employee = create_employee(api)
    assigned = api.patch(f"/client/equipment/{laptop['id']}", {"assignee_id": employee["id"]})
    assert assigned.json()["data"]["location_id"] is None
    assert_error(api.patch(f"/client/equipment/{laptop['id']}", {"location_id": room["id"]}), 409, "Assigned")
    returned = api.patch(f"/client/equipment/{laptop['id']}", {"status": "In_Storage"})
    assert returned.json()["data"]["location_id"] == warehouse["id"]
    checked_in = api.patch(
        f"/client/equipment/{laptop['id']}", {"status": "Unassigned", "location_id": room["id"]}
    )
    assert checked_in.json()["data"]["location_id"] == room["id"]
    record = device(api, laptop)
    assert moves(record) == [
        ("Room 7", "Lagos office"),
        ("Lagos office", None),
        (None, "Warehouse"),
        ("Warehouse", "Room 7"),
    ]
    assert [entry["event_type"] for entry in record["history"]][-4:] == [
        "moved_to_storage",
        "moved",
        "unassigned",
        "moved",
    ]
    assert len(api.get("/client/events", type="equipment.moved").json()["data"]["data"]) == 4

    # Archived: it has left, and its place with it (the home stays, for the record).
    archived = api.delete(f"/client/equipment/{laptop['id']}")
    assert archived.json()["data"]["location_id"] is None
    assert archived.json()["data"]["home_location_id"] == office["id"]


def test_bad_locations_are_422_and_change_nothing(api: Api, other_api: Api) -> None:
    mine = create_location(api, "Lagos")
    theirs = create_location(other_api, "Globex HQ")
    assert_error(
        api.post("/client/equipment", {"title": "X", "location_id": theirs["id"]}), 422, "location_id"
    )
    assert_error(api.post("/client/equipment", {"title": "X", "home_location_id": str(uuid.uuid4())}), 422)
    employee = create_employee(api)
    assigned = {"title": "X", "status": "Assigned", "assignee_id": employee["id"], "location_id": mine["id"]}
    assert_error(api.post("/client/equipment", assigned), 422, "location_id")
    laptop = register(api, location_id=mine["id"])
    assert_error(api.patch(f"/client/equipment/{laptop['id']}", {"location_id": theirs["id"]}), 422)
    assert_error(
        api.patch(f"/client/equipment/{laptop['id']}", {"status": "Sold", "location_id": mine["id"]}), 422
    )
    assert device(api, laptop)["location_id"] == mine["id"]
    assert_error(api.get("/client/equipment", location_id=theirs["id"]), 422, "location_id")
    bulk = api.post(
        "/client/equipment/bulk",
        {
            "equipment": [
                {"title": "A", "location_id": mine["id"]},
                {"title": "B", "location_id": theirs["id"]},
            ]
        },
    )
    assert_error(bulk, 422)
    assert bulk.json()["errors"] == {"equipment.1.location_id": ["No location with this id in this company."]}


def test_filters_and_counts_take_everything_beneath_a_location(api: Api) -> None:
    lagos = create_location(api, "Lagos", kind="Site")
    office = create_location(api, "Office", lagos)
    room = create_location(api, "Room 7", office)
    abuja = create_location(api, "Abuja", kind="Site")
    for title, place, status in (
        ("Room laptop", room, "Unassigned"),
        ("Room phone", room, "Unassigned"),
        ("Room tablet", room, "In_Storage"),
        ("Office laptop", office, "Unassigned"),
        ("Abuja laptop", abuja, "In_Storage"),
    ):
        register(api, title=title, location_id=place["id"], home_location_id=lagos["id"], status=status)
    register(api, title="Nowhere")

    assert listed(api, location_id=lagos["id"]) == [
        "Office laptop",
        "Room laptop",
        "Room phone",
        "Room tablet",
    ]
    assert listed(api, location_id=room["id"]) == ["Room laptop", "Room phone", "Room tablet"]
    assert listed(api, location_id=room["id"], status="In_Storage") == ["Room tablet"]
    assert listed(api, location_id=abuja["id"]) == ["Abuja laptop"]
    assert len(listed(api, home_location_id=lagos["id"])) == 5
    walked = walk_cursor(api, "/client/equipment", limit=2, location_id=office["id"])
    assert sorted(record["title"] for record in walked) == listed(api, location_id=office["id"])
    page = api.get("/client/equipment", location_id=lagos["id"], per_page=2).json()
    assert (page["total"], page["last_page"]) == (4, 2)

    assert counts(get_location(api, lagos), "here") == {}
    assert counts(get_location(api, lagos), "beneath") == {"Unassigned": 3, "In_Storage": 1, "total": 4}
    assert counts(get_location(api, office), "here") == {"Unassigned": 1, "total": 1}
    assert counts(get_location(api, room), "beneath") == {"Unassigned": 2, "In_Storage": 1, "total": 3}
    tree = api.get("/client/locations/tree").json()["data"]
    assert [(node["name"], node["device_counts"]["beneath"]["total"]) for node in tree] == [
        ("Abuja", 1),
        ("Lagos", 4),
    ]
    office_node = tree[1]["children"][0]
    assert office_node["device_counts"]["beneath"]["total"] == 4
    assert office_node["children"][0]["device_counts"]["here"]["total"] == 3
    listing = api.get("/client/locations", per_page=100).json()["data"]["data"]
    assert {record["name"]: record["device_counts"]["beneath"]["total"] for record in listing} == {
        "Lagos": 4,
        "Office": 4,
        "Room 7": 3,
        "Abuja": 1,
    }

    # The room moves to Abuja: the filters and counts follow it, nothing of the devices changed.
    assert api.patch(f"/client/locations/{room['id']}", {"parent_id": abuja["id"]}).status_code == 200
    assert listed(api, location_id=lagos["id"]) == ["Office laptop"]
    assert len(listed(api, location_id=abuja["id"])) == 4
    assert counts(get_location(api, abuja), "beneath") == {"Unassigned": 2, "In_Storage": 2, "total": 4}


def test_a_location_holding_devices_cannot_be_deleted_and_the_409_says_how_many(api: Api) -> None:
    office = create_location(api, "Office")
    store = create_location(api, "Store")
    first = register(api, title="One", location_id=office["id"])
    register(api, title="Two", location_id=office["id"])
    register(api, title="Three", location_id=store["id"], home_location_id=office["id"])
    refused = api.delete(f"/client/locations/{office['id']}")
    assert_error(refused, 409, "holds 2 devices here and 1 device that call it home")
    assert get_location(api, office)["name"] == "Office"

    moved = api.post(
        "/client/equipment/bulk-move",
        {"equipment_ids": [first["id"]], "status": "In_Storage", "location_id": store["id"]},
    )
    assert moved.status_code == 200, moved.text
    assert moved.json()["data"][0]["location_id"] == store["id"]
    assert_error(api.delete(f"/client/locations/{office['id']}"), 409, "holds 1 device here and 1 device")
    for record in api.get("/client/equipment", location_id=office["id"]).json()["data"]["data"]:
        assert api.delete(f"/client/equipment/{record['id']}").status_code == 200  # archived: gone
    three = api.get("/client/equipment", home_location_id=office["id"]).json()["data"]["data"][0]
    assert api.patch(f"/client/equipment/{three['id']}", {"home_location_id": None}).status_code == 200
    deleted = api.delete(f"/client/locations/{office['id']}")
    assert deleted.status_code == 200, deleted.text
    types = [event["type"] for event in api.get("/client/events", type="location.*").json()["data"]["data"]]
    assert types == ["location.deleted", "location.created", "location.created"]


def test_a_device_received_back_from_an_offboarding_lands_at_its_home(api: Api, db: Session) -> None:
    office = create_location(api, "Lagos office", kind="Office")
    employee = add_employee(db, api.company_id)
    laptop = add_assigned_device(db, employee, "MacBook Pro")
    assert api.patch(f"/client/equipment/{laptop}", {"home_location_id": office["id"]}).status_code == 200
    add_credit(db, api.company_id, "NGN", "1000000")
    body = offboard_body(employee, [{"equipment_id": str(laptop), "destination": "office"}])
    initiated = api.post(INITIATE, body)
    assert initiated.status_code == 200, initiated.text
    order_id = initiated.json()["data"]["order_id"]
    assert api.post(f"/client/orders/{order_id}/received").status_code == 200
    record = api.get(f"/client/equipment/{laptop}").json()["data"]
    assert (record["status"], record["location_id"]) == ("Unassigned", office["id"])
    assert moves(record) == [(None, "Lagos office")]
    assert counts(get_location(api, office), "here") == {"Unassigned": 1, "total": 1}
    # No default storage location: put in storage, it stays where it is.
    stored = api.patch(f"/client/equipment/{laptop}", {"status": "In_Storage"})
    assert stored.json()["data"]["location_id"] == office["id"]


def test_the_csv_export_and_import_carry_both_locations(api: Api) -> None:
    office = create_location(api, "Office")
    room = create_location(api, "Room", office)
    text = f"title,location_id,home_location_id\nImported,{room['id']},{office['id']}\n"
    imported = api.request(
        "POST", "/client/equipment/import", content=text.encode(), headers={"Content-Type": "text/csv"}
    )
    assert imported.status_code == 200, imported.text
    export: httpx.Response = api.get("/client/equipment/export", location_id=office["id"])
    assert export.status_code == 200, export.text
    rows = list(csv.DictReader(io.StringIO(export.text)))
    assert [(row["title"], row["location_id"], row["home_location_id"]) for row in rows] == [
        ("Imported", room["id"], office["id"])
    ]
