"""Booleans are strict (issue 16 item 21): a JSON body takes true or false only, never "yes", 0 or
"true"; a query parameter takes `true` or `false` only. Anything else is a 422 naming the field,
and nothing changes."""

from __future__ import annotations

from typing import Any

import pytest

from outfitter.config import Settings
from tests.factories import Api, assert_error
from tests.webhooks.conftest import register
from tests.webhooks.receiver import Receiver


@pytest.mark.one_database
@pytest.mark.parametrize("value", ["yes", "true", "false", 0, 1, "1", "on", None, 1.0])
def test_enabled_takes_json_booleans_only(
    api: Api, private_ok: Settings, receiver: Receiver, value: Any
) -> None:
    endpoint = register(api, receiver.url)
    response = api.patch(f"/client/webhook-endpoints/{endpoint['id']}", {"enabled": value})
    assert list(assert_error(response, 422)["errors"]) == ["enabled"]
    after = api.get(f"/client/webhook-endpoints/{endpoint['id']}").json()["data"]
    assert after["enabled"] is True and after["updated_at"] == endpoint["updated_at"]


@pytest.mark.one_database
@pytest.mark.parametrize("value", [False, True])
def test_enabled_takes_true_and_false(
    api: Api, private_ok: Settings, receiver: Receiver, value: bool
) -> None:
    endpoint = register(api, receiver.url)
    response = api.patch(f"/client/webhook-endpoints/{endpoint['id']}", {"enabled": value})
    assert response.status_code == 200, response.text
    assert response.json()["data"]["enabled"] is value


CSV = (
    "first_name,last_name,email,country_id,phone,address,job_title\n"
    "Ada,Lovelace,ada@acme.io,NG,+2348012345678,1 Marina Lagos,Engineer\n"
)


def employees(api: Api) -> int:
    total: int = api.get("/client/employees").json()["data"]["total"]
    return total


def _import(api: Api, query: str) -> Any:
    return api.request(
        "POST", f"/client/employees/import?{query}", content=CSV, headers={"Content-Type": "text/csv"}
    )


@pytest.mark.one_database
@pytest.mark.parametrize("value", ["yes", "1", "0", "on", "off", "no", "True", "t", ""])
def test_a_query_boolean_takes_true_or_false_only(api: Api, value: str) -> None:
    response = _import(api, f"dry_run={value}")
    assert assert_error(response, 422)["errors"] == {"query.dry_run": ["Expected true or false."]}
    assert employees(api) == 0


@pytest.mark.one_database
def test_a_query_boolean_true_and_false_work(api: Api) -> None:
    dry = _import(api, "dry_run=true")
    assert dry.status_code == 200, dry.text
    assert dry.json()["data"]["dry_run"] is True
    assert employees(api) == 0
    real = _import(api, "dry_run=false")
    assert real.status_code == 200, real.text
    assert real.json()["data"]["dry_run"] is False
    assert employees(api) == 1
