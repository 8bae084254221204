"""SCIM Users through HTTP: create, read, list with filters, replace, patch, delete, and errors."""

from __future__ import annotations

from tests.factories import Api
from tests.scim.conftest import Scim, user_body


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
