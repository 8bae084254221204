"""SCIM Groups are departments: through HTTP, read back through the REST API."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import Api
from tests.scim.conftest import GROUP_URN, PATCH_URN, Scim, assert_scim_error, user_body


def _user(scim: Scim, user_name: str) -> str:
    response = scim.post("/Users", user_body(user_name))
    assert response.status_code == 201, response.text
    user_id: str = response.json()["id"]
    return user_id


def _group(name: str, *members: str, **extra: Any) -> dict[str, Any]:
    return {"schemas": [GROUP_URN], "displayName": name, "members": [{"value": m} for m in members], **extra}


def test_create_list_and_filter_groups(scim: Scim, api: Api) -> None:
    ada, grace = _user(scim, "ada@acme.example"), _user(scim, "grace@acme.example")
    created = scim.post("/Groups", _group("Engineering", ada, grace, externalId="g-1"))
    assert created.status_code == 201, created.text
    group = created.json()
    assert group["displayName"] == "Engineering" and group["externalId"] == "g-1"
    assert group["meta"]["lastModified"] == group["meta"]["created"]  # nothing changed it since
    assert sorted((member["value"], member["$ref"]) for member in group["members"]) == sorted(
        (member, f"http://testserver/scim/v2/Users/{member}") for member in (ada, grace)
    )
    assert group["meta"]["location"] == f"http://testserver/scim/v2/Groups/{group['id']}"
    sales = scim.post("/Groups", _group("Sales", ada)).json()

    department = api.get(f"/client/departments/{group['id']}").json()["data"]
    assert (department["name"], department["member_count"]) == ("Engineering", 2)

    def ids(filter: str) -> list[str]:
        response = scim.get("/Groups", filter=filter)
        assert response.status_code == 200, response.text
        return sorted(item["id"] for item in response.json()["Resources"])

    assert ids('displayName eq "engineering"') == [group["id"]]
    assert ids('displayName sw "Sa" or externalId eq "g-1"') == sorted([group["id"], sales["id"]])
    assert ids('displayName co "ale" and externalId pr') == []
    assert ids(f'members[value eq "{grace}"]') == [group["id"]]
    assert ids(f'members.value eq "{ada}"') == sorted([group["id"], sales["id"]])
    listed = scim.get("/Groups", excludedAttributes="members").json()["Resources"]
    assert all("members" not in item for item in listed)


def test_put_and_patch_replace_name_and_members(scim: Scim, api: Api) -> None:
    ada, grace = _user(scim, "ada@acme.example"), _user(scim, "grace@acme.example")
    group = scim.post("/Groups", _group("Engineering", ada)).json()
    replaced = scim.put(f"/Groups/{group['id']}", _group("R&D", grace))
    assert replaced.status_code == 200, replaced.text
    department = api.get(f"/client/departments/{group['id']}").json()["data"]
    assert department["name"] == "R&D"
    assert [member["id"] for member in department["members"]] == [grace]

    events = len(api.get("/client/events").json()["data"]["data"])
    same = scim.patch(f"/Groups/{group['id']}", [{"op": "replace", "path": "displayName", "value": "R&D"}])
    assert same.status_code == 200
    assert len(api.get("/client/events").json()["data"]["data"]) == events  # nothing changed: no event

    members = [{"op": "add", "path": "members", "value": [{"value": ada}]}]
    assert len(scim.patch(f"/Groups/{group['id']}", members).json()["members"]) == 2
    emptied = scim.patch(f"/Groups/{group['id']}", [{"op": "remove", "path": "members"}]).json()
    assert "members" not in emptied
    assert api.get(f"/client/departments/{group['id']}").json()["data"]["member_count"] == 0


def test_group_conflicts_and_bad_members(scim: Scim, api: Api) -> None:
    scim.post("/Groups", _group("Engineering", externalId="g-1"))
    assert_scim_error(scim.post("/Groups", _group("ENGINEERING")), 409, "uniqueness")
    assert_scim_error(scim.post("/Groups", _group("Sales", externalId="g-1")), 409, "uniqueness")
    assert_scim_error(scim.post("/Groups", _group("Sales", "not-a-user")), 400, "invalidValue")
    assert_scim_error(scim.post("/Groups", _group("  ")), 400, "invalidValue")
    nested = _group("Sales")
    nested["members"] = [{"value": "x", "type": "Group"}]
    assert_scim_error(scim.post("/Groups", nested), 400, "invalidValue")
    long_id = "g" * 256  # a User's limit too; it was a 500 from the column's length
    refused = assert_scim_error(
        scim.post("/Groups", _group("Sales", externalId=long_id)), 400, "invalidValue"
    )
    assert refused["detail"] == "externalId is longer than 255 characters."
    group = scim.get("/Groups").json()["Resources"][0]
    patched = scim.patch(
        f"/Groups/{group['id']}", [{"op": "replace", "path": "externalId", "value": long_id}]
    )
    assert_scim_error(patched, 400, "invalidValue")
    assert scim.post("/Groups", _group("Sales", externalId="g" * 255)).status_code == 201
    assert api.get("/client/departments").json()["data"]["total"] == 2


def test_group_names_follow_the_department_rules(scim: Scim, api: Api) -> None:
    """A displayName on two lines, with a tab, or of invisible characters only is a 400 naming it
    in every write, as the REST API's 422 for such a department name (each was a 500); nothing is
    written. A name in decomposed form is kept composed, as the REST API keeps it."""
    group = scim.post("/Groups", _group("Sales")).json()
    events = api.get("/client/events").json()["data"]["total"]
    for name, problem in (
        ("Sales\nEMEA", "Give it on one line"),
        ("A\tB", "Give it on one line"),
        ("\u200b", "Give at least one visible character"),
    ):
        refusals = (
            scim.post("/Groups", _group(name)),
            scim.put(f"/Groups/{group['id']}", _group(name)),
            scim.patch(f"/Groups/{group['id']}", [{"op": "replace", "path": "displayName", "value": name}]),
            scim.patch(f"/Groups/{group['id']}", [{"op": "replace", "value": {"displayName": name}}]),
        )
        for response in refusals:
            refused = assert_scim_error(response, 400, "invalidValue")
            assert refused["detail"].startswith(f"displayName: {name!r}: {problem}"), refused
    names = [department["name"] for department in api.get("/client/departments").json()["data"]["data"]]
    assert names == ["Sales"]
    assert api.get("/client/events").json()["data"]["total"] == events
    composed = scim.post("/Groups", _group("Equipe\u0301 R&D")).json()
    assert composed["displayName"] == "Equip\u00e9 R&D"


def test_delete_group_deletes_the_department(scim: Scim, api: Api) -> None:
    group = scim.post(
        "/Groups", _group("Engineering", _user(scim, "ada@acme.example"), externalId="g-1")
    ).json()
    assert scim.delete(f"/Groups/{group['id']}").status_code == 204
    assert_scim_error(scim.get(f"/Groups/{group['id']}"), 404)
    assert api.get(f"/client/departments/{group['id']}").status_code == 404
    assert api.get("/client/events").json()["data"]["data"][0]["type"] == "department.deleted"
    # its name and externalId are free again
    assert scim.post("/Groups", _group("Engineering", externalId="g-1")).status_code == 201


def test_a_deleted_user_leaves_their_departments(scim: Scim, api: Api) -> None:
    ada, grace = _user(scim, "ada@acme.example"), _user(scim, "grace@acme.example")
    group = scim.post("/Groups", _group("Engineering", ada, grace)).json()
    assert scim.delete(f"/Users/{ada}").status_code == 204
    assert [member["value"] for member in scim.get(f"/Groups/{group['id']}").json()["members"]] == [grace]
    department = api.get(f"/client/departments/{group['id']}").json()["data"]
    assert [member["id"] for member in department["members"]] == [grace]
    assert api.get(f"/client/employees/{ada}").json()["data"]["departments"] == []


def test_a_removal_by_value_matches_values_as_values(scim: Scim, api: Api) -> None:
    """Entra's `{"op": "Remove", "path": "members", "value": [{"value": ID}]}` removes the members
    whose value is ID, whatever ID holds: a value written as filter syntax removes nothing."""
    ada, grace, alan = (_user(scim, f"{name}@acme.example") for name in ("ada", "grace", "alan"))
    group = scim.post("/Groups", _group("Engineering", ada, grace, alan)).json()
    injected = [{"value": 'x" or value pr or value eq "y'}, {"value": f'{ada}"] or members[value pr'}]
    for value in injected:
        removal = scim.patch(
            f"/Groups/{group['id']}", [{"op": "Remove", "path": "members", "value": [value]}]
        )
        assert removal.status_code == 200, removal.text
        assert sorted(member["value"] for member in removal.json()["members"]) == sorted([ada, grace, alan])
    removed = scim.patch(
        f"/Groups/{group['id']}",
        [{"op": "Remove", "path": "members", "value": [*injected, {"value": grace.upper()}]}],
    )
    assert sorted(member["value"] for member in removed.json()["members"]) == sorted([ada, alan])
    department = api.get(f"/client/departments/{group['id']}").json()["data"]
    assert sorted(member["id"] for member in department["members"]) == sorted([ada, alan])

    # a User's emails alike: the personal email goes, the work email stays
    body = user_body("eve@acme.example")
    body["emails"].append({"value": "eve@home.example", "type": "home"})
    eve = scim.post("/Users", body).json()["id"]
    injection = [{"value": 'x" or value pr or value eq "y'}]
    refused = scim.patch(f"/Users/{eve}", [{"op": "Remove", "path": "emails", "value": injection}])
    assert_scim_error(refused, 400, "invalidValue")  # not an email address: it selects none
    emails = scim.get(f"/Users/{eve}").json()["emails"]
    assert [email["value"] for email in emails] == ["eve@acme.example", "eve@home.example"]
    personal = scim.patch(
        f"/Users/{eve}", [{"op": "Remove", "path": "emails", "value": [{"value": "eve@home.example"}]}]
    )
    assert [email["value"] for email in personal.json()["emails"]] == ["eve@acme.example"]


@pytest.mark.one_database
def test_a_patch_body_that_is_no_patchop_is_refused_in_words(scim: Scim, api: Api) -> None:
    """A body that is not an object, a PatchOp without Operations, an operation that is not an
    object: each is a 400 invalidSyntax saying what a PatchOp is, and nothing changes."""
    group = scim.post("/Groups", _group("Engineering")).json()
    path = f"/Groups/{group['id']}"
    for body, detail in (
        (
            [{"op": "replace", "path": "displayName", "value": "R&D"}],
            "The body must be a JSON object: a PatchOp.",
        ),
        ({"schemas": [PATCH_URN]}, "A PatchOp needs Operations: a list of one or more operations."),
        (
            {"schemas": [PATCH_URN], "Operations": []},
            "A PatchOp needs Operations: a list of one or more operations.",
        ),
        (
            {"schemas": [PATCH_URN], "Operations": ["replace displayName"]},
            "Each operation must be a JSON object.",
        ),
    ):
        refused = assert_scim_error(scim.request("PATCH", path, body), 400, "invalidSyntax")
        assert refused["detail"] == detail, body
    assert api.get(f"/client/departments/{group['id']}").json()["data"]["name"] == "Engineering"


@pytest.mark.one_database
def test_every_form_of_a_members_patch_reaches_the_department(scim: Scim, api: Api) -> None:
    """Members replaced by a list, named beside another attribute in a path-less operation, or
    removed by a filter other than `value eq` (applied by scim2-models to the whole Group): the
    department's members follow each. A member without a value or a filter that does not parse is
    a 400 naming the problem, and changes nothing."""
    ada, grace, alan = (_user(scim, f"{name}@acme.example") for name in ("ada", "grace", "alan"))
    group = scim.post("/Groups", _group("Engineering", ada, grace)).json()
    path = f"/Groups/{group['id']}"

    def members() -> list[str]:
        department = api.get(f"/client/departments/{group['id']}").json()["data"]
        return sorted(member["id"] for member in department["members"])

    replaced = scim.patch(path, [{"op": "replace", "path": "members", "value": [{"value": alan}]}])
    assert [member["value"] for member in replaced.json()["members"]] == [alan]
    assert members() == [alan]

    both = {"displayName": "R&D", "members": [{"value": ada}, {"value": grace}, {"value": alan}]}
    renamed = scim.patch(path, [{"op": "replace", "value": both}])
    assert renamed.status_code == 200, renamed.text
    assert api.get(f"/client/departments/{group['id']}").json()["data"]["name"] == "R&D"
    assert members() == sorted([ada, grace, alan])

    kept = scim.patch(path, [{"op": "remove", "path": f'members[value ne "{grace}"]'}])
    assert [member["value"] for member in kept.json()["members"]] == [grace]
    assert members() == [grace]

    nameless = scim.patch(path, [{"op": "add", "path": "members", "value": [{"display": "Ada"}]}])
    refused = assert_scim_error(nameless, 400, "invalidValue")
    assert refused["detail"] == "members: each member needs the value (id) of a User."
    broken = scim.patch(path, [{"op": "remove", "path": "members[value eq"}])
    assert assert_scim_error(broken, 400, "invalidPath")["detail"].startswith(
        "Operations.path: invalid syntax"
    )
    assert members() == [grace]
