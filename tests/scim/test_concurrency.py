"""Two identity-provider requests creating the same userName at once, for real, against a served
instance on PostgreSQL: exactly one employee is made, the other request gets 409 uniqueness. And,
on both databases, the path the loser of such a race takes, forced: the unique indexes answer."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from outfitter.people import provisioning
from outfitter.scim import service
from tests.factories import Api, CompanyFactory
from tests.payments.conftest import LiveServer, live_server
from tests.scim.conftest import GROUP_URN, SCIM_MEDIA_TYPE, Scim, assert_scim_error, user_body

__all__ = ["live_server"]


@pytest.mark.usefixtures("postgres_only")
@pytest.mark.parametrize("round_", range(3))
def test_racing_posts_of_one_user_name_make_one_employee(
    live_server: LiveServer, companies: CompanyFactory, round_: int
) -> None:
    api = companies.create(f"Race {round_}")
    token = companies.token(api, ["scim"]).token
    headers = {"Authorization": f"Bearer {token}", "Content-Type": SCIM_MEDIA_TYPE}
    body = user_body("ada@acme.example", externalId="00u1")
    start = threading.Barrier(2)

    def post(_: int) -> httpx.Response:
        with httpx.Client(base_url=f"{live_server.url}/scim/v2", headers=headers, timeout=60) as http:
            start.wait()
            return http.post("/Users", json=body)

    with ThreadPoolExecutor(2) as pool:
        responses = list(pool.map(post, range(2)))

    assert sorted(response.status_code for response in responses) == [201, 409], [r.text for r in responses]
    conflict = next(response for response in responses if response.status_code == 409).json()
    assert (conflict["status"], conflict["scimType"]) == ("409", "uniqueness")
    with live_server.api(api.token) as rest:
        employees = rest.get("/client/employees").json()["data"]
        events = rest.get("/client/events").json()["data"]["data"]
    assert employees["total"] == 1
    assert [event["type"] for event in events] == ["employee.created"]


def test_the_unique_indexes_answer_409_when_a_racer_passed_the_check(
    scim: Scim, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the loser of a race meets: the identity check saw nothing (the winner had not committed),
    so the unique indexes refuse the write, and that is a 409 uniqueness, not a 500."""
    monkeypatch.setattr(provisioning, "check_identities", lambda *_args: None)
    first = scim.post("/Users", user_body("ada@acme.example", externalId="00u1"))
    assert first.status_code == 201, first.text
    same_user_name = user_body("ada@acme.example", emails=[{"value": "other@acme.example"}])
    assert_scim_error(scim.post("/Users", same_user_name), 409, "uniqueness")
    assert_scim_error(
        scim.post("/Users", user_body("eve@acme.example", externalId="00u1")), 409, "uniqueness"
    )
    eve = scim.post("/Users", user_body("eve@acme.example")).json()
    assert_scim_error(scim.put(f"/Users/{eve['id']}", user_body("ada@acme.example")), 409, "uniqueness")
    assert api.get("/client/employees").json()["data"]["total"] == 2


def test_a_groups_external_id_race_is_a_409_too(scim: Scim, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service, "_check_group_external_id", lambda *_args: None)
    group = {"schemas": [GROUP_URN], "displayName": "Engineering", "externalId": "g-1"}
    assert scim.post("/Groups", group).status_code == 201
    assert_scim_error(scim.post("/Groups", {**group, "displayName": "Sales"}), 409, "uniqueness")
    assert scim.get("/Groups").json()["totalResults"] == 1
