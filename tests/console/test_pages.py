"""The console's pages through HTTP: what they show equals the API's answers, tenancy, escaping,
and the changes they make recorded under the user's name."""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI
from sqlalchemy import Engine

from tests.console.conftest import Browser, form_token, sign_up
from tests.factories import Api

FIGURE = re.compile(r'<td data-figure="([^"]+)">(\d+)</td>')


def add_devices(api: Api) -> list[dict[str, object]]:
    bodies = [
        {"title": "MacBook Pro 14", "type": "Laptop", "status": "In_Storage", "serial_number": "MBP-1"},
        {"title": "MacBook Air", "type": "Laptop", "status": "Unassigned", "serial_number": "MBA-1"},
        {"title": "Dell Precision", "type": "Workstation", "status": "In_Storage", "serial_number": "DP-1"},
        {"title": "iPhone 15", "type": "Phones", "status": "Unassigned", "serial_number": "IP-1"},
        {"title": "iPad", "type": "Tablet", "status": "In_Storage", "serial_number": "IPAD-1"},
        {"title": "Cable", "status": "Unassigned", "serial_number": "CB-1"},
    ]
    devices = []
    for body in bodies:
        answer = api.post("/client/equipment", json=body)
        assert answer.status_code == 201, answer.text
        devices.append(answer.json()["data"])
    sold = devices[3]["id"]
    assert api.patch(f"/client/equipment/{sold}", json={"status": "Sold"}).status_code == 200
    return devices


def api_total(api: Api, **filters: str) -> int:
    total: int = api.get("/client/equipment", **filters).json()["data"]["total"]
    return total


def test_dashboard_figures_equal_the_apis(app: FastAPI, engine: Engine, api: Api) -> None:
    add_devices(api)
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    page = ada.get("/")
    assert page.status_code == 200
    shown = dict(FIGURE.findall(page.text))
    assert int(re.search(r'id="devices-total">(\d+)<', page.text).group(1)) == api_total(api)  # type: ignore[union-attr]
    for status in ("Assigned", "Unassigned", "In_Storage", "Sold"):
        assert int(shown[status.replace("_", " ")]) == api_total(api, status=status), status
    for kind in ("Laptop/Workstation", "Phones", "Tablet", "Accessories"):
        assert int(shown[kind]) == api_total(api, type=kind), kind
    assert int(shown["Other or none"]) == 1  # the cable
    orders = api.get("/client/orders", status="in_progress", kind="purchase").json()["data"]["total"]
    assert int(shown["Purchase"]) == orders
    # Each tile links to the list it counts, and the chart is an image named by its caption.
    assert '<a href="/console/devices?status=In_Storage">In Storage</a>' in page.text
    assert 'role="img" aria-labelledby="by-status-caption"' in page.text
    assert "equipment.sold" in page.text  # recent activity


def test_devices_list_filters_search_sort_and_pages_from_the_url(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    add_devices(api)
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    page = ada.get("/devices", params={"status": "In_Storage", "sort": "name", "per_page": "25"})
    titles = re.findall(r'<a href="/console/devices/[0-9a-f-]{36}">([^<]+)</a>', page.text)
    assert titles == ["Dell Precision", "iPad", "MacBook Pro 14"] or titles == sorted(titles)
    assert {t for t in titles} == {"Dell Precision", "iPad", "MacBook Pro 14"}
    assert 'id="result-count">(3)<' in page.text
    assert '<option value="In_Storage" selected>' in page.text  # the form shows the view
    searched = ada.get("/devices", params={"q": "macbook"})
    assert re.findall(
        r'<a href="/console/devices/[0-9a-f-]{36}">([^<]+)</a>', searched.text
    ).__len__() == api_total(api, q="macbook")
    # An unknown value is set aside with a message beside its field, never a 500.
    odd = ada.get("/devices", params={"status": "Lost", "country": "Atlantis", "page": "x"})
    assert odd.status_code == 200
    assert "Choose a status from the list." in odd.text and 'id="country-error"' in odd.text


def test_a_device_page_shows_its_history_and_a_move_is_an_event_by_the_user(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    device = add_devices(api)[0]
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    page = ada.get(f"/devices/{device['id']}")
    assert page.status_code == 200 and 'id="timeline"' in page.text and "equipment added" in page.text
    moved = ada.post(f"/devices/{device['id']}/status", {"status": "Sold", "csrf_token": form_token(page)})
    assert (
        moved.status_code == 303 and moved.headers["location"] == f"/console/devices/{device['id']}?saved=1"
    )
    answer = api.get(f"/client/equipment/{device['id']}").json()["data"]
    assert answer["status"] == "Sold" and answer["history"][-1]["actor"] == "console:ada@example.com"
    events = api.get("/client/events", type="equipment.sold", subject_id=device["id"]).json()["data"]["data"]
    assert [(e["subject_id"], e["actor"]) for e in events] == [(device["id"], "console:ada@example.com")]
    shown = ada.get(f"/devices/{device['id']}?saved=1").text
    assert "sold" in shown and "by console:ada@example.com" in shown

    # A move the status table refuses: the reason beside the field, nothing changed.
    refused = ada.post(
        f"/devices/{device['id']}/status", {"status": "In_Storage", "csrf_token": form_token(page)}
    )
    assert refused.status_code == 409 and 'id="move-error"' in refused.text
    assert api.get(f"/client/equipment/{device['id']}").json()["data"]["status"] == "Sold"


def _employee(api: Api, first: str, email: str) -> dict[str, Any]:
    body = {"first_name": first, "last_name": "Tester", "email": email, "phone": "+2348012345678"}
    answer = api.post("/client/employees", json={**body, "country_id": "NG", "address": "1 Main St"})
    assert answer.status_code == 201, answer.text
    employee: dict[str, Any] = answer.json()["data"]
    return employee


def test_the_device_page_assigns_and_reassigns_to_an_employee(
    app: FastAPI, engine: Engine, api: Api, other_api: Api
) -> None:
    device = api.post("/client/equipment", json={"title": "ThinkPad", "status": "In_Storage"}).json()["data"]
    grace = _employee(api, "Grace", "grace@example.com")
    alan = _employee(api, "Alan", "alan@example.com")
    stranger = _employee(other_api, "Wanda", "wanda@example.com")
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    page = ada.get(f"/devices/{device['id']}")
    assert 'id="assign-heading">Assign to an employee<' in page.text
    assert "Grace Tester &lt;grace@example.com&gt;" in page.text and "Wanda" not in page.text
    token = form_token(page)
    # No one chosen, or another company's employee: said beside the picker, nothing changed.
    empty = ada.post(f"/devices/{device['id']}/assign", {"assignee_id": "", "csrf_token": token})
    assert empty.status_code == 422 and 'id="assignee_id-error"' in empty.text
    theirs = ada.post(f"/devices/{device['id']}/assign", {"assignee_id": stranger["id"], "csrf_token": token})
    assert theirs.status_code == 422 and 'id="assignee_id-error"' in theirs.text
    assert api.get(f"/client/equipment/{device['id']}").json()["data"]["status"] == "In_Storage"

    assigned = ada.post(f"/devices/{device['id']}/assign", {"assignee_id": grace["id"], "csrf_token": token})
    assert assigned.status_code == 303
    answer = api.get(f"/client/equipment/{device['id']}").json()["data"]
    assert answer["status"] == "Assigned" and answer["assignee"]["id"] == grace["id"]
    assert answer["history"][-1]["actor"] == "console:ada@example.com"
    again = ada.get(f"/devices/{device['id']}")
    assert 'id="assign-heading">Reassign<' in again.text
    ada.post(f"/devices/{device['id']}/assign", {"assignee_id": alan["id"], "csrf_token": token})
    assert api.get(f"/client/equipment/{device['id']}").json()["data"]["assignee"]["id"] == alan["id"]
    # Sold devices are assigned to nobody: no form.
    ada.post(f"/devices/{device['id']}/status", {"status": "In_Storage", "csrf_token": token})
    ada.post(f"/devices/{device['id']}/status", {"status": "Sold", "csrf_token": token})
    assert 'id="assign-heading"' not in ada.get(f"/devices/{device['id']}").text


def test_another_companys_records_are_404_by_url(
    app: FastAPI, engine: Engine, api: Api, other_api: Api
) -> None:
    theirs = other_api.post("/client/equipment", json={"title": "Globex laptop", "status": "In_Storage"})
    theirs_id = theirs.json()["data"]["id"]
    ada: Browser = sign_up(app, engine, api.company_id, "ada@example.com")
    page = ada.get(f"/devices/{theirs_id}")
    assert page.status_code == 404 and "Globex laptop" not in page.text
    assert ada.get("/devices/not-an-id").status_code == 404
    token = ada.csrf()
    moved = ada.post(f"/devices/{theirs_id}/status", {"status": "Sold", "csrf_token": token})
    assert moved.status_code == 404
    assigned = ada.post(f"/devices/{theirs_id}/assign", {"assignee_id": "", "csrf_token": token})
    assert assigned.status_code == 404
    assert other_api.get(f"/client/equipment/{theirs_id}").json()["data"]["status"] == "In_Storage"
    assert "Globex laptop" not in ada.get("/devices").text and "Globex laptop" not in ada.get("/").text


def test_a_device_named_like_a_script_shows_as_text(app: FastAPI, engine: Engine, api: Api) -> None:
    name = "<script>alert(1)</script>"
    device = api.post("/client/equipment", json={"title": name, "status": "In_Storage"}).json()["data"]
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    for path in ("/devices", f"/devices/{device['id']}", "/"):
        text = ada.get(path).text
        assert name not in text, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text, path
