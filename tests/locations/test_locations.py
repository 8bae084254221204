"""The location tree through HTTP: create, nest, rename, move subtrees (no cycles, a depth limit),
the tree answer, cursor mode and `updated_since`, delete, and the walls between companies."""

from __future__ import annotations

import re
import uuid

from tests.factories import Api, assert_error, walk_cursor
from tests.locations.helpers import create_location, get_location

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
ZERO = {"Assigned": 0, "Unassigned": 0, "Sold": 0, "In_Storage": 0, "Archived": 0, "total": 0}


def test_create_answers_every_field_with_ancestors_and_counts(api: Api) -> None:
    site = create_location(api, "Lagos campus", kind="Site", address="1 Marina, Lagos", country="NG")
    office = create_location(api, "Office A", site, kind="Office")
    room = create_location(api, "Room 101", office, kind="Room")

    response = api.get(f"/client/locations/{room['id']}")
    assert response.status_code == 200, response.text
    assert response.json()["message"] == "Location fetched successfully."
    record = response.json()["data"]
    assert set(record) == {
        "id",
        "name",
        "kind",
        "parent_id",
        "ancestors",
        "depth",
        "address",
        "country",
        "country_code",
        "is_default_storage",
        "device_counts",
        "created_at",
        "updated_at",
    }
    assert record["parent_id"] == office["id"]
    assert record["ancestors"] == [
        {"id": site["id"], "name": "Lagos campus"},
        {"id": office["id"], "name": "Office A"},
    ]
    assert record["depth"] == 3
    assert record["kind"] == "Room"
    assert record["device_counts"] == {"here": ZERO, "beneath": ZERO}
    assert TIMESTAMP.match(record["created_at"])
    assert (site["country"], site["country_code"], site["address"]) == ("Nigeria", "NG", "1 Marina, Lagos")
    assert site["ancestors"] == [] and site["depth"] == 1 and site["parent_id"] is None


def test_names_are_unique_among_siblings_only_whatever_the_case(api: Api) -> None:
    lagos = create_location(api, "Lagos")
    abuja = create_location(api, "Abuja")
    create_location(api, "Store room", lagos)
    create_location(api, "Store room", abuja)  # another parent: fine
    assert_error(
        api.post("/client/locations", {"name": "STORE ROOM", "parent_id": lagos["id"]}), 409, "Store"
    )
    assert_error(api.post("/client/locations", {"name": "lagos"}), 409, "already exists")
    assert_error(api.post("/client/locations", {"name": "   "}), 422)
    assert_error(
        api.post("/client/locations", {"name": "X", "parent_id": str(uuid.uuid4())}), 422, "parent_id"
    )
    assert_error(api.post("/client/locations", {"name": "X", "country": "Atlantis"}), 422, "country")
    assert_error(api.post("/client/locations", {"name": "X", "kind": "Castle"}), 422, "kind")


def test_the_depth_limit_holds_for_creates_and_moves(api: Api) -> None:
    chain = [create_location(api, "Level 1")]
    for level in range(2, 9):
        chain.append(create_location(api, f"Level {level}", chain[-1]))
    assert chain[-1]["depth"] == 8
    assert_error(
        api.post("/client/locations", {"name": "Level 9", "parent_id": chain[-1]["id"]}), 422, "8 levels"
    )

    other = create_location(api, "Other root")
    create_location(api, "Child", other)
    # The root with its child would reach level 9 under level 7.
    refused = api.patch(f"/client/locations/{other['id']}", {"parent_id": chain[6]["id"]})
    assert_error(refused, 422, "8 levels")
    assert get_location(api, other)["depth"] == 1  # nothing moved


def test_moving_a_subtree_moves_everything_beneath_and_refuses_cycles(api: Api) -> None:
    lagos = create_location(api, "Lagos")
    abuja = create_location(api, "Abuja")
    office = create_location(api, "Office", lagos)
    floor = create_location(api, "Floor 2", office)
    room = create_location(api, "Room 7", floor)

    moved = api.patch(f"/client/locations/{office['id']}", {"parent_id": abuja["id"]})
    assert moved.status_code == 200, moved.text
    assert moved.json()["data"]["ancestors"] == [{"id": abuja["id"], "name": "Abuja"}]
    after = get_location(api, room)
    assert [ancestor["name"] for ancestor in after["ancestors"]] == ["Abuja", "Office", "Floor 2"]
    assert after["depth"] == 4

    # Beneath itself, or beneath anything under it: refused, nothing changes.
    for target in (office, floor, room):
        assert_error(
            api.patch(f"/client/locations/{office['id']}", {"parent_id": target["id"]}), 422, "beneath"
        )
    assert [a["name"] for a in get_location(api, room)["ancestors"]] == ["Abuja", "Office", "Floor 2"]

    # To the top: a root again, its subtree with it.
    rooted = api.patch(f"/client/locations/{office['id']}", {"parent_id": None})
    assert rooted.status_code == 200, rooted.text
    assert rooted.json()["data"]["depth"] == 1
    assert [a["name"] for a in get_location(api, room)["ancestors"]] == ["Office", "Floor 2"]
    tree = api.get("/client/locations/tree").json()["data"]
    assert [node["name"] for node in tree] == ["Abuja", "Lagos", "Office"]
    assert tree[2]["children"][0]["children"][0]["id"] == room["id"]


def test_a_move_into_a_parent_with_the_same_name_is_409(api: Api) -> None:
    lagos = create_location(api, "Lagos")
    abuja = create_location(api, "Abuja")
    create_location(api, "Store", lagos)
    store = create_location(api, "Store", abuja)
    assert_error(api.patch(f"/client/locations/{store['id']}", {"parent_id": lagos["id"]}), 409, "Store")
    assert get_location(api, store)["parent_id"] == abuja["id"]


def test_one_default_storage_location_per_company(api: Api) -> None:
    first = create_location(api, "Warehouse 1", kind="Warehouse", is_default_storage=True)
    second = create_location(api, "Warehouse 2", kind="Warehouse", is_default_storage=True)
    assert get_location(api, first)["is_default_storage"] is False
    assert get_location(api, second)["is_default_storage"] is True
    patched = api.patch(f"/client/locations/{first['id']}", {"is_default_storage": True})
    assert patched.json()["data"]["is_default_storage"] is True
    assert get_location(api, second)["is_default_storage"] is False


def test_list_pages_cursor_mode_and_updated_since_with_deletes(api: Api) -> None:
    created = [create_location(api, f"Site {index}") for index in range(5)]
    page = api.get("/client/locations", per_page=2).json()["data"]
    assert (page["total"], page["per_page"], page["last_page"]) == (5, 2, 3)
    assert [record["id"] for record in page["data"]] == [created[4]["id"], created[3]["id"]]
    walked = walk_cursor(api, "/client/locations", limit=2)
    assert [record["id"] for record in walked] == [record["id"] for record in reversed(created)]

    since = created[0]["created_at"]
    deleted = api.delete(f"/client/locations/{created[1]['id']}")
    assert deleted.status_code == 200, deleted.text
    changes = walk_cursor(api, "/client/locations", limit=2, updated_since=since)
    flags = {record["id"]: record["deleted"] for record in changes}
    assert flags == {record["id"]: record["id"] == created[1]["id"] for record in created}
    assert api.get("/client/locations", per_page=100).json()["data"]["total"] == 4
    assert_error(api.get(f"/client/locations/{created[1]['id']}"), 404)


def test_delete_refuses_a_location_with_locations_beneath(api: Api) -> None:
    lagos = create_location(api, "Lagos")
    create_location(api, "Office", lagos)
    create_location(api, "Store", lagos)
    assert_error(api.delete(f"/client/locations/{lagos['id']}"), 409, "2 locations beneath")


def test_another_companys_locations_are_404_everywhere(api: Api, other_api: Api) -> None:
    mine = create_location(api, "Lagos")
    theirs = create_location(other_api, "Globex HQ")
    assert_error(other_api.get(f"/client/locations/{mine['id']}"), 404)
    assert_error(other_api.patch(f"/client/locations/{mine['id']}", {"name": "Pwned"}), 404)
    assert_error(other_api.delete(f"/client/locations/{mine['id']}"), 404)
    # Naming another company's location as a parent reads as an unknown one.
    assert_error(
        other_api.post("/client/locations", {"name": "X", "parent_id": mine["id"]}), 422, "parent_id"
    )
    assert_error(api.patch(f"/client/locations/{mine['id']}", {"parent_id": theirs["id"]}), 422, "parent_id")
    assert [node["name"] for node in other_api.get("/client/locations/tree").json()["data"]] == ["Globex HQ"]
    assert get_location(api, mine)["name"] == "Lagos"
