"""`updated_since` on the employee and department lists: exactly the records changed since then,
oldest change first, deleted employees and departments included and marked `deleted`."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from outfitter.core.timestamps import format_timestamp
from outfitter.models import Department, Employee
from outfitter.models.events import Event
from tests.factories import Api, walk_cursor
from tests.people.helpers import create_employee, employee_body


def _since(db: Session, *models: Any) -> str:
    """Just after the newest change (or offboarding) so far."""
    newest = max(
        value
        for value in [
            *(db.scalar(select(func.max(model.updated_at))) for model in models),
            db.scalar(select(func.max(Event.created_at))),
        ]
        if value is not None
    )
    db.rollback()
    return format_timestamp(newest + timedelta(microseconds=1))


def _names(records: list[dict[str, Any]]) -> list[str]:
    return [record["first_name"] if "first_name" in record else record["name"] for record in records]


def test_employees_changed_since(api: Api, db: Session) -> None:
    ada, bola, chidi, _dayo = (
        create_employee(api, first_name=name) for name in ("Ada", "Bola", "Chidi", "Dayo")
    )
    since = _since(db, Employee)
    assert walk_cursor(api, "/client/employees", updated_since=since) == []

    assert api.patch(f"/client/employees/{bola['id']}", {"job_title": "CTO"}).status_code == 200
    offboarded = api.delete(f"/client/employees/{ada['id']}").json()["data"]
    assert api.patch(f"/client/employees/{chidi['id']}", {"landmark": "By the lagoon"}).status_code == 200
    bulk = api.post("/client/employees/bulk", {"employees": [[employee_body(first_name="Efe")]]})
    assert bulk.status_code == 201, bulk.text

    changed = walk_cursor(api, "/client/employees", updated_since=since, limit=2)
    assert _names(changed) == ["Bola", "Ada", "Chidi", "Efe"]
    # Each carries its updated_at, where the next walk resumes (inclusive: the last comes again).
    assert [record["updated_at"] for record in changed] == sorted(record["updated_at"] for record in changed)
    resumed = walk_cursor(api, "/client/employees", updated_since=changed[-1]["updated_at"])
    assert _names(resumed) == ["Efe"]
    assert [record["deleted"] for record in changed] == [False, True, False, False]
    # The offboarded one as it was when it left; the others as the list shows them now.
    assert changed[1] == offboarded | {"deleted": True, "updated_at": changed[1]["updated_at"]}
    assert changed[1]["updated_at"] > offboarded["updated_at"]  # when it was offboarded
    now = {record["id"]: record for record in api.get("/client/employees").json()["data"]["data"]}
    assert changed[0] == now[bola["id"]] | {"deleted": False} and changed[0]["job_title"] == "CTO"
    # Filters narrow the live records; an offboarding is reported whatever the filters.
    searched = walk_cursor(api, "/client/employees", updated_since=since, search="efe")
    assert _names(searched) == ["Ada", "Efe"]


def test_a_walk_of_changes_is_resumable_with_its_cursor(api: Api, db: Session) -> None:
    staff = [create_employee(api, first_name=name) for name in ("Ada", "Bola", "Chidi")]
    since = _since(db, Employee)
    for person in staff:
        api.patch(f"/client/employees/{person['id']}", {"job_title": "Lead"})
    first = api.get("/client/employees", updated_since=since, limit=2).json()["data"]
    assert _names(first["data"]) == ["Ada", "Bola"]
    # Bola changes again while the client is between pages: it moves behind the cursor, so the
    # walk reports it again, later, with its new state; nothing is skipped.
    api.patch(f"/client/employees/{staff[1]['id']}", {"job_title": "Head"})
    rest = api.get("/client/employees", updated_since=since, limit=2, cursor=first["next_cursor"]).json()[
        "data"
    ]
    assert _names(rest["data"]) == ["Chidi", "Bola"] and rest["data"][1]["job_title"] == "Head"
    assert rest["next_cursor"] is None


def test_departments_changed_since(api: Api, db: Session) -> None:
    ada = create_employee(api, first_name="Ada")
    teams = [
        api.post("/client/departments", {"name": name}).json()["data"] for name in ("Ops", "Sales", "Legal")
    ]
    since = _since(db, Department, Employee)
    assert walk_cursor(api, "/client/departments", updated_since=since) == []

    api.patch(f"/client/departments/{teams[2]['id']}", {"member_ids": [ada["id"]]})  # members only
    deleted = api.delete(f"/client/departments/{teams[0]['id']}").json()["data"]
    new = api.post("/client/departments", {"name": "Support"}).json()["data"]

    changed = walk_cursor(api, "/client/departments", updated_since=since, limit=1)
    assert _names(changed) == ["Legal", "Ops", "Support"]
    assert [record["deleted"] for record in changed] == [False, True, False]
    assert changed[0]["member_count"] == 1
    assert changed[1]["id"] == deleted["id"] and changed[1]["member_count"] == 0
    assert changed[2] == new | {"deleted": False, "updated_at": changed[2]["updated_at"]}
    # The page mode still never shows a deleted department.
    listed = api.get("/client/departments").json()["data"]
    assert listed["total"] == 3 and deleted["id"] not in {record["id"] for record in listed["data"]}


def test_an_offboarding_brings_the_departments_it_changes_into_the_sync(api: Api, db: Session) -> None:
    """Deleting an employee ends their memberships and the headship of theirs (docs/people.md): those
    departments changed, so `updated_since` returns them again; the others stay out."""
    head, member, stays = (create_employee(api, first_name=name) for name in ("Head", "Member", "Stays"))
    led = api.post("/client/departments", {"name": "Led", "head_id": head["id"]}).json()["data"]
    joined = api.post("/client/departments", {"name": "Joined", "member_ids": [head["id"], stays["id"]]})
    untouched = api.post("/client/departments", {"name": "Untouched", "member_ids": [member["id"]]})
    assert joined.status_code == untouched.status_code == 201
    since = _since(db, Department, Employee)

    assert api.delete(f"/client/employees/{head['id']}").status_code == 200
    changed = walk_cursor(api, "/client/departments", updated_since=since)
    assert sorted(_names(changed)) == ["Joined", "Led"]
    by_name = {record["name"]: record for record in changed}
    assert by_name["Led"]["head"] == {"name": " ", "id": None}
    assert [record["id"] for record in by_name["Joined"]["members"]] == [stays["id"]]
    assert by_name["Led"]["updated_at"] > led["updated_at"]
    # the employee's own event tells of it: no department event is written for it
    types = [event["type"] for event in api.get("/client/events", since=since).json()["data"]["data"]]
    assert types == ["employee.offboarded"]
