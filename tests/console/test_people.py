"""The console's employees, departments and activity log through HTTP: what they show equals the
API's answers, the forms save what the API saves (with its rules and messages, beside the fields),
every change is an event by `console:<email>`, a refused write changes nothing, viewers only read,
and another company's records are 404."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import Engine

from tests.console.conftest import Browser, sign_up
from tests.factories import Api

ADA = "console:ada@example.com"
EMPLOYEE_LINK = re.compile(r'<a href="/console/employees/[0-9a-f-]{36}">([^<]+)</a>')


def add_employee(api: Api, first: str, last: str, country: str = "NG", **extra: str) -> dict[str, Any]:
    body = {
        "first_name": first,
        "last_name": last,
        "email": f"{first}.{last}@acme.example".lower().replace(" ", ""),
        "country_id": country,
        "phone": "+234 801 234 5678",
        "address": "1 Marina, Lagos",
        **extra,
    }
    answer = api.post("/client/employees", json=body)
    assert answer.status_code == 201, answer.text
    data: dict[str, Any] = answer.json()["data"]
    return data


def form(**fields: str) -> dict[str, str]:
    base = {
        "first_name": "Jane",
        "last_name": "Doe",
        "email": "jane.doe@acme.example",
        "country": "Kenya",
        "phone": "+254 700 000000",
        "address": "2 Moi Avenue, Nairobi",
        "job_title": "Engineer",
    }
    return {**base, **fields}


def events(api: Api, **filters: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = api.get("/client/events", **filters).json()["data"]["data"]
    return found


def employee_count(api: Api) -> int:
    total: int = api.get("/client/employees").json()["data"]["total"]
    return total


def test_the_employee_list_has_the_apis_filters_and_pages(app: FastAPI, engine: Engine, api: Api) -> None:
    grace = add_employee(api, "Grace", "Hopper", "NG")
    add_employee(api, "Wanjiru", "Kamau", "KE")
    add_employee(api, "Ada", "Obi", "NG")
    team = api.post("/client/departments", json={"name": "Platform", "member_ids": [grace["id"]]})
    ada = sign_up(app, engine, api.company_id, "ada@example.com")

    everyone = ada.get("/employees")
    assert everyone.status_code == 200 and 'id="result-count">(3)<' in everyone.text
    assert EMPLOYEE_LINK.findall(everyone.text) == [
        "Ada Obi",
        "Wanjiru Kamau",
        "Grace Hopper",
    ]  # newest first
    assert EMPLOYEE_LINK.findall(ada.get("/employees", params={"country": "Nigeria"}).text) == [
        "Ada Obi",
        "Grace Hopper",
    ]
    assert EMPLOYEE_LINK.findall(ada.get("/employees", params={"q": "kAm"}).text) == ["Wanjiru Kamau"]
    in_team = ada.get("/employees", params={"department": team.json()["data"]["id"]})
    assert EMPLOYEE_LINK.findall(in_team.text) == ["Grace Hopper"] and "<td>Platform</td>" in in_team.text
    # A filter the API refuses is set aside, its reason beside its field; never a 500.
    odd = ada.get("/employees", params={"country": "Atlantis", "department": "nope", "page": "x"})
    assert odd.status_code == 200 and 'id="country-error"' in odd.text and 'id="department-error"' in odd.text
    assert EMPLOYEE_LINK.findall(odd.text).__len__() == 3

    for number in range(24):
        add_employee(api, "Person", f"N{number:02}")
    first = ada.get("/employees", params={"country": "NG"})
    assert "Page 1 of 2" in first.text and len(EMPLOYEE_LINK.findall(first.text)) == 25
    next_link = re.search(r'<a rel="next" href="([^"]+)"', first.text).group(1)  # type: ignore[union-attr]
    assert next_link == "/console/employees?country=NG&amp;page=2"
    second = ada.get("/employees", params={"country": "NG", "page": "2"})
    assert EMPLOYEE_LINK.findall(second.text) == ["Grace Hopper"]


def test_an_employee_is_created_with_the_apis_rules_and_an_event_by_the_user(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    token = ada.csrf("/employees/new")
    created = ada.post("/employees", {**form(), "csrf_token": token})
    assert created.status_code == 303, created.text
    employee_id = created.headers["location"].split("/")[-1].split("?")[0]
    saved = api.get(f"/client/employees/{employee_id}").json()["data"]
    assert (saved["first_name"], saved["email"], saved["country_code"], saved["job_title"]) == (
        "Jane",
        "jane.doe@acme.example",
        "KE",
        "Engineer",
    )
    assert saved["personal_email"] is None  # a blank optional field is left empty
    recorded = events(api, type="employee.created", subject_id=employee_id)
    assert [event["actor"] for event in recorded] == [ADA]
    page = ada.get(created.headers["location"].removeprefix("/console"))
    assert "Created." in page.text and "jane.doe@acme.example" in page.text and "Kenya (KE)" in page.text


def test_a_refused_employee_form_shows_the_reasons_beside_the_fields_and_writes_nothing(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    add_employee(api, "Jane", "Doe")  # jane.doe@acme.example is taken
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    token = ada.csrf("/employees/new")
    before = len(events(api))

    invalid = ada.post(
        "/employees",
        {**form(first_name=" ", email="not-an-email", phone="call me", country="KE"), "csrf_token": token},
    )
    assert invalid.status_code == 422
    assert re.search(r'id="f-first_name-error">Must not be empty or only spaces\.<', invalid.text)
    assert 'id="f-email-error">Not a valid email address' in invalid.text
    assert 'id="f-phone-error">Not a valid phone number' in invalid.text
    assert 'aria-invalid="true"' in invalid.text and 'value="call me"' in invalid.text  # the values stay

    unknown = ada.post(
        "/employees", {**form(email="new@acme.example", country="Atlantis"), "csrf_token": token}
    )
    assert unknown.status_code == 422 and 'id="f-country-error">' in unknown.text

    taken = ada.post("/employees", {**form(), "csrf_token": token})
    assert taken.status_code == 409
    assert 'id="f-email-error">An employee with the email jane.doe@acme.example already exists' in taken.text

    assert employee_count(api) == 1 and len(events(api)) == before


def test_an_employee_is_edited_and_their_page_shows_departments_and_devices(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    jane = add_employee(api, "Jane", "Doe", job_title="Engineer")
    api.post("/client/departments", json={"name": "Platform", "member_ids": [jane["id"]]})
    device = api.post(
        "/client/equipment", json={"title": "MacBook Pro 14", "status": "Assigned", "assignee_id": jane["id"]}
    ).json()["data"]
    ada = sign_up(app, engine, api.company_id, "ada@example.com")

    page = ada.get(f"/employees/{jane['id']}")
    assert f'<a href="/console/devices/{device["id"]}">MacBook Pro 14</a>' in page.text
    assert ">Platform</a>" in page.text and "Offboard Jane Doe" in page.text
    edit = ada.get(f"/employees/{jane['id']}/edit")
    assert 'value="Engineer"' in edit.text and "readonly" in edit.text  # the email cannot change
    token = ada.csrf(f"/employees/{jane['id']}/edit")
    values = {"first_name": "Jane", "last_name": "Doe", "country": "NG", "phone": "+234 801 234 5678"}
    values |= {"address": "1 Marina, Lagos", "csrf_token": token}

    saved = ada.post(
        f"/employees/{jane['id']}", {**values, "job_title": "Staff Engineer", "landmark": "By the bank"}
    )
    assert saved.status_code == 303 and saved.headers["location"].endswith("?saved=updated")
    answer = api.get(f"/client/employees/{jane['id']}").json()["data"]
    assert (answer["job_title"], answer["landmark"]) == ("Staff Engineer", "By the bank")
    assert [event["actor"] for event in events(api, type="employee.updated")] == [ADA]

    refused = ada.post(f"/employees/{jane['id']}", {**values, "phone": "", "job_title": "CTO"})
    assert refused.status_code == 422 and 'id="f-phone-error">' in refused.text
    assert api.get(f"/client/employees/{jane['id']}").json()["data"]["job_title"] == "Staff Engineer"

    # Offboarding is refused while she holds a device, with the API's reason; then it is done.
    held = ada.post(f"/employees/{jane['id']}/delete", {"csrf_token": token})
    assert held.status_code == 409 and "still holds 1 Assigned equipment" in held.text
    assert api.get(f"/client/employees/{jane['id']}").status_code == 200
    api.patch(f"/client/equipment/{device['id']}", json={"status": "In_Storage"})
    gone = ada.post(f"/employees/{jane['id']}/delete", {"csrf_token": token})
    assert gone.status_code == 303 and api.get(f"/client/employees/{jane['id']}").status_code == 404
    assert [event["actor"] for event in events(api, type="employee.offboarded")] == [ADA]


def test_a_csv_file_is_checked_then_imported_through_the_apis_importer(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    add_employee(api, "Jane", "Doe")
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    token = ada.csrf("/employees/import")
    bad = (
        "first_name,last_name,email,country_id,phone,address\n"
        "Ada,Obi,ada.obi@acme.example,NG,+234 801 234 5678,1 Marina\n"
        "Jane,Again,jane.doe@acme.example,NG,+234 801 234 5678,1 Marina\n"
        "Wanjiru,Kamau,wanjiru@acme.example,Atlantis,+254 700 000000,2 Moi Avenue\n"
    )

    def upload(data: str, dry_run: str) -> Any:
        files = {"file": ("people.csv", data.encode(), "text/csv")}
        return ada.post("/employees/import", {"csrf_token": token, "dry_run": dry_run}, files=files)

    checked = upload(bad, "1")
    assert checked.status_code == 422
    problems = re.findall(r"<tr><td>(\d+)</td><td>([a-z_]+)</td><td>([^<]+)</td></tr>", checked.text)
    assert [(line, column) for line, column, _ in problems] == [("3", "email"), ("4", "country_id")]
    assert employee_count(api) == 1
    assert upload(bad, "0").status_code == 422 and employee_count(api) == 1  # all or nothing

    good = bad.replace("jane.doe@", "jane.again@").replace("Atlantis", "Kenya")
    dry = upload(good, "1")
    assert dry.status_code == 200 and "3 employees would be created" in dry.text and employee_count(api) == 1
    done = upload(good, "0")
    assert done.status_code == 200 and "3 employees created" in done.text and employee_count(api) == 4
    assert {event["actor"] for event in events(api, type="employee.created")} == {
        f"token:Acme Ltd API ({api.token_id})",
        ADA,
    }
    assert upload("", "1").status_code == 422  # no file: said so, never a 500


def test_departments_with_a_head_and_members(app: FastAPI, engine: Engine, api: Api) -> None:
    jane = add_employee(api, "Jane", "Doe")
    ken = add_employee(api, "Ken", "Thompson")
    api.post("/client/departments", json={"name": "Finance"})
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    token = ada.csrf("/departments")

    taken = ada.post("/departments", {"name": "finance", "head": "", "csrf_token": token})
    assert taken.status_code == 409 and 'id="new-name-error">A department named' in taken.text
    nobody = ada.post("/departments", {"name": "Platform", "head": "who@acme.example", "csrf_token": token})
    assert nobody.status_code == 422 and 'id="new-head-error">No employee of this company' in nobody.text
    created = ada.post(
        "/departments", {"name": "Platform", "head": "JANE.DOE@acme.example", "csrf_token": token}
    )
    assert created.status_code == 303
    department_id = created.headers["location"].split("/")[-1].split("?")[0]

    added = ada.post(f"/departments/{department_id}/members", {"email": ken["email"], "csrf_token": token})
    assert added.status_code == 303
    again = ada.post(f"/departments/{department_id}/members", {"email": ken["email"], "csrf_token": token})
    assert again.status_code == 422 and "already a member" in again.text
    renamed = ada.post(
        f"/departments/{department_id}", {"name": "Platform Eng", "head": "", "csrf_token": token}
    )
    assert renamed.status_code == 303
    answer = api.get(f"/client/departments/{department_id}").json()["data"]
    assert answer["name"] == "Platform Eng" and answer["head"]["id"] is None
    assert [member["id"] for member in answer["members"]] == [ken["id"]]

    page = ada.get(f"/departments/{department_id}")
    assert EMPLOYEE_LINK.findall(page.text) == ["Ken Thompson"]
    removed = ada.post(f"/departments/{department_id}/members/{ken['id']}/remove", {"csrf_token": token})
    assert removed.status_code == 303
    assert api.get(f"/client/departments/{department_id}").json()["data"]["members"] == []
    actors = [(e["type"], e["actor"]) for e in events(api, subject_id=department_id)]
    assert actors == [("department.updated", ADA)] * 3 + [("department.created", ADA)]
    listing = ada.get("/departments")
    assert ">Platform Eng</a>" in listing.text and ">Finance</a>" in listing.text
    assert jane["id"] not in page.text  # no longer head, not a member


def test_the_activity_log_tells_each_event_as_a_sentence(
    app: FastAPI, engine: Engine, api: Api, other_api: Api
) -> None:
    jane = add_employee(api, "Jane", "Doe")
    device = api.post("/client/equipment", json={"title": "MacBook Pro 14", "status": "In_Storage"}).json()[
        "data"
    ]
    add_employee(other_api, "Globex", "Person")
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    token = ada.csrf(f"/devices/{device['id']}")
    ada.post(f"/devices/{device['id']}/status", {"status": "Sold", "csrf_token": token})
    ada.post(f"/employees/{jane['id']}", {**form(first_name="Janet", email=""), "csrf_token": token})

    log = ada.get("/activity")
    text = re.sub(r"<[^>]+>", "", log.text)
    assert "console:ada@example.com moved MacBook Pro 14 from In Storage to Sold" in text
    assert "console:ada@example.com edited employee Janet Doe (changed first name" in text
    assert "token Acme Ltd API created employee Jane Doe" in text
    assert "token Acme Ltd API added MacBook Pro 14 as In Storage" in text
    assert f'<a href="/console/devices/{device["id"]}">MacBook Pro 14</a>' in log.text
    assert "Globex" not in log.text  # another company's events are not ours

    only = ada.get("/activity", params={"type": "employee.*"})
    assert "MacBook" not in re.sub(r"<details.*?</details>", "", only.text, flags=re.S)
    device_log = re.sub(r"<[^>]+>", "", ada.get("/activity", params={"subject_id": device["id"]}).text)
    assert (
        device_log.count(" UTC") == 3
        and "token Acme Ltd API moved MacBook Pro 14 to In Storage" in device_log
    )
    odd = ada.get("/activity", params={"type": "lost.*", "since": "yesterday", "cursor": "x.y"})
    assert odd.status_code == 200 and 'id="type-error"' in odd.text and 'id="since-error"' in odd.text
    today = api.get("/client/events").json()["data"]["data"][0]["created_at"][:10]
    assert "Jane Doe" in ada.get("/activity", params={"since": today, "until": today}).text
    assert '<li class="event">' not in ada.get("/activity", params={"until": "2000-01-01"}).text

    event = events(api, type="equipment.sold")[0]
    one = ada.get(f"/activity/{event['id']}")
    assert one.status_code == 200 and "from In Storage to Sold" in one.text and '"status": "Sold"' in one.text


def test_the_activity_log_pages_with_cursors(app: FastAPI, engine: Engine, api: Api) -> None:
    for number in range(27):
        add_employee(api, "Person", f"N{number:02}")
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    first = ada.get("/activity", params={"type": "employee.created"})
    assert first.text.count('<li class="event">') == 25 and "Person N26" in first.text
    older = re.search(r'<a rel="next" href="/console/activity\?([^"]+)"', first.text).group(1)  # type: ignore[union-attr]
    second = ada.get(f"/activity?{older.replace('&amp;', '&')}")
    assert (
        second.text.count('<li class="event">') == 2
        and "Person N00" in second.text
        and 'rel="next"' not in second.text
    )
    # A cursor made for other filters is set aside with a message: the first page again.
    moved = ada.get(f"/activity?{older.replace('&amp;', '&').replace('employee.created', 'employee.*')}")
    assert "made for another list" in moved.text and moved.text.count('<li class="event">') == 25


@pytest.mark.one_database  # the pages' rules, the same on either database
def test_a_viewer_reads_but_changes_nothing(app: FastAPI, engine: Engine, api: Api) -> None:
    jane = add_employee(api, "Jane", "Doe")
    department = api.post("/client/departments", json={"name": "Platform"}).json()["data"]
    kim = sign_up(app, engine, api.company_id, "kim@example.com", role="viewer")
    listing = kim.get("/employees")
    assert EMPLOYEE_LINK.findall(listing.text) == ["Jane Doe"] and "New employee" not in listing.text
    page = kim.get(f"/employees/{jane['id']}")
    assert page.status_code == 200 and "/edit" not in page.text and "Offboard" not in page.text
    assert "Add member" not in kim.get(f"/departments/{department['id']}").text
    assert kim.get("/employees/new").status_code == 403 and kim.get("/employees/import").status_code == 403
    token = kim.csrf("/employees")
    for path, data in [
        ("/employees", form(email="x@acme.example")),
        (f"/employees/{jane['id']}", form(first_name="Nope")),
        (f"/employees/{jane['id']}/delete", {}),
        ("/departments", {"name": "Sales"}),
        (f"/departments/{department['id']}/members", {"email": jane["email"]}),
        (f"/departments/{department['id']}/delete", {}),
    ]:
        refused = kim.post(path, {**data, "csrf_token": token})
        assert refused.status_code == 403 and "Only an admin" in refused.text, path
    assert (
        employee_count(api) == 1
        and api.get("/client/employees/" + jane["id"]).json()["data"]["first_name"] == "Jane"
    )
    assert api.get("/client/departments").json()["data"]["total"] == 1
    assert kim.get("/activity").status_code == 200


def test_another_companys_people_and_events_are_404(
    app: FastAPI, engine: Engine, api: Api, other_api: Api
) -> None:
    theirs = add_employee(other_api, "Gus", "Globex")
    department = other_api.post("/client/departments", json={"name": "Globex Ops"}).json()["data"]
    event = events(other_api, type="employee.created")[0]
    ada: Browser = sign_up(app, engine, api.company_id, "ada@example.com")
    token = ada.csrf()
    for path in (
        f"/employees/{theirs['id']}",
        f"/employees/{theirs['id']}/edit",
        f"/departments/{department['id']}",
        f"/activity/{event['id']}",
        "/employees/not-an-id",
        "/activity/not-an-id",
    ):
        answer = ada.get(path)
        assert answer.status_code == 404 and "Globex" not in answer.text and "Gus" not in answer.text, path
    for path, data in [
        (f"/employees/{theirs['id']}", form(first_name="Hacked")),
        (f"/employees/{theirs['id']}/delete", {}),
        (f"/departments/{department['id']}", {"name": "Hacked"}),
        (f"/departments/{department['id']}/members", {"email": "x@acme.example"}),
        (f"/departments/{department['id']}/delete", {}),
    ]:
        assert ada.post(path, {**data, "csrf_token": token}).status_code == 404, path
    # Their employee is no member or head for us either.
    ours = ada.post("/departments", {"name": "Ours", "head": theirs["email"], "csrf_token": token})
    assert ours.status_code == 422
    assert other_api.get(f"/client/employees/{theirs['id']}").json()["data"]["first_name"] == "Gus"
    assert other_api.get(f"/client/departments/{department['id']}").json()["data"]["name"] == "Globex Ops"
    assert "Gus" not in ada.get("/employees").text and "Globex" not in ada.get("/departments").text


@pytest.mark.one_database  # the pages' rules, the same on either database
def test_a_forged_post_changes_nothing(app: FastAPI, engine: Engine, api: Api) -> None:
    jane = add_employee(api, "Jane", "Doe")
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    forged = ada.post(f"/employees/{jane['id']}", form(first_name="Forged"))
    assert forged.status_code == 403
    cross_site = ada.post(
        f"/employees/{jane['id']}/delete",
        {"csrf_token": ada.csrf()},
        headers={"Sec-Fetch-Site": "cross-site"},
    )
    assert cross_site.status_code == 403
    assert api.get(f"/client/employees/{jane['id']}").json()["data"]["first_name"] == "Jane"


@pytest.mark.one_database  # the pages' rules, the same on either database
def test_names_like_scripts_show_as_text(app: FastAPI, engine: Engine, api: Api) -> None:
    name = "<script>alert(1)</script>"
    employee = add_employee(api, name, "Doe", email="script@acme.example")
    department = api.post("/client/departments", json={"name": name, "member_ids": [employee["id"]]}).json()
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    for path in (
        "/employees",
        f"/employees/{employee['id']}",
        f"/employees/{employee['id']}/edit",
        "/departments",
        f"/departments/{department['data']['id']}",
        "/activity",
    ):
        text = ada.get(path).text
        assert name not in text, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text or "\\u003cscript\\u003e" in text, path


@pytest.mark.one_database  # the body limit is the middleware's, the same on either database
def test_the_import_form_takes_files_over_the_pages_1_mib(app: FastAPI, engine: Engine, api: Api) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    header = "first_name,last_name,email,country_id,phone,address\n"
    rows = "".join(
        f"Person,N{n},p{n}@acme.example,NG,+234 801 234 5678,1 Marina Road Lagos\n" for n in range(20_000)
    )
    assert len(header + rows) > 1024 * 1024
    files = {"file": ("people.csv", (header + rows).encode(), "text/csv")}
    checked = ada.post(
        "/employees/import", {"csrf_token": ada.csrf("/employees/import"), "dry_run": "1"}, files=files
    )
    assert checked.status_code == 422 and "10,000" in checked.text  # the importer's own limit, not a 413
    assert employee_count(api) == 0
