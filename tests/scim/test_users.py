"""SCIM Users through HTTP: create, read, list with filters, replace, patch, delete, and errors."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from outfitter.core.timestamps import format_timestamp
from outfitter.scim import service as scim_service
from tests.factories import Api
from tests.scim.conftest import (
    ENTERPRISE_URN,
    GROUP_URN,
    SCIM_MEDIA_TYPE,
    SEARCH_URN,
    Scim,
    assert_scim_error,
    user_body,
)


def test_create_user_makes_an_employee_the_api_shows(scim: Scim, api: Api) -> None:
    created = scim.post("/Users", user_body("ada@acme.example", externalId="00u1"))
    assert created.status_code == 201, created.text
    assert created.headers["content-type"].startswith("application/scim+json")
    user = created.json()
    assert user["userName"] == "ada@acme.example"
    assert user["externalId"] == "00u1"
    assert user["active"] is True
    assert user["name"] == {"givenName": "Ada", "familyName": "Lovelace"}
    assert user["emails"] == [{"value": "ada@acme.example"}]
    assert user["addresses"] == [{"country": "NG"}]
    assert user["meta"]["resourceType"] == "User"
    assert user["meta"]["location"] == f"http://testserver/scim/v2/Users/{user['id']}"
    assert created.headers["ETag"] == user["meta"]["version"]
    assert created.headers["Location"] == user["meta"]["location"]

    employee = api.get(f"/client/employees/{user['id']}").json()["data"]
    assert employee["email"] == "ada@acme.example"
    assert (employee["first_name"], employee["last_name"]) == ("Ada", "Lovelace")
    assert employee["country_code"] == "NG"
    assert employee["status"] == "Active"
    assert scim.get(f"/Users/{user['id']}").json() == user


def _create(scim: Scim, user_name: str, **extra: object) -> dict[str, object]:
    response = scim.post("/Users", user_body(user_name, **extra))
    assert response.status_code == 201, response.text
    user: dict[str, object] = response.json()
    return user


def test_list_filters_by_user_name_external_id_and_emails(scim: Scim) -> None:
    ada = _create(scim, "ada@acme.example", externalId="00u1")
    hopper = {"givenName": "Grace", "familyName": "Hopper"}
    grace = _create(scim, "grace@acme.example", externalId="00u2", name=hopper)
    _create(scim, "linus@other.example")

    def ids(**params: str) -> list[object]:
        response = scim.get("/Users", **params)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:ListResponse"]
        assert body["totalResults"] == len(body["Resources"])
        return sorted(str(user["id"]) for user in body["Resources"])

    assert ids(filter='userName eq "ADA@acme.example"') == [ada["id"]]  # any case
    assert ids(filter='externalId eq "00u2"') == [grace["id"]]
    assert ids(filter='externalId eq "00U2"') == []  # externalId is case-exact
    assert ids(filter='userName co "acme"') == sorted([ada["id"], grace["id"]])
    assert ids(filter='userName sw "gr"') == [grace["id"]]
    assert ids(filter='emails co "other.example"') == ids(filter='emails.value ew "other.example"')
    assert ids(filter='userName sw "ada" or externalId eq "00u2"') == sorted([ada["id"], grace["id"]])
    assert ids(filter='userName co "acme" and name.givenName eq "grace"') == [grace["id"]]
    assert ids(filter='emails[value eq "grace@acme.example"]') == [grace["id"]]
    assert ids(filter='active eq true and not (userName co "acme")') != []


@pytest.mark.parametrize("resource", ["Users", "Groups"])
def test_meta_times_filter_as_the_api_reads_times(scim: Scim, resource: str) -> None:
    """meta.created and meta.lastModified compare with an ISO 8601 time: one without an offset (as
    identity providers often send) is UTC, a date alone its midnight; a time outside the years 1 to
    9999 once in UTC, or not a time at all, is an invalidFilter, on a list and on a .search."""
    body = (
        user_body("ada@acme.example")
        if resource == "Users"
        else {"schemas": [GROUP_URN], "displayName": "Ops"}
    )
    made = scim.post(f"/{resource}", body)
    assert made.status_code == 201, made.text
    made_id, modified = made.json()["id"], made.json()["meta"]["lastModified"]

    def ids(filter: str) -> list[str]:
        listed = scim.get(f"/{resource}", filter=filter)
        searched = scim.post(f"/{resource}/.search", {"schemas": [SEARCH_URN], "filter": filter})
        assert listed.status_code == searched.status_code == 200, (listed.text, searched.text)
        assert listed.json()["Resources"] == searched.json()["Resources"]
        return [item["id"] for item in listed.json()["Resources"]]

    assert ids('meta.lastModified gt "2020-01-01"') == [made_id]
    assert ids('meta.created gt "2020-01-01T00:00:00"') == [made_id]
    assert ids('meta.created gt "0001-01-01"') == [made_id]
    assert ids('meta.created lt "2020-01-01T04:59:59-05:00"') == []
    assert ids(f'meta.lastModified ge "{modified}"') == [made_id]
    assert ids(f'meta.lastModified gt "{modified}"') == []
    naive = modified.removesuffix("Z")  # the same instant, written without its offset
    assert ids(f'meta.lastModified ge "{naive}"') == [made_id]
    assert ids(f'meta.lastModified gt "{naive}"') == []

    for outside in ("0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"):
        filter = f'meta.lastModified gt "{outside}"'
        for answer in (
            scim.get(f"/{resource}", filter=filter),
            scim.post(f"/{resource}/.search", {"schemas": [SEARCH_URN], "filter": filter}),
        ):
            detail = assert_scim_error(answer, 400, "invalidFilter")["detail"]
            assert outside in detail and "years 1 to 9999" in detail
    not_a_time = scim.get(f"/{resource}", filter='meta.created gt "yesterday"')
    assert (
        "'yesterday' is not an ISO 8601 time" in assert_scim_error(not_a_time, 400, "invalidFilter")["detail"]
    )


def test_list_pages_with_start_index_and_count(scim: Scim) -> None:
    created = [_create(scim, f"p{index}@acme.example")["id"] for index in range(5)]
    page = scim.get("/Users", startIndex="2", count="2").json()
    assert (page["totalResults"], page["startIndex"], page["itemsPerPage"]) == (5, 2, 2)
    assert [user["id"] for user in page["Resources"]] == created[1:3]  # oldest first, stable
    assert scim.get("/Users", count="0").json()["Resources"] == []
    assert scim.get("/Users", startIndex="9").json()["totalResults"] == 5


def test_attributes_and_excluded_attributes_shape_the_answer(scim: Scim) -> None:
    user = _create(scim, "ada@acme.example", title="Analyst")
    only = scim.get(f"/Users/{user['id']}", attributes="userName,name.givenName").json()
    assert only == {
        "schemas": user["schemas"],
        "id": user["id"],
        "userName": "ada@acme.example",
        "name": {"givenName": "Ada"},
    }
    without = scim.get("/Users", excludedAttributes="emails,meta,title").json()["Resources"][0]
    assert "emails" not in without and "meta" not in without and "title" not in without
    assert without["userName"] == "ada@acme.example"


def test_put_replaces_what_the_identity_provider_manages(scim: Scim, api: Api) -> None:
    user = _create(scim, "ada@acme.example")
    body = user_body(
        "ada@acme.example",
        name={"givenName": "Augusta", "familyName": "King"},
        title="Countess",
        phoneNumbers=[{"value": "+234 800 000 0000", "type": "work"}],
        addresses=[{"formatted": "1 Marina, Lagos", "country": "KE"}],
    )
    body["schemas"].append(ENTERPRISE_URN)
    body[ENTERPRISE_URN] = {"department": "Engineering"}
    replaced = scim.put(f"/Users/{user['id']}", body)
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["name"] == {"givenName": "Augusta", "familyName": "King"}
    assert replaced.json()[ENTERPRISE_URN] == {"department": "Engineering"}
    assert replaced.json()["addresses"] == [{"formatted": "1 Marina, Lagos", "country": "KE"}]
    employee = api.get(f"/client/employees/{user['id']}").json()["data"]
    assert (employee["first_name"], employee["job_title"], employee["phone"]) == (
        "Augusta",
        "Countess",
        "+234 800 000 0000",
    )
    assert (employee["country_code"], employee["currency_code"], employee["address"]) == (
        "KE",
        "KES",
        "1 Marina, Lagos",
    )


def test_manager_is_another_user(scim: Scim) -> None:
    boss = _create(scim, "boss@acme.example")
    body = user_body("ada@acme.example")
    body[ENTERPRISE_URN] = {"manager": {"value": boss["id"]}}
    user = scim.post("/Users", body).json()
    assert user[ENTERPRISE_URN]["manager"] == {
        "value": boss["id"],
        "$ref": f"http://testserver/scim/v2/Users/{boss['id']}",
    }
    body = user_body("eve@acme.example")
    body[ENTERPRISE_URN] = {"manager": {"value": "not-a-user"}}
    assert_scim_error(scim.post("/Users", body), 400, "invalidValue")


def test_every_documented_form_of_the_manager_works_in_every_write(scim: Scim) -> None:
    """The manager as `{value}`, the bare id, or a list of one, in a POST, a PUT, and a PATCH with a
    path (the manager, or its `value`) or without one (keyed by its full name, or inside the
    extension's object); an empty id clears it wherever it is given. Nothing answers 200 and
    leaves it as it was."""
    boss, other = _create(scim, "boss@acme.example"), _create(scim, "other@acme.example")
    urn_manager = f"{ENTERPRISE_URN}:manager"

    def manager_of(user_id: object) -> object:
        extension = scim.get(f"/Users/{user_id}").json().get(ENTERPRISE_URN, {})
        return extension.get("manager", {}).get("value")

    for form in ({"value": boss["id"]}, boss["id"], [{"value": boss["id"]}]):
        body = user_body(f"ada.{len(str(form))}@acme.example")
        body[ENTERPRISE_URN] = {"manager": form}
        created = scim.post("/Users", body)
        assert created.status_code == 201, (form, created.text)
        assert manager_of(created.json()["id"]) == boss["id"], form
    user = _create(scim, "ada@acme.example")
    path = f"/Users/{user['id']}"
    steps = [  # (a write, the manager after it)
        (
            lambda: scim.put(
                path, user_body("ada@acme.example", **{ENTERPRISE_URN: {"manager": boss["id"]}})
            ),
            boss,
        ),
        (
            lambda: scim.put(
                path, user_body("ada@acme.example", **{ENTERPRISE_URN: {"manager": {"value": ""}}})
            ),
            None,
        ),
        (lambda: scim.patch(path, [{"op": "replace", "path": urn_manager, "value": other["id"]}]), other),
        (lambda: scim.patch(path, [{"op": "replace", "path": f"{urn_manager}.value", "value": ""}]), None),
        (
            lambda: scim.patch(path, [{"op": "add", "path": f"{urn_manager}.value", "value": boss["id"]}]),
            boss,
        ),
        (lambda: scim.patch(path, [{"op": "replace", "value": {urn_manager: other["id"]}}]), other),
        (lambda: scim.patch(path, [{"op": "replace", "value": {urn_manager: {"value": ""}}}]), None),
        (
            lambda: scim.patch(
                path,
                [{"op": "replace", "value": {ENTERPRISE_URN: {"department": "Ops", "manager": boss["id"]}}}],
            ),
            boss,
        ),
        (
            lambda: scim.patch(
                path,
                [
                    {
                        "op": "replace",
                        "value": {ENTERPRISE_URN: {"department": "Ops", "manager": {"value": ""}}},
                    }
                ],
            ),
            None,
        ),
    ]
    for index, (write, expected) in enumerate(steps):
        answer = write()
        assert answer.status_code == 200, (index, answer.text)
        assert manager_of(user["id"]) == (expected["id"] if expected else None), index


def test_etag_and_if_match(scim: Scim) -> None:
    user = _create(scim, "ada@acme.example")
    version = user["meta"]["version"]  # type: ignore[index]
    assert scim.get(f"/Users/{user['id']}").headers["ETag"] == version
    operations = [{"op": "replace", "path": "title", "value": "Lead"}]
    changed = scim.patch(f"/Users/{user['id']}", operations, headers={"If-Match": version})
    assert changed.status_code == 200, changed.text
    assert changed.json()["meta"]["version"] != version
    stale = scim.patch(f"/Users/{user['id']}", operations, headers={"If-Match": version})
    assert_scim_error(stale, 412)
    assert_scim_error(scim.delete(f"/Users/{user['id']}", headers={"If-Match": version}), 412)


def test_reused_user_name_or_external_id_is_a_uniqueness_conflict(scim: Scim, api: Api) -> None:
    _create(scim, "ada@acme.example", externalId="00u1")
    assert_scim_error(scim.post("/Users", user_body("ADA@acme.example")), 409, "uniqueness")
    same_external_id = user_body("eve@acme.example", externalId="00u1")
    assert_scim_error(scim.post("/Users", same_external_id), 409, "uniqueness")
    made_by_api = api.post(
        "/client/employees",
        {
            "first_name": "Bo",
            "last_name": "Api",
            "email": "bo@acme.example",
            "country_id": "NG",
            "phone": "+234 800 000 0001",
            "address": "x",
        },
    )
    assert made_by_api.status_code == 201, made_by_api.text
    # An employee made through the API is known to SCIM by its email: an IdP finds it, not a twin.
    found = scim.get("/Users", filter='userName eq "bo@acme.example"').json()["Resources"]
    assert [user["id"] for user in found] == [made_by_api.json()["data"]["id"]]
    assert_scim_error(scim.post("/Users", user_body("bo@acme.example")), 409, "uniqueness")
    assert api.get("/client/employees").json()["data"]["total"] == 2


def test_bad_requests_are_scim_errors_and_change_nothing(scim: Scim, api: Api) -> None:
    assert_scim_error(scim.get("/Users", filter='userName eq "x'), 400, "invalidFilter")
    assert_scim_error(scim.get("/Users", filter='nickName eq "x"'), 400, "invalidFilter")
    assert_scim_error(scim.get("/Users", startIndex="one"), 400, "invalidValue")
    bad_country = user_body("ada@acme.example", addresses=[{"country": "ZZ"}])
    assert "country" in assert_scim_error(scim.post("/Users", bad_country), 400, "invalidValue")["detail"]
    no_email = user_body("ada", emails=[])
    assert_scim_error(scim.post("/Users", no_email), 400, "invalidValue")
    broken = scim.request(
        "POST", "/Users", headers={"Content-Type": "application/scim+json"}, content=b'{"userName": '
    )
    assert_scim_error(broken, 400, "invalidSyntax")
    user = _create(scim, "ada@acme.example")
    read_only = scim.patch(f"/Users/{user['id']}", [{"op": "replace", "path": "id", "value": "x"}])
    assert_scim_error(read_only, 400, "mutability")
    unknown_op = scim.patch(f"/Users/{user['id']}", [{"op": "jump", "path": "title"}])
    assert_scim_error(unknown_op, 400, "invalidValue")
    assert api.get("/client/employees").json()["data"]["total"] == 1
    assert_scim_error(scim.get("/Users/00000000-0000-0000-0000-000000000000"), 404)
    assert_scim_error(scim.get("/Users/not-an-id"), 404)


def test_an_unexpected_failure_is_a_scim_500_with_the_request_id(
    scim: Scim, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that fails says nothing of changes; a write that fails says it was not made. Both give
    the request id the log has, and nothing of the failure itself."""

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("the secret internals")

    scim = Scim(TestClient(scim.client.app, raise_server_exceptions=False), scim.token)
    monkeypatch.setattr(scim_service, "_page", broken)
    listed = scim.get("/Users")
    detail = assert_scim_error(listed, 500)["detail"]
    request_id = listed.headers["X-Request-ID"]
    assert detail == f"Something went wrong on our side. Quote request id {request_id} when reporting it."

    monkeypatch.setattr(scim_service.provisioning, "record_change", broken)  # after the employee's INSERT
    created = scim.post("/Users", user_body("ada@acme.example"))
    detail = assert_scim_error(created, 500)["detail"]
    assert detail == (
        "Something went wrong on our side; the change was not made. Quote request id "
        f"{created.headers['X-Request-ID']} when reporting it."
    )
    assert api.get("/client/employees").json()["data"]["total"] == 0


def test_only_a_scim_token_opens_scim_and_it_opens_nothing_else(scim: Scim, api: Api) -> None:
    assert_scim_error(scim.request("GET", "/Users", headers={"Authorization": ""}), 401)
    as_api = scim.request("GET", "/Users", headers={"Authorization": f"Bearer {api.token}"})
    assert_scim_error(as_api, 403)
    assert scim.client.get("/api/v2/client/employees", headers=scim.headers).status_code == 403


def test_delete_offboards_and_hides_the_user(scim: Scim, api: Api) -> None:
    user = _create(scim, "ada@acme.example")
    deleted = scim.delete(f"/Users/{user['id']}")
    assert deleted.status_code == 204
    assert_scim_error(scim.get(f"/Users/{user['id']}"), 404)
    assert_scim_error(scim.delete(f"/Users/{user['id']}"), 404)
    assert scim.get("/Users").json()["totalResults"] == 0
    employee = api.get(f"/client/employees/{user['id']}").json()["data"]
    assert employee["status"] == "Offboarded"
    types = [event["type"] for event in api.get("/client/events").json()["data"]["data"]]
    assert types == ["employee.offboarded", "employee.created"]
    # the userName is free again: the person can be hired back
    assert scim.post("/Users", user_body("ada.again@acme.example", userName="ada")).status_code == 201
    # the email is not: the record keeps it, and the refusal names it, since SCIM cannot find it
    refused = assert_scim_error(scim.post("/Users", user_body("ada@acme.example")), 409, "uniqueness")
    assert refused["detail"] == (
        f"An employee with the email ada@acme.example already exists in this company. It is employee "
        f"{user['id']}, deprovisioned through SCIM, which keeps its records: delete it through the REST "
        f"API (DELETE /api/v2/client/employees/{user['id']}, once its devices are returned) to provision "
        "this email again."
    )
    assert scim.get("/Users", filter='userName eq "ada@acme.example"').json()["totalResults"] == 0
    assert api.delete(f"/client/employees/{user['id']}").status_code == 200
    assert scim.post("/Users", user_body("ada@acme.example")).status_code == 201


def test_delete_moves_the_departments_it_leaves_into_the_sync(scim: Scim, api: Api) -> None:
    """The departments the User leaves changed (their members): `updated_since` returns them."""
    user = _create(scim, "ada@acme.example")
    left = api.post("/client/departments", {"name": "Left", "member_ids": [user["id"]]}).json()["data"]
    api.post("/client/departments", {"name": "Other"})
    since = api.get("/client/departments", updated_since="2000-01-01T00:00:00Z", limit=5).json()["data"]
    newest = max(datetime.fromisoformat(record["updated_at"]) for record in since["data"])
    after = format_timestamp(newest + timedelta(microseconds=1))  # updated_since is "at or after"
    assert scim.delete(f"/Users/{user['id']}").status_code == 204
    changed = api.get("/client/departments", updated_since=after, limit=5).json()["data"]["data"]
    assert [(record["name"], record["member_count"]) for record in changed] == [("Left", 0)]
    assert changed[0]["updated_at"] > left["updated_at"]


def test_deactivation_keeps_the_memberships_that_a_delete_ends(scim: Scim, api: Api) -> None:
    """`active: false` offboards and leaves the departments as they are (docs/events.md): the
    department and its Group still list the user, its `updated_at` does not move; reactivated,
    the user is where they were."""
    user = _create(scim, "ada@acme.example")
    team = api.post("/client/departments", {"name": "Team", "member_ids": [user["id"]]}).json()["data"]
    off = scim.patch(f"/Users/{user['id']}", [{"op": "replace", "value": {"active": False}}])
    assert off.status_code == 200 and off.json()["active"] is False, off.text
    assert api.get(f"/client/employees/{user['id']}").json()["data"]["status"] == "Offboarded"
    kept = api.get(f"/client/departments/{team['id']}").json()["data"]
    assert (kept["member_count"], kept["updated_at"]) == (1, team["updated_at"])
    assert [member["value"] for member in scim.get(f"/Groups/{team['id']}").json()["members"]] == [user["id"]]
    back = scim.patch(f"/Users/{user['id']}", [{"op": "replace", "value": {"active": True}}])
    assert back.json()["active"] is True
    assert api.get(f"/client/departments/{team['id']}").json()["data"]["member_count"] == 1


def test_nul_characters_are_refused_not_stored(scim: Scim, api: Api) -> None:
    body = user_body("ada@acme.example", title="Ana\x00lyst")
    assert "title" in assert_scim_error(scim.post("/Users", body), 400, "invalidValue")["detail"]
    # a NUL in the query string is refused by the app's input guard, before SCIM, in SCIM's words
    in_query = assert_scim_error(scim.get("/Users", filter='userName eq "a\x00"'), 400, "invalidValue")
    assert in_query["detail"] == "query.filter: Must not contain NUL characters (\\u0000)."
    assert api.get("/client/employees").json()["data"]["total"] == 0


def test_refusals_before_scim_runs_are_scim_errors(scim: Scim, api: Api) -> None:
    """The app's own guards (path, headers, body size) answer SCIM's clients in SCIM's format."""
    assert assert_scim_error(scim.get("/Users/ada%00"), 404)["detail"] == "Not found."
    twice = [("Authorization", scim.headers["Authorization"]), ("Authorization", "Bearer otf_other")]
    several = scim.client.get("/scim/v2/Users", headers=twice)
    assert (
        assert_scim_error(several, 400)["detail"]
        == "Send one Authorization header: this request has several."
    )
    too_large = scim.request(
        "POST", "/Users", headers={"Content-Type": SCIM_MEDIA_TYPE}, content=b" " * (1024 * 1024 + 1)
    )
    assert (
        assert_scim_error(too_large, 413)["detail"]
        == "The request body is larger than the limit of 1048576 bytes."
    )
    # the API keeps its own envelope for the same refusals
    assert api.get("/client/employees/ada%00").json() == {
        "success": False,
        "message": "Not found.",
        "data": None,
    }
    assert api.get("/client/employees").json()["data"]["total"] == 0


def test_deleting_a_manager_clears_it_from_their_reports(scim: Scim) -> None:
    boss = _create(scim, "boss@acme.example")
    body = user_body("ada@acme.example")
    body[ENTERPRISE_URN] = {"manager": {"value": boss["id"]}}
    report = scim.post("/Users", body).json()
    assert scim.delete(f"/Users/{boss['id']}").status_code == 204
    assert ENTERPRISE_URN not in scim.get(f"/Users/{report['id']}").json()


@pytest.mark.one_database
@pytest.mark.parametrize(
    ("text", "status", "scim_type"),
    [
        ('"x": NaN', 400, "invalidSyntax"),  # not JSON (RFC 8259), though Python reads it
        ('"x": -Infinity', 400, "invalidSyntax"),
        ('"x": ' + "1" * 5000, 400, "invalidSyntax"),  # an integer longer than Python reads
        ('"x": "a\\u0000b"', 400, "invalidValue"),  # no column stores a NUL
        ('"x": ' + "[" * 70 + "]" * 70, 400, "invalidSyntax"),  # nested past any parser's depth
    ],
)
def test_input_the_api_refuses_is_refused_by_scim_too_even_where_ignored(
    scim: Scim, api: Api, text: str, status: int, scim_type: str | None
) -> None:
    """The API's input guard holds for SCIM's bodies, in an attribute it ignores as in one it
    keeps, as a SCIM Error; nothing is created."""
    body = json.dumps(user_body("ada@acme.example"))[:-1] + ", " + text + "}"
    answer = scim.request("POST", "/Users", headers={"Content-Type": SCIM_MEDIA_TYPE}, content=body)
    assert_scim_error(answer, status, scim_type)
    assert api.get("/client/employees").json()["data"]["total"] == 0


def test_unknown_endpoints_and_methods_answer_scim_errors(scim: Scim) -> None:
    assert_scim_error(scim.get("/Devices"), 404)
    refused = scim.request("PATCH", "/Users", {"Operations": []})
    assert_scim_error(refused, 405)
    assert refused.headers["Allow"] == "GET, HEAD, POST"  # every method of the path, as the API's 405
    assert refused.json()["detail"] == "PATCH is not allowed here; this path takes GET, HEAD, POST."
    refused = scim.request("DELETE", "/Schemas")
    assert_scim_error(refused, 405)
    assert refused.headers["Allow"] == "GET, HEAD"
    assert scim.request("HEAD", "/Schemas").status_code == 200
    assert_scim_error(scim.post("/.search", {"filter": 'userName eq "x"'}), 501)
    trailing = scim.client.get("/scim/v2/Users/", follow_redirects=False)  # no token: no redirect either
    assert "Location" not in trailing.headers
    assert_scim_error(trailing, 404)
    as_text = scim.request(
        "POST", "/Users", headers={"Content-Type": "text/plain"}, content=json.dumps(user_body("a@b.example"))
    )
    assert "Content-Type: application/scim+json" in assert_scim_error(as_text, 400, "invalidSyntax")["detail"]
    untyped = scim.client.post(  # no Content-Type at all: not read as JSON either
        "/scim/v2/Users",
        headers={"Authorization": scim.headers["Authorization"]},
        content=json.dumps(user_body("c@d.example")),
    )
    assert "Content-Type: application/scim+json" in assert_scim_error(untyped, 400, "invalidSyntax")["detail"]
    unauthenticated = scim.request("GET", "/Users", headers={"Authorization": "Bearer otf_nope"})
    assert_scim_error(unauthenticated, 401)
    assert unauthenticated.headers["WWW-Authenticate"].startswith("Bearer")


def test_a_lone_surrogate_or_a_deep_body_is_refused_never_a_500(scim: Scim, api: Api) -> None:
    body = user_body("ada@acme.example", title="Ana\ud800lyst")
    content = json.dumps(body)  # ASCII escapes: the lone surrogate travels as \ud800
    answer = scim.request("POST", "/Users", headers={"Content-Type": SCIM_MEDIA_TYPE}, content=content)
    assert "title" in assert_scim_error(answer, 400, "invalidValue")["detail"]
    deep = '{"schemas": ' + "[" * 5000 + '"\\u0000"' + "]" * 5000 + "}"
    answer = scim.request("POST", "/Users", headers={"Content-Type": SCIM_MEDIA_TYPE}, content=deep)
    assert_scim_error(answer, 400, "invalidSyntax")
    assert api.get("/client/employees").json()["data"]["total"] == 0


def test_a_typed_email_path_reaches_its_own_email_never_the_work_one(scim: Scim, api: Api) -> None:
    """Outfitter keeps a work email (the employee's identity) and a personal one. A filter on
    `type` names the work one for `work` (or `primary eq true`) and the personal one for any other
    type: replacing, adding or removing a home address never rewrites the work email."""
    user = _create(scim, "ada@acme.example")
    path = f"/Users/{user['id']}"

    home, elsewhere = 'emails[type eq "home"]', {"value": "ada@elsewhere.example", "type": "home"}
    steps = [  # (operation, the work email and the personal one after it)
        (
            {"op": "add", "path": f"{home}.value", "value": "ada@home.example"},
            ("ada@acme.example", "ada@home.example"),
        ),
        (
            {"op": "replace", "path": 'emails[type eq "other"].value', "value": "a@b.example"},
            ("ada@acme.example", "a@b.example"),
        ),
        ({"op": "replace", "path": home, "value": elsewhere}, ("ada@acme.example", "ada@elsewhere.example")),
        ({"op": "remove", "path": home}, ("ada@acme.example", None)),
        ({"op": "replace", "path": home, "value": elsewhere}, ("ada@acme.example", "ada@elsewhere.example")),
        (
            {"op": "replace", "path": "emails[primary eq true].value", "value": "ada@new.example"},
            ("ada@new.example", "ada@elsewhere.example"),
        ),
        (
            {"op": "replace", "path": 'emails[type eq "work"].value', "value": "ada@acme.example"},
            ("ada@acme.example", "ada@elsewhere.example"),
        ),
        (  # the whole list replaced by personal addresses only (as Okta pushes a multi-valued one)
            {"op": "replace", "path": "emails", "value": [{"value": "me@home.example", "type": "home"}]},
            ("ada@acme.example", "me@home.example"),
        ),
        (
            {
                "op": "replace",
                "value": {"emails": [{"value": "x@other.example", "type": "other", "primary": True}]},
            },
            ("ada@acme.example", "x@other.example"),
        ),
        (  # an untyped one is still the work email, the personal one typed beside it
            {
                "op": "replace",
                "path": "emails",
                "value": [{"value": "p@home.example", "type": "home"}, {"value": "ada@work.example"}],
            },
            ("ada@work.example", "p@home.example"),
        ),
    ]
    for operation, expected in steps:
        answer = scim.patch(path, [operation])
        assert answer.status_code == 200, (operation, answer.text)
        employee = api.get(f"/client/employees/{user['id']}").json()["data"]
        assert (employee["email"], employee["personal_email"]) == expected, operation


@pytest.mark.one_database
def test_a_typed_path_of_a_value_outfitter_keeps_one_of_is_applied_to_it(scim: Scim, api: Api) -> None:
    """Entra names the phone as `phoneNumbers[type eq "mobile"].value` although Outfitter keeps one,
    untyped: with no phone yet, the add sets it. Removing a personal email by type when there is
    none changes nothing; a typed path on an attribute Outfitter does not keep is ignored, as
    unknown attributes are."""
    user = _create(scim, "ada@acme.example")
    path = f"/Users/{user['id']}"
    phone = scim.patch(
        path, [{"op": "add", "path": 'phoneNumbers[type eq "mobile"].value', "value": "+2348012345678"}]
    )
    assert phone.status_code == 200, phone.text
    assert phone.json()["phoneNumbers"] == [{"value": "+2348012345678"}]
    assert api.get(f"/client/employees/{user['id']}").json()["data"]["phone"] == "+2348012345678"

    for operation in (
        {"op": "remove", "path": 'emails[type eq "home"]'},
        {"op": "add", "path": 'pagers[type eq "work"].value', "value": "123"},
    ):
        answer = scim.patch(path, [operation])
        assert answer.status_code == 200, (operation, answer.text)
        assert [email["value"] for email in answer.json()["emails"]] == ["ada@acme.example"]
        assert "pagers" not in answer.json()
    employee = api.get(f"/client/employees/{user['id']}").json()["data"]
    assert (employee["email"], employee["personal_email"]) == ("ada@acme.example", None)


def test_names_and_texts_follow_the_rest_api_rules(scim: Scim, api: Api) -> None:
    """A given or family name on two lines, with a tab, or of invisible characters only, and a
    title or address that shows nothing, are refused as the REST API refuses them (they were stored,
    leaving employees the API documents as impossible), in a POST, a PUT and a PATCH; nothing is
    written. A name in decomposed form is kept composed, as the API keeps it."""
    user = _create(scim, "ada@acme.example")
    path = f"/Users/{user['id']}"
    before = api.get(f"/client/employees/{user['id']}").json()["data"]
    on_one_line, visible = "Give it on one line", "Give at least one visible character"
    names = (
        ({"givenName": "Ada\nLovelace", "familyName": "Lovelace"}, "name.givenName", on_one_line),
        ({"givenName": "\u200b\u200b", "familyName": "Lovelace"}, "name.givenName", visible),
        ({"givenName": "Ada", "familyName": "F\tG"}, "name.familyName", on_one_line),
        ({"givenName": "Ada", "familyName": "\u200b"}, "name.familyName", visible),
    )
    for name, field, problem in names:
        for response in (
            scim.post("/Users", user_body("grace@acme.example", name=name)),
            scim.put(path, user_body("ada@acme.example", name=name)),
            scim.patch(path, [{"op": "replace", "path": "name", "value": name}]),
        ):
            refused = assert_scim_error(response, 400, "invalidValue")
            assert refused["detail"].startswith(f"{field}: "), refused
            assert problem in refused["detail"], refused
    for body in (
        user_body("ada@acme.example", title="\u200b"),
        user_body("ada@acme.example", addresses=[{"country": "NG", "formatted": "\u200b\u2060"}]),
    ):
        refused = assert_scim_error(scim.put(path, body), 400, "invalidValue")
        assert visible in refused["detail"], refused
    assert api.get(f"/client/employees/{user['id']}").json()["data"] == before
    assert api.get("/client/employees").json()["data"]["total"] == 1

    renamed = scim.patch(path, [{"op": "replace", "path": "name.givenName", "value": "Zoe\u0308"}])
    assert renamed.status_code == 200, renamed.text
    assert api.get(f"/client/employees/{user['id']}").json()["data"]["first_name"] == "Zo\u00eb"
    # An address on several lines is an address (RFC 7643's formatted), as in the REST API.
    moved = scim.put(
        path, user_body("ada@acme.example", addresses=[{"country": "NG", "formatted": "1 Marina\nLagos"}])
    )
    assert moved.status_code == 200, moved.text
    assert api.get(f"/client/employees/{user['id']}").json()["data"]["address"] == "1 Marina\nLagos"


def test_patches_the_api_would_refuse_are_scim_errors_in_plain_words(scim: Scim, api: Api) -> None:
    """What would leave an employee the REST API calls invalid, or a value of the wrong type, is
    refused with the attribute's SCIM name and no validator's internals; nothing is written."""
    user = _create(scim, "ada@acme.example")
    path = f"/Users/{user['id']}"
    manager = f"{ENTERPRISE_URN}:manager"
    refusals = [
        ({"op": "remove", "path": "name"}, "mutability", "name cannot be removed"),
        ({"op": "remove", "path": "name.givenName"}, "mutability", "name.givenName cannot be removed"),
        (
            {"op": "replace", "path": "active", "value": "maybe"},
            "invalidValue",
            "active: Input should be a valid boolean",
        ),
        (
            {"op": "replace", "path": "name.givenName", "value": 5},
            "invalidValue",
            "givenName: Input should be a valid string",
        ),
        (
            {"op": "replace", "path": "displayName", "value": 5},
            "invalidValue",
            "displayName: Input should be a valid string",
        ),
        ({"op": "replace", "path": 5, "value": "x"}, "invalidSyntax", "An operation's path is a text"),
        (
            {"op": "replace", "path": "phoneNumbers", "value": [{"value": "call me maybe"}]},
            "invalidValue",
            "Not a valid phone number",
        ),
        (
            {"op": "replace", "path": manager, "value": {"displayName": "Boss"}},
            "invalidValue",
            'id as its "value"',
        ),
    ]
    before = api.get(f"/client/employees/{user['id']}").json()["data"]
    for operation, scim_type, detail in refusals:
        error = assert_scim_error(scim.patch(path, [operation]), 400, scim_type)
        assert detail in error["detail"], (operation, error)
        assert "pydantic" not in error["detail"] and "validation error for" not in error["detail"]
    assert api.get(f"/client/employees/{user['id']}").json()["data"] == before
    refused = scim.post("/Users", user_body("grace@acme.example", phoneNumbers=[{"value": "call me maybe"}]))
    assert "Not a valid phone number" in assert_scim_error(refused, 400, "invalidValue")["detail"]
    family_only = {**user_body("linus@acme.example"), "name": {"familyName": "Torvalds"}}
    created = scim.post("/Users", family_only).json()
    # The API needs a first name: the display name's first word, else the userName's local part.
    assert created["name"] == {"givenName": "Ada", "familyName": "Torvalds"}
    del family_only["displayName"]
    family_only["userName"] = family_only["emails"][0]["value"] = "grace@acme.example"
    assert scim.post("/Users", family_only).json()["name"] == {"givenName": "grace", "familyName": "Torvalds"}
