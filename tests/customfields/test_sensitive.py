"""Sensitive fields: written like any other, left out of every answer, filter, export and webhook,
and read only with the custom_fields:sensitive scope."""

from __future__ import annotations

import csv
import io

from sqlalchemy.orm import Session

from outfitter.config import Settings
from tests.customfields.helpers import define, device
from tests.factories import Api, CompanyFactory, assert_error
from tests.webhooks.conftest import deliveries, private_ok, register, webhook_settings  # noqa: F401

PIN = "8841"


def test_a_sensitive_value_is_kept_out_of_answers_exports_and_webhooks(
    api: Api,
    companies: CompanyFactory,
    db: Session,
    private_ok: Settings,  # noqa: F811
) -> None:
    register(api, "http://127.0.0.1:9/hook")
    define(api, "imei")
    define(api, "unlock_pin", sensitive=True)
    made = device(api, custom_fields={"imei": "111", "unlock_pin": PIN})
    assert made["custom_fields"] == {"imei": "111"}
    assert api.get(f"/client/equipment/{made['id']}").json()["data"]["custom_fields"] == {"imei": "111"}
    assert PIN not in api.get("/client/equipment").text
    assert PIN not in api.get("/client/events").text

    exported = api.get("/client/equipment/export")
    header = next(csv.reader(io.StringIO(exported.text)))
    assert header[-1] == "custom_fields.imei" and PIN not in exported.text
    sent = deliveries(db)
    assert {delivery.event_type for delivery in sent} == {"equipment.added", "custom_field.created"}
    assert all(PIN not in str(delivery.payload) for delivery in sent)
    added = next(delivery for delivery in sent if delivery.event_type == "equipment.added")
    assert '"imei"' in str(added.payload).replace("'", '"')

    # Asking for them needs the scope: 403 without it, the values with it.
    assert_error(
        api.get("/client/equipment/export", include_sensitive="true"), 403, "custom_fields:sensitive"
    )
    assert_error(api.get(f"/client/equipment/{made['id']}/sensitive-fields"), 403, "custom_fields:sensitive")
    trusted = companies.token(api, ["read", "custom_fields:sensitive"])
    rows = list(
        csv.DictReader(io.StringIO(trusted.get("/client/equipment/export", include_sensitive="true").text))
    )
    assert rows[0]["custom_fields.unlock_pin"] == PIN and rows[0]["custom_fields.imei"] == "111"
    values = trusted.get(f"/client/equipment/{made['id']}/sensitive-fields").json()["data"]
    assert values == {"id": made["id"], "sensitive_fields": {"unlock_pin": PIN}}


def test_sensitive_values_are_walled_off_between_companies(companies: CompanyFactory) -> None:
    mine = companies.create("Mine", ["read", "write", "custom_fields:sensitive"])
    theirs = companies.create("Theirs", ["read", "write", "custom_fields:sensitive"])
    define(mine, "unlock_pin", sensitive=True)
    made = device(mine, custom_fields={"unlock_pin": PIN})
    assert_error(theirs.get(f"/client/equipment/{made['id']}/sensitive-fields"), 404, "Equipment not found")
    assert_error(theirs.get("/client/equipment/not-an-id/sensitive-fields"), 404)
