"""Custom fields of employees through HTTP: create, patch, bulk, the CSV import and export, the
list's filters, and sensitive values kept out of answers and exports."""

from __future__ import annotations

import csv
import io
from typing import Any

from tests.customfields.helpers import define, errors_of
from tests.factories import Api, CompanyFactory, assert_error


def person(index: int, **extra: Any) -> dict[str, Any]:
    return {
        "first_name": f"Ada{index}",
        "last_name": "Obi",
        "email": f"ada{index}@example.com",
        "country_id": "NG",
        "phone": "+234 801 234 5678",
        "address": "1 Marina",
        **extra,
    }


def test_employee_values_are_checked_written_filtered_and_exported(
    api: Api, companies: CompanyFactory
) -> None:
    define(api, "badge", "number", entity="employee", required=True, minimum=1)
    define(api, "shirt", "choice", entity="employee", choices=["S", "M", "L"], default="M")
    define(api, "passport", entity="employee", sensitive=True)
    errors = errors_of(api.post("/client/employees", person(1, custom_fields={"badge": 0, "imei": "1"})))
    assert errors == {
        "custom_fields.badge": ["Must be 1 or more."],
        "custom_fields.imei": ["No custom field 'imei' is defined for employees."],
    }
    created = api.post("/client/employees", person(1, custom_fields={"badge": 7, "passport": "A123"}))
    assert created.status_code == 201, created.text
    employee = created.json()["data"]
    assert employee["custom_fields"] == {"badge": 7, "shirt": "M"}  # the default; the passport left out
    changed = api.patch(f"/client/employees/{employee['id']}", {"custom_fields": {"shirt": "L"}})
    assert changed.json()["data"]["custom_fields"] == {"badge": 7, "shirt": "L"}
    assert errors_of(
        api.patch(f"/client/employees/{employee['id']}", {"custom_fields": {"shirt": "XL"}})
    ) == {"custom_fields.shirt": ["'XL' is not one of: S, M, L."]}
    bulk = api.post(
        "/client/employees/bulk",
        {"employees": [person(2, custom_fields={"badge": 8}), person(3, custom_fields={"badge": "x"})]},
    )
    assert errors_of(bulk) == {
        "employees.1.custom_fields.badge": ["Give the number as a JSON integer, not a string."]
    }
    csv_text = (
        "first_name,last_name,email,country_id,phone,address,custom_fields.badge\n"
        "Grace,H,g@example.com,NG,+234 801 000 0000,2 Marina,9\n"
    )
    imported = api.post(
        "/client/employees/import", content=csv_text.encode(), headers={"Content-Type": "text/csv"}
    )
    assert imported.status_code == 200, imported.text

    listed = api.get("/client/employees", cf_badge__gte="8").json()["data"]["data"]
    assert [item["first_name"] for item in listed] == ["Grace"]
    assert [
        item["first_name"] for item in api.get("/client/employees", cf_shirt="L").json()["data"]["data"]
    ] == ["Ada1"]
    assert errors_of(api.get("/client/employees", cf_passport="A123")) == {
        "query.cf_passport": ["Passport is a sensitive field: lists do not filter on it."]
    }
    assert "query.cf_imei" in errors_of(api.get("/client/employees/export", cf_imei="1"))

    exported = api.get("/client/employees/export")
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert {row["first_name"]: row["custom_fields.badge"] for row in rows} == {"Grace": "9", "Ada1": "7"}
    assert "custom_fields.passport" not in rows[0] and "A123" not in exported.text
    assert_error(api.get("/client/employees/export", include_sensitive="true"), 403)
    trusted = companies.token(api, ["read", "custom_fields:sensitive"])
    rows = list(
        csv.DictReader(io.StringIO(trusted.get("/client/employees/export", include_sensitive="true").text))
    )
    assert {row["first_name"]: row["custom_fields.passport"] for row in rows} == {"Grace": "", "Ada1": "A123"}
    values = trusted.get(f"/client/employees/{employee['id']}/sensitive-fields").json()["data"]
    assert values["sensitive_fields"] == {"passport": "A123"}
