"""Deactivating (or deleting) a User offboards the employee; with the company's opt-in, a retrieval
of the devices they hold is opened and paid from Credit, or `employee.offboarding_required` is
recorded when Credit cannot pay. One employee event per change, delivered to webhooks."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from outfitter.cli import app as cli
from outfitter.config import get_settings
from tests.factories import Api, assert_error, load_demo_catalog, walk_cursor
from tests.payments.conftest import add_assigned_device, add_credit, add_storage_device, prices
from tests.scim.conftest import Scim, assert_scim_error, user_body

runner = CliRunner()


@pytest.fixture
def operator(monkeypatch: pytest.MonkeyPatch, database_url: str, engine: Engine) -> Iterator[None]:
    monkeypatch.setenv("OUTFITTER_DATABASE_URL", database_url)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def company_set(company_id: uuid.UUID, *options: str) -> dict[str, Any]:
    result = runner.invoke(cli, ["company", "set", str(company_id), *options, "--json"])
    assert result.exit_code == 0, result.stderr
    payload: dict[str, Any] = json.loads(result.stdout)
    return payload


def _hire_with_device(scim: Scim, engine: Engine) -> tuple[str, uuid.UUID]:
    created = scim.post("/Users", user_body("ada@acme.example"))
    assert created.status_code == 201, created.text
    user_id = created.json()["id"]
    with Session(engine, expire_on_commit=False) as db:
        device = add_assigned_device(db, uuid.UUID(user_id))
    return user_id, device


def _events(api: Api) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = api.get("/client/events", per_page=100).json()["data"]["data"]
    return records


def _employee_events(api: Api, user_id: str) -> list[str]:
    return [event["type"] for event in _events(api) if event["subject_id"] == user_id]


def _deactivate(scim: Scim, user_id: str) -> dict[str, Any]:
    response = scim.patch(f"/Users/{user_id}", [{"op": "replace", "path": "active", "value": False}])
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.usefixtures("operator")
def test_company_set_changes_the_scim_settings_and_refuses_bad_values(api: Api) -> None:
    assert company_set(api.company_id, "--scim-offboard-retrieval", "on", "--scim-default-country", "ke") == {
        "id": str(api.company_id),
        "scim_offboard_retrieval": True,
        "scim_default_country": "KE",
    }
    assert company_set(api.company_id, "--scim-default-country", "")["scim_default_country"] is None
    for options, fragment in (
        (("--scim-offboard-retrieval", "maybe"), "takes on or off"),
        (("--scim-default-country", "Atlantis"), "unknown country"),
    ):
        result = runner.invoke(cli, ["company", "set", str(api.company_id), *options])
        assert result.exit_code == 1 and fragment in result.stderr


@pytest.mark.usefixtures("operator")
def test_token_create_with_the_scim_scope_opens_scim_only(api: Api, client: Any) -> None:
    result = runner.invoke(cli, ["token", "create", str(api.company_id), "--scope", "scim", "--json"])
    assert result.exit_code == 0, result.stderr
    issued = json.loads(result.stdout)
    assert issued["scopes"] == ["scim"]
    headers = {"Authorization": f"Bearer {issued['token']}"}
    assert client.get("/scim/v2/Users", headers=headers).status_code == 200
    assert client.get("/api/v2/client/employees", headers=headers).status_code == 403


@pytest.mark.usefixtures("operator")
def test_deactivation_opens_a_retrieval_paid_from_credit(scim: Scim, api: Api, engine: Engine) -> None:
    company_set(api.company_id, "--scim-offboard-retrieval", "on")
    endpoint = api.post("/client/webhook-endpoints", {"url": "https://hooks.acme.example/outfitter"})
    assert endpoint.status_code == 201, endpoint.text
    user_id, device = _hire_with_device(scim, engine)
    with Session(engine) as db:
        add_credit(db, api.company_id, "NGN", "1000000.00")

    assert _deactivate(scim, user_id)["active"] is False

    employee = api.get(f"/client/employees/{user_id}").json()["data"]
    assert employee["status"] == "Offboarded"
    assert [item["equipment_id"] for item in employee["open_retrievals"]] == [str(device)]
    transactions = api.get("/client/transactions").json()["data"]["data"]
    assert [(tx["kind"], tx["payment_method"], tx["status"]) for tx in transactions] == [
        ("offboard", "Credit", "Fulfilled")
    ]
    assert _employee_events(api, user_id) == ["employee.offboarded", "employee.created"]
    deliveries = api.get(
        f"/client/webhook-endpoints/{endpoint.json()['data']['id']}/deliveries", per_page=100
    )
    assert "employee.offboarded" in [item["event_type"] for item in deliveries.json()["data"]["data"]]

    # the same PATCH again changes nothing: no event, no second retrieval
    _deactivate(scim, user_id)
    assert _employee_events(api, user_id) == ["employee.offboarded", "employee.created"]
    assert len(api.get("/client/transactions").json()["data"]["data"]) == 1


@pytest.mark.usefixtures("operator")
def test_without_credit_the_offboarding_is_recorded_as_required(scim: Scim, api: Api, engine: Engine) -> None:
    company_set(api.company_id, "--scim-offboard-retrieval", "on")
    user_id, device = _hire_with_device(scim, engine)

    deleted = scim.delete(f"/Users/{user_id}")
    assert deleted.status_code == 204, deleted.text

    employee = api.get(f"/client/employees/{user_id}").json()["data"]
    assert employee["status"] == "Offboarded"
    assert employee["open_retrievals"] == []
    assert [item["id"] for item in employee["equipment"]] == [str(device)]  # still with them
    assert api.get("/client/transactions").json()["data"]["data"] == []
    assert _employee_events(api, user_id) == ["employee.offboarding_required", "employee.created"]
    required = _events(api)[0]
    assert required["data"]["offboarding"]["equipment_ids"] == [str(device)]
    assert "credit" in required["data"]["offboarding"]["reason"].lower()
    assert required["data"]["status"] == "Offboarded"


def test_without_the_opt_in_deactivation_only_offboards(scim: Scim, api: Api, engine: Engine) -> None:
    user_id, _ = _hire_with_device(scim, engine)
    _deactivate(scim, user_id)
    assert api.get("/client/transactions").json()["data"]["data"] == []
    assert _employee_events(api, user_id) == ["employee.offboarded", "employee.created"]
    # reactivation is an update, and the employee is Active again
    reactivated = scim.patch(f"/Users/{user_id}", [{"op": "replace", "value": {"active": True}}])
    assert reactivated.json()["active"] is True
    assert api.get(f"/client/employees/{user_id}").json()["data"]["status"] == "Active"
    assert _employee_events(api, user_id)[0] == "employee.updated"
    assert_scim_error(
        scim.patch(f"/Users/{user_id}", [{"op": "replace", "path": "active", "value": "x"}]),
        400,
        "invalidValue",
    )


def test_the_sync_feed_reports_an_offboarding_once_and_deleted_only_when_the_record_is_gone(
    scim: Scim, api: Api
) -> None:
    """A User deactivated, or deleted through SCIM, keeps its employee record (status Offboarded):
    one `updated_since` walk gives it once, as the list shows it, `deleted: false`. Deleted later
    through the REST API, it comes once more, as the tombstone of that delete (`deleted: true`)."""
    since = "1970-01-01T00:00:00Z"
    kept, gone = (
        scim.post("/Users", user_body(name)).json()["id"] for name in ("kim@acme.example", "lee@acme.example")
    )
    _deactivate(scim, kept)
    assert scim.delete(f"/Users/{gone}").status_code == 204
    assert api.patch(f"/client/employees/{gone}", {"job_title": "Alumnus"}).status_code == 200

    walked = walk_cursor(api, "/client/employees", updated_since=since, limit=1)
    assert sorted(record["id"] for record in walked) == sorted([kept, gone])
    for record in walked:
        assert record["deleted"] is False and record["status"] == "Offboarded"
        live = api.get(f"/client/employees/{record['id']}").json()["data"]
        assert record == live | {"deleted": False}

    deleted = api.delete(f"/client/employees/{gone}").json()["data"]
    walked = walk_cursor(api, "/client/employees", updated_since=since)
    assert [(record["id"], record["deleted"]) for record in walked] == [(kept, False), (gone, True)]
    assert walked[1] == deleted | {"deleted": True, "updated_at": walked[1]["updated_at"]}
    assert walked[1]["job_title"] == "Alumnus"  # its last state, from the REST delete


def test_nothing_new_goes_to_an_offboarded_employee_until_reactivated(
    scim: Scim, api: Api, engine: Engine
) -> None:
    """An employee the identity provider deactivated has left: buying them a device, shipping one
    from storage, or assigning one to them (alone, in bulk, by a bulk move) is a 422 naming them,
    and nothing is written; reactivated, they take devices again. Their devices can still go back."""
    load_demo_catalog(engine)
    user_id, held = _hire_with_device(scim, engine)
    with Session(engine, expire_on_commit=False) as db:
        stored = add_storage_device(db, api.company_id)
        add_credit(db, api.company_id, "NGN", "50000000")
    spare = api.post("/client/equipment", {"title": "Spare dock", "type": "Accessories"}).json()["data"]["id"]
    pricing = prices(api)[0]["asset_pricing"]["id"]
    _deactivate(scim, user_id)
    refusal = (
        "Ada Lovelace is offboarded (deactivated by your identity provider): reactivate them there first, "
        "or choose another employee."
    )
    buy = {
        "payment_method": "Credit",
        "employee_country_id": "NG",
        "orders": {user_id: [{"asset_pricing_id": pricing, "quantity": 1}]},
    }
    ship = {"payment_method": "Credit", "employee_country_id": "NG", "orders": {user_id: [str(stored)]}}
    before = api.get("/client/equipment", per_page=100).json()["data"]
    for path, body, field in (
        ("/client/transactions/initiate", buy, f"orders.{user_id}"),
        ("/client/transactions/onboard-from-storage/initiate", ship, f"orders.{user_id}"),
        ("/client/equipment", {"title": "New", "status": "Assigned", "assignee_id": user_id}, "assignee_id"),
        (
            "/client/equipment/bulk",
            {"equipment": [{"title": "New", "status": "Assigned", "assignee_id": user_id}]},
            "equipment.0.assignee_id",
        ),
        (
            "/client/equipment/bulk-move",
            {"equipment_ids": [spare], "status": "Assigned", "assignee_id": user_id},
            "assignee_id",
        ),
    ):
        assert assert_error(api.post(path, body), 422)["errors"] == {field: [refusal]}, path
    moved = api.patch(f"/client/equipment/{spare}", {"status": "Assigned", "assignee_id": user_id})
    assert assert_error(moved, 422)["errors"] == {"assignee_id": [refusal]}
    assert api.get("/client/equipment", per_page=100).json()["data"] == before
    assert api.get("/client/transactions").json()["data"]["total"] == 0
    # What they hold still comes back, and an edit of it that keeps them as assignee is no new assignment.
    kept = api.patch(f"/client/equipment/{held}", {"title": "MacBook Pro 14", "assignee_id": user_id})
    assert kept.status_code == 200, kept.text
    assert kept.json()["data"]["assignee"]["id"] == user_id
    reactivated = scim.patch(f"/Users/{user_id}", [{"op": "replace", "path": "active", "value": True}])
    assert reactivated.status_code == 200, reactivated.text
    assigned = api.patch(f"/client/equipment/{spare}", {"status": "Assigned", "assignee_id": user_id})
    assert assigned.status_code == 200, assigned.text
    assert assigned.json()["data"]["assignee"]["id"] == user_id
