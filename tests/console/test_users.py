"""The users page: an admin invites, changes a role and deactivates; a viewer may not."""

from __future__ import annotations

import re
import uuid

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from outfitter.models import ConsoleUser
from tests.console.conftest import PASSWORD, form_token, sign_up
from tests.factories import Api


def user_id(engine: Engine, email: str) -> str:
    with Session(engine) as session:
        return str(session.scalars(select(ConsoleUser.id).where(ConsoleUser.email == email)).one())


def test_an_admin_invites_changes_a_role_and_deactivates(app: FastAPI, engine: Engine, api: Api) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    token = ada.csrf("/users")
    invited = ada.post("/users", {"email": "Bob@Example.com", "role": "viewer", "csrf_token": token})
    assert invited.status_code == 201
    link = re.search(r'<code id="invite-link">([^<]+)</code>', invited.text).group(1)  # type: ignore[union-attr]
    assert link.startswith("http://testserver/console/invite/")
    taken = ada.post("/users", {"email": "ada@example.com", "role": "viewer", "csrf_token": token})
    assert taken.status_code == 422 and "already has a console account" in taken.text

    bob = TestClient(app, base_url="http://testserver", follow_redirects=False)
    page = bob.get(link.removeprefix("http://testserver"))
    answer = bob.post(
        link.removeprefix("http://testserver"),
        data={"password": PASSWORD, "confirm": PASSWORD, "csrf_token": form_token(page)},
    )
    assert answer.status_code == 303 and bob.get("/console/users").status_code == 403  # a viewer

    bob_id = user_id(engine, "bob@example.com")
    promoted = ada.post(f"/users/{bob_id}", {"role": "admin", "csrf_token": token})
    assert promoted.status_code == 303
    assert bob.get("/console/").status_code == 303  # a role change ends their sessions
    deactivated = ada.post(f"/users/{bob_id}", {"deactivate": "yes", "csrf_token": token})
    assert deactivated.status_code == 303 and "deactivated" in ada.get("/users").text

    myself = ada.post(f"/users/{user_id(engine, 'ada@example.com')}", {"role": "viewer", "csrf_token": token})
    assert myself.status_code == 409 and "cannot change your own role" in myself.text


def test_users_of_another_company_are_404_and_invisible(
    app: FastAPI, engine: Engine, api: Api, other_api: Api
) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    sign_up(app, engine, other_api.company_id, "gus@globex.example")
    assert "gus@globex.example" not in ada.get("/users").text
    gus_id = user_id(engine, "gus@globex.example")
    refused = ada.post(f"/users/{gus_id}", {"deactivate": "yes", "csrf_token": ada.csrf()})
    assert refused.status_code == 404
    with Session(engine) as session:
        gus = session.get(ConsoleUser, uuid.UUID(gus_id))
        assert gus is not None and gus.deactivated_at is None
    # Inviting another company's user reads as any taken address: nothing more is learnt.
    taken = ada.post("/users", {"email": "gus@globex.example", "role": "viewer", "csrf_token": ada.csrf()})
    assert taken.status_code == 422 and "already has a console account" in taken.text
