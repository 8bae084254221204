"""Status moves through PATCH and DELETE, the history each writes, and tenancy."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from tests.equipment.helpers import events, make_employee, register
from tests.factories import Api, assert_error

ALLOWED = [
    ("Unassigned", "Assigned", "assigned"),
    ("Unassigned", "In_Storage", "moved_to_storage"),
    ("Unassigned", "Sold", "sold"),
    ("Unassigned", "Archived", "archived"),
    ("Assigned", "Unassigned", "unassigned"),
    ("Assigned", "In_Storage", "moved_to_storage"),
    ("Assigned", "Archived", "archived"),
    ("In_Storage", "Assigned", "assigned"),
    ("In_Storage", "Unassigned", "unassigned"),
    ("In_Storage", "Sold", "sold"),
    ("In_Storage", "Archived", "archived"),
    ("Sold", "Archived", "archived"),
]
REFUSED = [
    ("Assigned", "Sold"),
    ("Sold", "Assigned"),
    ("Sold", "Unassigned"),
    ("Sold", "In_Storage"),
    ("Archived", "Unassigned"),
]
SETUP_EVENTS = {
    "Unassigned": ["equipment_added"],
    "Assigned": ["equipment_added", "assigned"],
    "In_Storage": ["equipment_added", "moved_to_storage"],
    "Sold": ["equipment_added", "sold"],
}


def _device_in(api: Api, status: str, employee_id: str) -> dict[str, object]:
    if status == "Assigned":
        return register(api, status="Assigned", assignee_id=employee_id)
    if status == "In_Storage":
        return register(api, status="In_Storage")
    record = register(api)
    if status != "Unassigned":
        response = api.patch(f"/client/equipment/{record['id']}", {"status": status})
        assert response.status_code == 200, response.text
        record = response.json()["data"]
    return record


@pytest.mark.parametrize(("from_status", "to_status", "event"), ALLOWED)
def test_each_allowed_move_writes_its_history(
    api: Api, db: Session, from_status: str, to_status: str, event: str
) -> None:
    employee = make_employee(db, api.company_id)
    record = _device_in(api, from_status, str(employee.id))
    body: dict[str, object] = {"status": to_status}
    if to_status == "Assigned":
        body["assignee_id"] = str(employee.id)
    response = api.patch(f"/client/equipment/{record['id']}", body)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["status"] == to_status
    assert events(data) == [*SETUP_EVENTS[from_status], event]
    last = data["history"][-1]
    assert last["actor"] == f"token:Acme Ltd API ({api.token_id})"  # the token's name and id
    if to_status == "Assigned":
        assert data["assignee"]["id"] == str(employee.id)
        assert last["assignee"] == {"id": str(employee.id), "name": "Ada Obi"}
    else:
        assert data["assignee"] is None and last["assignee"] is None


@pytest.mark.parametrize(("from_status", "to_status"), REFUSED)
def test_each_refused_move_is_409_naming_both_and_changes_nothing(
    api: Api, db: Session, from_status: str, to_status: str
) -> None:
    employee = make_employee(db, api.company_id)
    if from_status == "Archived":
        record = register(api)
        api.delete(f"/client/equipment/{record['id']}")
    else:
        record = _device_in(api, from_status, str(employee.id))
    before = api.get(f"/client/equipment/{record['id']}").json()["data"]
    body: dict[str, object] = {"status": to_status}
    if to_status == "Assigned":
        body["assignee_id"] = str(employee.id)
    response = api.patch(f"/client/equipment/{record['id']}", body)
    if from_status == "Archived":
        assert_error(response, 409, "Archived")
    else:
        assert_error(response, 409, f"from {from_status} to {to_status}")
    assert api.get(f"/client/equipment/{record['id']}").json()["data"] == before


def test_reassign_unassign_by_assignee_id_and_refusals(api: Api, db: Session) -> None:
    first = make_employee(db, api.company_id, "Ada", "Obi")
    second = make_employee(db, api.company_id, "Bola", "Ade")
    record = register(api, status="Assigned", assignee_id=str(first.id))
    path = f"/client/equipment/{record['id']}"
    moved = api.patch(path, {"assignee_id": str(second.id)}).json()["data"]
    assert moved["status"] == "Assigned" and moved["assignee"]["name"] == "Bola Ade"
    assert events(moved) == ["equipment_added", "assigned", "assigned"]
    assert_error(api.patch(path, {"status": "In_Storage", "assignee_id": str(first.id)}), 422)
    unassigned = api.patch(path, {"assignee_id": None}).json()["data"]
    assert unassigned["status"] == "Unassigned" and unassigned["assignee"] is None
    assert events(unassigned)[-1] == "unassigned"
    result = assert_error(api.patch(path, {"status": "Assigned"}), 422)
    assert "assignee_id" in result["errors"]
    same = api.patch(path, {"status": "Unassigned", "title": "Renamed"}).json()["data"]
    assert same["title"] == "Renamed" and len(same["history"]) == len(unassigned["history"])


def test_delete_archives_once_then_404_and_archived_is_listed_on_request(api: Api) -> None:
    record = register(api, status="In_Storage")
    path = f"/client/equipment/{record['id']}"
    response = api.delete(path)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["message"] == "Equipment deleted successfully."
    assert body["data"]["status"] == "Archived" and body["data"]["storage_duration"] is None
    assert events(body["data"]) == ["equipment_added", "moved_to_storage", "archived"]
    assert "score" in body["data"]
    assert_error(api.delete(path), 404, "not found")
    assert api.get(path).json()["data"]["status"] == "Archived"
    assert api.get("/client/equipment").json()["total"] == 0
    archived = api.get("/client/equipment", status="Archived").json()
    assert archived["total"] == 1 and archived["data"]["data"][0]["id"] == record["id"]
    assert api.get("/client/equipment/in-storage").json()["total"] == 0


def test_a_serial_number_an_archived_device_keeps_is_refused_naming_that_device(api: Api) -> None:
    """The lists leave archived devices out by default: the refusal says which device holds the
    number and why it still does, wherever the number is given."""
    archived = register(api, serial_number="SN-4")
    assert api.delete(f"/client/equipment/{archived['id']}").status_code == 200
    message = (
        f"Equipment with serial number 'SN-4' already exists in this company: device {archived['id']} "
        "(Archived). Archived devices keep their serial numbers, as they keep their history."
    )
    assert (
        assert_error(api.post("/client/equipment", {"title": "Back", "serial_number": "SN-4"}), 409)[
            "message"
        ]
        == message
    )
    other = register(api, serial_number="SN-5")
    refused = api.patch(f"/client/equipment/{other['id']}", {"serial_number": "SN-4"})
    assert assert_error(refused, 409)["message"] == message
    items = [{"title": "Back", "serial_number": "SN-4"}]
    refused = api.post("/client/equipment/bulk", {"equipment": items})
    assert assert_error(refused, 422)["errors"] == {"equipment.0.serial_number": [message]}
    assert api.get(f"/client/equipment/{other['id']}").json()["data"]["serial_number"] == "SN-5"


def test_another_company_cannot_see_filter_change_or_archive(api: Api, other_api: Api, db: Session) -> None:
    employee = make_employee(db, api.company_id)
    record = register(
        api, status="Assigned", assignee_id=str(employee.id), serial_number="SN-A", country="NG"
    )
    path = f"/client/equipment/{record['id']}"
    assert_error(other_api.get(path), 404, "Equipment not found")
    assert_error(other_api.patch(path, {"title": "Stolen"}), 404, "Equipment not found")
    assert_error(other_api.patch(path, {"status": "Unassigned"}), 404)
    assert_error(other_api.delete(path), 404, "Equipment not found")
    assert other_api.get("/client/equipment").json()["total"] == 0
    assert other_api.get("/client/equipment", serial_number="SN-A").json()["total"] == 0
    assert other_api.get("/client/equipment", country="NG", status="Assigned").json()["total"] == 0
    assert other_api.get("/client/equipment", status="Archived").json()["total"] == 0
    after = api.get(path).json()["data"]
    assert after["title"] == record["title"] and after["status"] == "Assigned"
    assert events(after) == ["equipment_added", "assigned"]


def test_cannot_assign_to_another_companys_employee(api: Api, other_api: Api, db: Session) -> None:
    stranger = make_employee(db, other_api.company_id, "Eve", "Spy")
    result = assert_error(
        api.post("/client/equipment", {"title": "x", "status": "Assigned", "assignee_id": str(stranger.id)}),
        422,
    )
    assert "assignee_id" in result["errors"]
    record = register(api)
    result = assert_error(
        api.patch(f"/client/equipment/{record['id']}", {"assignee_id": str(stranger.id)}), 422
    )
    assert "assignee_id" in result["errors"]
    assert api.get(f"/client/equipment/{record['id']}").json()["data"]["status"] == "Unassigned"
