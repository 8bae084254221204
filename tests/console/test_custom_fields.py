"""The custom fields' console pages (no browser): the settings page defines, changes and deletes
fields through the service; a device's and an employee's page show the values, sensitive ones
masked, and save the form as the API's PATCH would; viewers read only."""

from __future__ import annotations

from fastapi import FastAPI
from sqlalchemy import Engine

from tests.console.conftest import sign_up
from tests.customfields.helpers import define, device
from tests.factories import Api
from tests.people.helpers import create_employee

PIN = "4417"


def test_an_admin_defines_changes_and_deletes_fields(app: FastAPI, engine: Engine, api: Api) -> None:
    admin = sign_up(app, engine, api.company_id, "ada@example.com")
    token = admin.csrf("/settings/custom-fields")
    created = admin.post(
        "/settings/custom-fields",
        {"csrf_token": token, "entity": "device", "key": "site", "type": "choice", "label": "Site",
         "choices": "HQ, Lagos", "default": "HQ"},
    )  # fmt: skip
    assert created.status_code == 303, created.text
    (field,) = api.get("/client/custom-fields").json()["data"]["data"]
    assert (field["key"], field["choices"], field["default"]) == ("site", ["HQ", "Lagos"], "HQ")
    refused = admin.post(
        "/settings/custom-fields",
        {"csrf_token": token, "entity": "device", "key": "Bad Key", "type": "text", "label": "X"},
    )
    assert refused.status_code == 422 and "key:" in refused.text
    device(api, "Laptop", custom_fields={"site": "Lagos"})
    narrowed = {"csrf_token": token, "label": "Site", "choices": "HQ"}
    answer = admin.post(f"/settings/custom-fields/{field['id']}", narrowed)
    assert answer.status_code == 409 and "would break" in answer.text
    answer = admin.post(f"/settings/custom-fields/{field['id']}", narrowed | {"migrate": "clear"})
    assert answer.status_code == 303
    assert api.get("/client/equipment").json()["data"]["data"][0]["custom_fields"] == {}
    assert (
        admin.post(f"/settings/custom-fields/{field['id']}/delete", {"csrf_token": token}).status_code == 303
    )
    assert api.get("/client/custom-fields").json()["data"]["total"] == 0
    # Without the form's token nothing happens.
    forged = admin.post(
        "/settings/custom-fields", {"entity": "device", "key": "x", "type": "text", "label": "X"}
    )
    assert forged.status_code == 403


def test_a_device_and_an_employee_show_values_masked_and_save_them(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    define(api, "imei", pattern="[0-9]{15}")
    define(api, "pin", sensitive=True)
    define(api, "badge", "number", entity="employee")
    made = device(api, custom_fields={"imei": "356938035643809", "pin": PIN})
    admin = sign_up(app, engine, api.company_id, "ada@example.com")
    shown = admin.get(f"/devices/{made['id']}")
    assert shown.status_code == 200
    assert "356938035643809" in shown.text and PIN not in shown.text and "••••••" in shown.text
    token = admin.csrf(f"/devices/{made['id']}")
    bad = admin.post(
        f"/devices/{made['id']}/custom-fields", {"csrf_token": token, "cf.imei": "12", "cf.pin": ""}
    )
    assert bad.status_code == 422 and "pattern" in bad.text
    saved = admin.post(
        f"/devices/{made['id']}/custom-fields",
        {"csrf_token": token, "cf.imei": "111111111111111", "cf.pin": ""},
    )
    assert saved.status_code == 303, saved.text
    assert api.get(f"/client/equipment/{made['id']}").json()["data"]["custom_fields"] == {
        "imei": "111111111111111"
    }
    trusted_values = admin.get(f"/devices/{made['id']}").text
    assert PIN not in trusted_values  # the empty sensitive input kept the value, still masked

    employee = create_employee(api)
    page = admin.get(f"/employees/{employee['id']}")
    assert page.status_code == 200 and 'name="cf.badge"' in page.text
    saved = admin.post(f"/employees/{employee['id']}/custom-fields", {"csrf_token": token, "cf.badge": "42"})
    assert saved.status_code == 303, saved.text
    assert api.get(f"/client/employees/{employee['id']}").json()["data"]["custom_fields"] == {"badge": 42}

    viewer = sign_up(app, engine, api.company_id, "vic@example.com", role="viewer")
    assert 'name="cf.imei"' not in viewer.get(f"/devices/{made['id']}").text
    refused = viewer.post(
        f"/devices/{made['id']}/custom-fields", {"csrf_token": viewer.csrf(), "cf.imei": "2"}
    )
    assert refused.status_code == 403
