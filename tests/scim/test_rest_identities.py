"""An employee created through the REST API may not take an email that is already another employee's
SCIM userName: SCIM refuses the same collision the other way, and an identity provider's `userName
eq` lookup must never find two Users."""

from __future__ import annotations

from tests.factories import Api, assert_error
from tests.people.helpers import employee_body
from tests.scim.conftest import Scim, user_body

TAKEN = "The email gina@acme.com is the SCIM userName of another employee of this company."


def test_the_rest_creates_refuse_an_email_that_is_a_scim_user_name(
    scim: Scim, api: Api, other_api: Api
) -> None:
    # Entra's usual case: the login (UPN) is not the mailbox
    body = user_body("gina@acme.com", emails=[{"primary": True, "value": "gina.w@acme.com", "type": "work"}])
    assert scim.post("/Users", body).status_code == 201

    single = assert_error(api.post("/client/employees", employee_body(email="Gina@acme.com")), 409)
    assert single["message"] == TAKEN
    bulk = api.post(
        "/client/employees/bulk", {"employees": [employee_body(), employee_body(email="gina@acme.com")]}
    )
    assert assert_error(bulk, 422)["errors"] == {"employees.1.email": [TAKEN]}
    header = "first_name,last_name,email,country_id,phone,address\n"
    imported = api.request(
        "POST",
        "/client/employees/import",
        content=(header + "Gina,Twin,gina@acme.com,NG,+234 801 234 5678,1 Road\n").encode(),
        headers={"Content-Type": "text/csv"},
    )
    assert assert_error(imported, 422)["errors"] == {"rows.2.email": [TAKEN]}

    found = scim.get("/Users", filter='userName eq "gina@acme.com"').json()
    assert found["totalResults"] == 1 and found["Resources"][0]["emails"][0]["value"] == "gina.w@acme.com"
    assert [employee["email"] for employee in api.get("/client/employees").json()["data"]["data"]] == [
        "gina.w@acme.com"
    ]
    # another company's userName is no concern of this one
    assert other_api.post("/client/employees", employee_body(email="gina@acme.com")).status_code == 201
