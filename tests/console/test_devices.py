"""The devices pages through HTTP: cursor pages and columns from the URL, the CSV export equal to
the API's, bulk actions (preview counts and refusals per row, then apply, recorded under the
user's name; nothing changed when refused), registering one device and the CSV import, tenancy
and viewers."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import Engine

from tests.console.conftest import form_token, sign_up
from tests.factories import Api

LINK = re.compile(r'<a href="/console/devices/([0-9a-f-]{36})">([^<]+)</a>')
ACTOR = "console:ada@example.com"


def register(api: Api, *bodies: dict[str, Any]) -> list[dict[str, Any]]:
    devices = []
    for body in bodies:
        answer = api.post("/client/equipment", json=body)
        assert answer.status_code == 201, answer.text
        devices.append(answer.json()["data"])
    return devices


def status_of(api: Api, device: dict[str, Any]) -> str:
    status: str = api.get(f"/client/equipment/{device['id']}").json()["data"]["status"]
    return status


def test_cursor_pages_keep_the_filter_and_go_back_and_forth(app: FastAPI, engine: Engine, api: Api) -> None:
    register(api, *({"title": f"Mouse {n:02}", "status": "In_Storage"} for n in range(30)))
    register(api, {"title": "Desk phone", "status": "Unassigned"})
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    first = ada.get("/devices", params={"status": "In_Storage", "sort": "name"})
    assert [title for _, title in LINK.findall(first.text)] == [f"Mouse {n:02}" for n in range(25)]
    assert 'id="result-count">(30)<' in first.text and 'rel="prev"' not in first.text
    next_link = re.search(r'<a rel="next" href="([^"]+)"', first.text).group(1).replace("&amp;", "&")  # type: ignore[union-attr]
    assert next_link.startswith("/console/devices?status=In_Storage&sort=name&after=")
    second = ada.client.get(next_link)
    assert [title for _, title in LINK.findall(second.text)] == [f"Mouse {n:02}" for n in range(25, 30)]
    assert 'rel="next"' not in second.text and 'id="result-count">(30)<' in second.text
    back = re.search(r'<a rel="prev" href="([^"]+)"', second.text).group(1).replace("&amp;", "&")  # type: ignore[union-attr]
    again = ada.client.get(back)
    assert [title for _, title in LINK.findall(again.text)] == [f"Mouse {n:02}" for n in range(25)]
    assert 'rel="prev"' not in again.text and 'rel="next"' in again.text
    # A cursor made for another filter is set aside with a message: the first page of this one.
    after = next_link.split("after=")[1]
    other = ada.get("/devices", params={"status": "Unassigned", "after": after})
    assert "made for other filters" in other.text and "Desk phone" in other.text
    assert ada.get("/devices", params={"after": "garbage"}).status_code == 200


def test_the_heading_counts_up_to_a_cap(
    app: FastAPI, engine: Engine, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The count stops at the cap, so a heading over a million devices costs what a page does.
    monkeypatch.setattr("outfitter.console.devices.COUNT_CAP", 4)
    register(api, *({"title": f"Cable {n}", "status": "In_Storage"} for n in range(6)))
    register(api, {"title": "Desk phone", "status": "Unassigned"})
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    many = ada.get("/devices", params={"status": "In_Storage"})
    assert 'id="result-count">(4+)<' in many.text and "All 4+ devices matching" in many.text
    assert len(LINK.findall(many.text)) == 6
    one = ada.get("/devices", params={"status": "Unassigned"})
    assert 'id="result-count">(1)<' in one.text


def test_columns_are_chosen_in_the_url(app: FastAPI, engine: Engine, api: Api) -> None:
    register(
        api,
        {"title": "MacBook", "make": "Apple", "model": "M3", "purchase_price": "1999.00", "currency": "USD"},
    )
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    default = ada.get("/devices").text
    assert '<th scope="col">Serial number</th>' in default and '<th scope="col">Price</th>' not in default
    chosen = ada.get("/devices", params=[("cols", "make"), ("cols", "price")]).text
    headings = re.findall(r'<th scope="col">([^<]+)</th>', chosen)
    assert headings == ["Name", "Make and model", "Price"]
    assert "<td>Apple M3</td>" in chosen and "<td>USD 1999.00</td>" in chosen
    assert '<input type="checkbox" name="cols" value="price" checked>' in chosen
    # The pager's and the export's links keep the view.
    assert re.search(r'href="/console/devices/export\?"', chosen)


def test_the_export_is_the_apis_for_the_same_filter(app: FastAPI, engine: Engine, api: Api) -> None:
    register(
        api,
        {"title": "=cmd()", "status": "In_Storage", "serial_number": "X-1"},
        {"title": "Phone", "type": "Phones", "status": "In_Storage"},
        {"title": "Other", "status": "Unassigned"},
    )
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    shown = ada.get("/devices", params={"status": "In_Storage"}).text
    link = re.search(r'href="(/console/devices/export\?[^"]+)"', shown).group(1).replace("&amp;", "&")  # type: ignore[union-attr]
    exported = ada.client.get(link)
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("text/csv")
    assert exported.headers["content-disposition"].startswith('attachment; filename="equipment-')
    theirs = api.get("/client/equipment/export", status="In_Storage")
    assert exported.text == theirs.text and exported.text.count("\r\n") == 3
    assert "'=cmd()" in exported.text  # escaped as the API's


def test_a_bulk_move_previews_counts_and_refusals_then_applies_as_the_user(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    storage, spare, sold = register(
        api,
        {"title": "In storage", "status": "In_Storage"},
        {"title": "Spare", "status": "Unassigned"},
        {"title": "Gone", "status": "Unassigned"},
    )
    assert api.patch(f"/client/equipment/{sold['id']}", json={"status": "Sold"}).status_code == 200
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    token = ada.csrf("/devices")
    fields = {
        "csrf_token": token,
        "action": "In_Storage",
        "scope": "selected",
        "id": [storage["id"], spare["id"], sold["id"]],
    }
    preview = ada.client.post("/console/devices/bulk", data={**fields, "step": "preview"})
    assert preview.status_code == 200, preview.text
    assert re.search(r'id="bulk-count">1 device will change<', preview.text)
    assert 'id="bulk-refused-count">2 cannot' in preview.text
    refused = re.findall(
        r'<tr>\s*<td><a href="/console/devices/([^"]+)">[^<]+</a></td>\s*'
        r"<td>([^<]*)</td>\s*<td>([^<]+)</td>",
        preview.text,
    )
    assert {(device, status) for device, status, _ in refused} == {
        (storage["id"], "In Storage"),
        (sold["id"], "Sold"),
    }
    assert all("cannot move from" in reason for _, _, reason in refused)
    assert [status_of(api, d) for d in (storage, spare, sold)] == ["In_Storage", "Unassigned", "Sold"]

    expect = re.search(r'name="expect" value="([^"]+)"', preview.text).group(1)  # type: ignore[union-attr]
    applied = ada.client.post(
        "/console/devices/bulk",
        data={**fields, "step": "apply", "expect": expect},
    )
    assert applied.status_code == 303 and applied.headers["location"].endswith("moved=1&to=In_Storage")
    assert [status_of(api, d) for d in (storage, spare, sold)] == ["In_Storage", "In_Storage", "Sold"]
    events = api.get("/client/events", type="equipment.moved_to_storage", subject_id=spare["id"]).json()[
        "data"
    ]["data"]
    assert [event["actor"] for event in events] == [ACTOR]
    shown = ada.client.get(applied.headers["location"]).text
    assert 'id="bulk-done">1 device moved to In Storage.' in shown


def test_all_matching_the_filter_and_a_changed_set_is_previewed_again(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    phones = register(
        api, *({"title": f"Phone {n}", "type": "Phones", "status": "Unassigned"} for n in range(3))
    )
    laptop = register(api, {"title": "Laptop", "type": "Laptop", "status": "Unassigned"})[0]
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    token = ada.csrf("/devices")
    fields = {"csrf_token": token, "action": "Archived", "scope": "matching", "view": "type=Phones"}
    preview = ada.post("/devices/bulk", {**fields, "step": "preview"})
    assert re.search(r'id="bulk-count">3 devices will change<', preview.text) and "cannot" not in preview.text
    expect = re.search(r'name="expect" value="([^"]+)"', preview.text).group(1)  # type: ignore[union-attr]
    # Another phone arrives before Apply: nothing moves, the preview is shown again with 4.
    late = register(api, {"title": "Phone late", "type": "Phones", "status": "Unassigned"})[0]
    stale = ada.post("/devices/bulk", {**fields, "step": "apply", "expect": expect})
    assert stale.status_code == 409 and 'id="bulk-notice"' in stale.text
    assert re.search(r'id="bulk-count">4 devices will change<', stale.text)
    assert [status_of(api, d) for d in (*phones, late)] == ["Unassigned"] * 4
    expect = re.search(r'name="expect" value="([^"]+)"', stale.text).group(1)  # type: ignore[union-attr]
    applied = ada.post("/devices/bulk", {**fields, "step": "apply", "expect": expect})
    assert applied.status_code == 303, applied.text
    assert [status_of(api, d) for d in (*phones, late)] == ["Archived"] * 4
    assert status_of(api, laptop) == "Unassigned"
    archived = api.get("/client/events", type="equipment.archived").json()["data"]["data"]
    assert sorted(e["subject_id"] for e in archived) == sorted(d["id"] for d in (*phones, late))
    assert {e["actor"] for e in archived} == {ACTOR}


def test_a_bulk_assign_picks_an_employee(app: FastAPI, engine: Engine, api: Api) -> None:
    employee = api.post(
        "/client/employees",
        json={
            "first_name": "Grace",
            "last_name": "Hopper",
            "email": "grace@example.com",
            "phone": "+2348012345678",
            "country_id": "NG",
            "address": "1 Navy Way",
        },
    )
    assert employee.status_code == 201, employee.text
    grace = employee.json()["data"]
    devices = register(api, *({"title": f"Laptop {n}", "status": "In_Storage"} for n in range(2)))
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    token = ada.csrf("/devices")
    base = {"csrf_token": token, "action": "Assigned", "scope": "selected", "id": [d["id"] for d in devices]}
    asked = ada.client.post("/console/devices/bulk", data={**base, "step": "preview"})
    assert asked.status_code == 200 and 'id="bulk-count"' not in asked.text  # first, who
    assert f'<option value="{grace["id"]}" >Grace Hopper &lt;grace@example.com&gt;</option>' in asked.text
    found = ada.client.post(
        "/console/devices/bulk",
        data={**base, "step": "preview", "find": "1", "assignee_q": "nobody-like-this"},
    )
    assert "Grace Hopper" not in found.text
    preview = ada.client.post(
        "/console/devices/bulk",
        data={**base, "step": "preview", "assignee_id": grace["id"]},
    )
    assert re.search(r'id="bulk-count">2 devices will change<', preview.text)
    expect = re.search(r'name="expect" value="([^"]+)"', preview.text).group(1)  # type: ignore[union-attr]
    applied = ada.client.post(
        "/console/devices/bulk",
        data={**base, "step": "apply", "assignee_id": grace["id"], "expect": expect},
    )
    assert applied.status_code == 303
    for device in devices:
        answer = api.get(f"/client/equipment/{device['id']}").json()["data"]
        assert answer["status"] == "Assigned" and answer["assignee"]["id"] == grace["id"]
        assert answer["history"][-1]["actor"] == ACTOR


def test_bulk_refuses_another_companys_devices_and_viewers(
    app: FastAPI, engine: Engine, api: Api, other_api: Api
) -> None:
    mine = register(api, {"title": "Mine", "status": "Unassigned"})[0]
    theirs = register(other_api, {"title": "Globex laptop", "status": "Unassigned"})[0]
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    token = ada.csrf("/devices")
    fields = {"csrf_token": token, "action": "Sold", "scope": "selected", "id": [mine["id"], theirs["id"]]}
    preview = ada.client.post("/console/devices/bulk", data={**fields, "step": "preview"})
    assert re.search(r'id="bulk-count">1 device will change<', preview.text)
    assert "Unknown equipment" in preview.text and "Globex" not in preview.text
    expect = re.search(r'name="expect" value="([^"]+)"', preview.text).group(1)  # type: ignore[union-attr]
    ada.client.post("/console/devices/bulk", data={**fields, "step": "apply", "expect": expect})
    assert status_of(api, mine) == "Sold" and status_of(other_api, theirs) == "Unassigned"
    only_theirs = {"csrf_token": token, "action": "Sold", "scope": "selected", "id": theirs["id"]}
    refused = ada.client.post("/console/devices/bulk", data={**only_theirs, "step": "apply", "expect": "x"})
    assert refused.status_code == 409 and "nothing changed" in refused.text
    assert status_of(other_api, theirs) == "Unassigned"

    viewer = sign_up(app, engine, api.company_id, "vera@example.com", role="viewer")
    page = viewer.get("/devices")
    assert page.status_code == 200 and "bulk-form" not in page.text and "Register a device" not in page.text
    viewer_token = form_token(page)
    other = register(api, {"title": "Other", "status": "Unassigned"})[0]
    for path, data in (
        ("/devices/bulk", {"action": "Sold", "scope": "selected", "id": other["id"], "step": "apply"}),
        ("/devices/new", {"title": "Sneaky"}),
    ):
        answer = viewer.post(path, {**data, "csrf_token": viewer_token})
        assert answer.status_code == 403 and "Only an admin" in answer.text
    assert viewer.get("/devices/new").status_code == 403 and viewer.get("/devices/import").status_code == 403
    assert status_of(api, other) == "Unassigned"
    assert api.get("/client/equipment", q="Sneaky").json()["data"]["total"] == 0
    forged = ada.post(
        "/devices/bulk", {"action": "Sold", "scope": "selected", "id": other["id"], "csrf_token": "x"}
    )
    assert forged.status_code == 403 and status_of(api, other) == "Unassigned"


def test_registering_a_device_checks_as_the_api_and_says_why_beside_the_field(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    register(api, {"title": "Old", "serial_number": "TAKEN-1"})
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    form = ada.get("/devices/new")
    token = form_token(form)
    bad = ada.post(
        "/devices/new",
        {"csrf_token": token, "title": " ", "year": "20x4", "purchase_price": "-3", "country": "Atlantis"},
    )
    assert bad.status_code == 422
    for field in ("title", "year", "purchase_price"):
        assert f'id="{field}-error"' in bad.text, field
    assert 'value="20x4"' in bad.text  # what was typed stays
    unknown = ada.post("/devices/new", {"csrf_token": token, "title": "Laptop", "country": "Atlantis"})
    assert unknown.status_code == 422 and 'id="country-error"' in unknown.text
    taken = ada.post("/devices/new", {"csrf_token": token, "title": "Laptop", "serial_number": "TAKEN-1"})
    assert (
        taken.status_code == 409
        and 'id="serial_number-error"' in taken.text
        and "already exists" in taken.text
    )
    assigned = ada.post("/devices/new", {"csrf_token": token, "title": "Laptop", "status": "Assigned"})
    assert assigned.status_code == 422 and 'id="assignee_id-error"' in assigned.text
    assert api.get("/client/equipment", q="Laptop").json()["data"]["total"] == 0

    made = ada.post(
        "/devices/new",
        {
            "csrf_token": token,
            "title": "ThinkPad X1",
            "serial_number": "TP-1",
            "type": "Laptop",
            "state": "Used",
            "year": "2023",
            "purchase_date": "2024-02-01",
            "purchase_price": "1450.50",
            "currency": "EUR",
            "country": "NG",
            "specs.memory": "32GB",
            "status": "In_Storage",
        },
    )
    assert made.status_code == 303, made.text
    device_id = made.headers["location"].split("/")[-1].split("?")[0]
    answer = api.get(f"/client/equipment/{device_id}").json()["data"]
    assert (answer["title"], answer["status"], answer["purchase_price"], answer["specs"]["memory"]) == (
        "ThinkPad X1",
        "In_Storage",
        "1450.50",
        "32GB",
    )
    assert answer["country_code"] == "NG" and answer["currency"]["code"] == "EUR"
    assert {entry["actor"] for entry in answer["history"]} == {ACTOR}
    added = api.get("/client/events", type="equipment.added", subject_id=device_id).json()["data"]["data"]
    assert [event["actor"] for event in added] == [ACTOR]


CSV_WITH_AN_ERROR = (
    "title,serial_number,type,status,country\n"
    "MacBook Pro,IMP-1,Laptop,In_Storage,NG\n"
    "iPhone,IMP-2,Phones,Lost,NG\n"
    "Pixel,IMP-3,Phones,Unassigned,Atlantis\n"
)


def test_the_csv_import_checks_then_imports_with_errors_by_row(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    token = form_token(ada.get("/devices/import"))

    def send(text: str, mode: str, **headers: str) -> Any:
        return ada.client.post(
            "/console/devices/import",
            data={"csrf_token": token, "mode": mode},
            files={"file": ("devices.csv", text.encode(), "text/csv")},
            headers=headers,
        )

    checked = send(CSV_WITH_AN_ERROR, "check")
    assert checked.status_code == 422, checked.text[-1500:]
    rows = re.findall(r"<tr><td>([^<]+)</td><td>([^<]*)</td><td>([^<]+)</td></tr>", checked.text)
    assert [(line, column) for line, column, _ in rows] == [("3", "status"), ("4", "country")]
    imported = send(CSV_WITH_AN_ERROR, "import")  # all or nothing
    assert imported.status_code == 422 and api.get("/client/equipment", q="IMP-").json()["data"]["total"] == 0

    good = CSV_WITH_AN_ERROR.replace(",Lost,", ",Unassigned,").replace("Atlantis", "KE")
    dry = send(good, "check")
    assert dry.status_code == 200 and "3 devices would be registered" in dry.text
    assert api.get("/client/equipment", q="IMP-").json()["data"]["total"] == 0
    streamed = send(good, "import", **{"X-Console-Progress": "stream"})
    assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/plain")
    lines = streamed.text.split("\n")
    assert lines[0] == "total 4" and "progress 3" in lines and "result" in lines
    assert "3 devices registered" in streamed.text
    listed = api.get("/client/equipment", q="IMP-").json()["data"]
    assert listed["total"] == 3
    added = api.get("/client/events", type="equipment.added").json()["data"]["data"]
    assert {event["actor"] for event in added} == {ACTOR}
    nothing = ada.client.post("/console/devices/import", data={"csrf_token": token, "mode": "check"})
    assert nothing.status_code == 422 and "Choose a CSV file" in nothing.text
