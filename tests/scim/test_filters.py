"""Filters mean what RFC 7644 says: `eq` in any case folds both sides one way, the way the
uniqueness checks fold (Python's `str.lower()` and PostgreSQL's `lower()` disagree on `İ`), and
`not` matches wherever its expression is not true, also where the attribute is absent. A filter
is bounded (MAX_FILTER_LENGTH characters, MAX_FILTER_TERMS comparisons), refused before any SQL."""

# ruff: noqa: RUF001 (Turkish names: the dotless i, U+0131, is meant)

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI

from outfitter.scim.filters import MAX_FILTER_LENGTH, MAX_FILTER_TERMS
from tests.factories import Api, counting_statements
from tests.people.helpers import employee_body
from tests.scim.conftest import GROUP_URN, SEARCH_URN, Scim, assert_scim_error, user_body


def _ids(scim: Scim, resource: str, filter: str) -> list[str]:
    response = scim.get(f"/{resource}", filter=filter)
    assert response.status_code == 200, response.text
    return sorted(item["id"] for item in response.json()["Resources"])


def _user(scim: Scim, user_name: str, **extra: Any) -> str:
    response = scim.post("/Users", user_body(user_name, **extra))
    assert response.status_code == 201, response.text
    user_id: str = response.json()["id"]
    return user_id


def test_eq_finds_the_group_whose_name_a_create_would_meet(scim: Scim, api: Api) -> None:
    """An IdP looks a Group up by displayName, and creates it when the look-up finds nothing: a
    look-up that missed a name the uniqueness check then meets was a 409 forever."""
    created = scim.post("/Groups", {"schemas": [GROUP_URN], "displayName": "İnsan Kaynakları"})
    assert created.status_code == 201, created.text
    group = created.json()["id"]
    for name in ("İnsan Kaynakları", "i̇nsan kaynakları", "İNSAN KAYNAKLARı"):
        assert _ids(scim, "Groups", f'displayName eq "{name}"') == [group], name
        again = scim.post("/Groups", {"schemas": [GROUP_URN], "displayName": name})
        assert_scim_error(again, 409, "uniqueness")
    assert _ids(scim, "Groups", 'displayName sw "İnsan"') == [group]
    assert _ids(scim, "Groups", 'displayName co "SAN KAY"') == [group]
    # "insan" (a dotless capital's fold, as PostgreSQL's lower() gives it) is another name here
    assert _ids(scim, "Groups", 'displayName eq "insan kaynakları"') == []
    other = scim.post("/Groups", {"schemas": [GROUP_URN], "displayName": "insan kaynakları"})
    assert other.status_code == 201, other.text
    assert _ids(scim, "Groups", 'displayName eq "insan kaynakları"') == [other.json()["id"]]
    assert _ids(scim, "Groups", 'displayName eq "İnsan Kaynakları"') == [group]


def test_eq_folds_users_attributes_one_way(scim: Scim) -> None:
    ilker = _user(
        scim,
        "İlker@acme.example",
        name={"givenName": "İlker", "familyName": "Işık"},
        title="İK Müdürü",
        emails=[{"value": "İlker.Işık@acme.example", "type": "work", "primary": True}],
    )
    _user(scim, "ada@acme.example", title="CTO_100%")
    assert _ids(scim, "Users", 'userName eq "İLKER@ACME.EXAMPLE"') == [ilker]
    assert _ids(scim, "Users", 'name.givenName eq "İlker"') == [ilker]
    assert _ids(scim, "Users", 'name.familyName eq "IşıK"') == [ilker]
    assert _ids(scim, "Users", 'title sw "İk"') == [ilker]
    assert _ids(scim, "Users", 'title ew "MÜDÜRÜ"') == [ilker]
    assert _ids(scim, "Users", 'emails.value eq "İLKER.IşıK@acme.example"') == [ilker]
    assert _ids(scim, "Users", 'title co "_100%"') != []  # LIKE's wildcards are matched as text
    assert _ids(scim, "Users", 'title co "o%1"') == []


@pytest.mark.parametrize(
    ("filter", "matched"),
    [
        ('not (title eq "CTO")', ["untitled", "engineer"]),
        ('not (title co "ngin")', ["untitled", "cto"]),
        ("not (title pr)", ["untitled"]),
        ('not (not (title eq "CTO"))', ["cto"]),
        ('not (title eq "CTO") and not (title eq "Engineer")', ["untitled"]),
        ('not (emails[value co "cto"] or title eq "Engineer")', ["untitled"]),
    ],
)
def test_not_matches_where_the_attribute_is_absent(scim: Scim, filter: str, matched: list[str]) -> None:
    users = {
        "untitled": _user(scim, "untitled@acme.example"),
        "cto": _user(scim, "cto@acme.example", title="CTO"),
        "engineer": _user(scim, "engineer@acme.example", title="Engineer"),
    }
    assert _ids(scim, "Users", filter) == sorted(users[name] for name in matched)


def _search(scim: Scim, filter: str) -> Any:
    return scim.post("/Users/.search", {"schemas": [SEARCH_URN], "filter": filter})


def test_a_filter_is_bounded_and_refused_before_any_query(scim: Scim, api: Api, app: FastAPI) -> None:
    assert api.post("/client/employees", employee_body()).status_code == 201
    at_most = " or ".join(f'userName eq "u{number}@acme.io"' for number in range(MAX_FILTER_TERMS))
    assert _search(scim, at_most).json()["totalResults"] == 0
    one_more = f'{at_most} or emails[value eq "x@acme.io" or value co "y"]'
    too_long = 'title eq "' + "x" * MAX_FILTER_LENGTH + '"'
    with counting_statements(app) as statements:
        terms = assert_scim_error(_search(scim, one_more), 400, "invalidFilter")
        length = assert_scim_error(scim.get("/Users", filter=too_long), 400, "invalidFilter")
        groups = assert_scim_error(scim.get("/Groups", filter=one_more), 400, "invalidFilter")
    assert terms["detail"] == (
        f"The filter has {MAX_FILTER_TERMS + 2} comparisons; at most {MAX_FILTER_TERMS} are taken: "
        "send several requests."
    )
    assert groups["detail"] == terms["detail"]
    assert length["detail"] == (
        f"The filter is {len(too_long):,} characters long; at most {MAX_FILTER_LENGTH:,} are taken: "
        "send a shorter one, or several requests."
    )
    assert not [sql for sql in statements if "employees" in sql or "departments" in sql]
