"""The Integrations pages through HTTP: API tokens (created and shown once, used against the API,
revoked and then refused), SCIM tokens and settings, roles, CSRF, another company's records (404)
and the event of every change. Webhook endpoints are in test_integrations_webhooks.py."""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from outfitter.models import ApiToken, ScimSettings
from tests.console.conftest import Browser, sign_up
from tests.factories import Api

NEW_TOKEN = re.compile(r'<code id="new-token">(otf_[A-Za-z0-9_-]+)</code>')


def shown_token(answer: Any) -> str:
    found = NEW_TOKEN.search(answer.text)
    assert found, answer.text
    return found.group(1)


def events(api: Api, type_: str) -> list[dict[str, Any]]:
    answer = api.get("/client/events", type=type_)
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["data"]["data"]
    return found


def create_token(ada: Browser, **fields: Any) -> Any:
    data = {"name": "Payroll sync", "scope": ["read"], "expires": "30", **fields}
    return ada.post("/integrations/tokens", {**data, "csrf_token": ada.csrf("/integrations/tokens")})


def test_a_token_is_shown_once_works_on_the_api_and_is_refused_once_revoked(
    app: FastAPI, engine: Engine, api: Api, client: TestClient, db: Session
) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    created = create_token(ada)
    assert created.status_code == 201
    token = shown_token(created)
    assert "Copy it now: it is not shown again" in created.text
    # Only its hash is stored, and the page never shows it again.
    record = db.scalars(select(ApiToken).where(ApiToken.name == "Payroll sync")).one()
    assert record.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert record.scopes == "read" and record.company_id == api.company_id
    assert record.expires_at is not None
    db.commit()  # on SQLite a reader holds the write lock
    listed = ada.get("/integrations/tokens")
    assert token not in listed.text and "Payroll sync" in listed.text

    # The new token reads the company's activity, in which its creation is an event (no secret).
    mine = Api(client, token, api.company_id, record.id)
    (event,) = events(mine, "api_token.created")
    assert event["actor"] == "console:ada@example.com"
    assert event["subject_id"] == str(record.id)
    assert event["data"]["name"] == "Payroll sync" and event["data"]["scopes"] == ["read"]
    assert event["data"]["revoked_at"] is None and token not in str(event)
    assert "token_hash" not in event["data"]
    # read only: a write is refused by the API's scope check.
    assert mine.post("/client/departments", {"name": "Ops"}).status_code == 403
    listed = ada.get("/integrations/tokens")
    row = re.search(rf'<tr data-token="{record.id}">.*?</tr>', listed.text, re.S)
    assert row and "<time" in row.group(0).split("data-last-used>")[1], "last use shown"

    revoked = ada.post(f"/integrations/tokens/{record.id}/revoke", {"csrf_token": ada.csrf()})
    assert revoked.status_code == 303
    assert revoked.headers["location"] == "/console/integrations/tokens?saved=revoked"
    refused = mine.get("/client/events")
    assert refused.status_code == 401 and refused.json()["message"] == "The token has been revoked."
    (event,) = events(api, "api_token.revoked")
    assert event["data"]["revoked_at"] and event["actor"] == "console:ada@example.com"
    # Revoking again changes nothing and records nothing.
    again = ada.post(f"/integrations/tokens/{record.id}/revoke", {"csrf_token": ada.csrf()})
    assert again.status_code == 303 and len(events(api, "api_token.revoked")) == 1
    assert "revoked" in ada.get("/integrations/tokens").text


def test_the_token_form_says_what_is_wrong_and_writes_nothing(
    app: FastAPI, engine: Engine, api: Api, db: Session
) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    for fields, message in (
        ({"scope": []}, "Choose at least one scope."),
        ({"scope": ["scim"]}, "Choose read, write or both."),
        ({"expires": "7"}, "Choose an expiry from the list."),
        ({"name": "two\nlines"}, "The name: "),
        ({"name": "x" * 201}, "The name has 201 characters; at most 200."),
    ):
        answer = create_token(ada, **fields)
        assert answer.status_code == 422, fields
        assert message in answer.text, (fields, answer.text)
        assert 'id="new-token"' not in answer.text
    assert db.scalars(select(ApiToken).where(ApiToken.company_id == api.company_id)).all() == [
        db.get(ApiToken, api.token_id)
    ]
    db.commit()
    assert events(api, "api_token.*") == []


def test_viewers_read_the_integrations_and_change_nothing(
    app: FastAPI, engine: Engine, api: Api, db: Session
) -> None:
    kim = sign_up(app, engine, api.company_id, "kim@example.com", role="viewer")
    for path in ("/integrations/tokens", "/integrations/webhooks", "/integrations/scim"):
        shown = kim.get(path)
        assert shown.status_code == 200, path
        assert "Integrations" in shown.text and 'action="/console/integrations' not in shown.text
    csrf = kim.csrf("/integrations/tokens")
    for path, data in (
        ("/integrations/tokens", {"name": "Mine", "scope": "read"}),
        (f"/integrations/tokens/{api.token_id}/revoke", {}),
        ("/integrations/scim/tokens", {}),
        ("/integrations/scim/settings", {"default_country": "NG"}),
        ("/integrations/webhooks", {"url": "https://hooks.example.com/x"}),
    ):
        answer = kim.post(path, {**data, "csrf_token": csrf})
        assert answer.status_code == 403, path
        assert "Only an admin can change the company&#39;s integrations." in answer.text
    assert db.get(ApiToken, api.token_id).revoked_at is None  # type: ignore[union-attr]
    assert len(db.scalars(select(ApiToken)).all()) == 1
    db.commit()
    assert events(api, "api_token.*,scim_settings.*,webhook_endpoint.*") == []


def test_another_companys_token_is_not_found_and_forged_posts_are_refused(
    app: FastAPI, engine: Engine, api: Api, other_api: Api, db: Session
) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    for token_id in (other_api.token_id, uuid.uuid4(), "not-an-id"):
        answer = ada.post(f"/integrations/tokens/{token_id}/revoke", {"csrf_token": ada.csrf()})
        assert answer.status_code == 404
        assert "API token not found. It may be another company&#39;s, or gone." in answer.text
    assert db.get(ApiToken, other_api.token_id).revoked_at is None  # type: ignore[union-attr]
    db.commit()
    assert str(other_api.token_id) not in ada.get("/integrations/tokens").text
    # No CSRF token, or another site's origin: refused, nothing revoked.
    assert ada.post(f"/integrations/tokens/{api.token_id}/revoke", {}).status_code == 403
    forged = ada.post(
        f"/integrations/tokens/{api.token_id}/revoke",
        {"csrf_token": ada.csrf()},
        headers={"origin": "https://evil.example", "sec-fetch-site": "cross-site"},
    )
    assert forged.status_code == 403
    assert db.get(ApiToken, api.token_id).revoked_at is None  # type: ignore[union-attr]
    db.commit()
    assert "Content-Security-Policy" in ada.get("/integrations/tokens").headers


def test_the_scim_page_makes_a_scim_token_and_changes_the_settings(
    app: FastAPI, engine: Engine, api: Api, client: TestClient, db: Session, demo_catalog: None
) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    page = ada.get("/integrations/scim")
    base_url = app.state.settings.public_url.rstrip("/") + "/scim/v2"
    assert f'<code id="scim-base-url">{base_url}</code>' in page.text
    assert "Tenant URL" in page.text and "SCIM connector base URL" in page.text

    created = ada.post(
        "/integrations/scim/tokens", {"name": "", "expires": "never", "csrf_token": ada.csrf()}
    )
    assert created.status_code == 201
    token = shown_token(created)
    record = db.scalars(select(ApiToken).where(ApiToken.scopes == "scim")).one()
    assert record.name == "SCIM provisioning" and record.expires_at is None
    db.commit()
    # It opens /scim/v2 (an empty company: no user yet) and nothing else.
    users = client.get("/scim/v2/Users", headers={"Authorization": f"Bearer {token}"})
    assert users.status_code == 200 and users.json()["totalResults"] == 0
    assert (
        client.get("/api/v2/client/employees", headers={"Authorization": f"Bearer {token}"}).status_code
        == 403
    )
    assert token not in ada.get("/integrations/scim").text
    assert 'data-token="' + str(record.id) in ada.get("/integrations/scim").text

    refused = ada.post(
        "/integrations/scim/settings",
        {"default_country": "Atlantis", "offboard_retrieval": "yes", "csrf_token": ada.csrf()},
    )
    assert refused.status_code == 422
    assert "Unknown country &#39;Atlantis&#39;: give a name or a two-letter code." in refused.text
    assert db.get(ScimSettings, api.company_id) is None  # nothing saved, retrieval included
    db.commit()
    saved = ada.post(
        "/integrations/scim/settings",
        {"default_country": "kenya", "offboard_retrieval": "yes", "csrf_token": ada.csrf()},
    )
    assert saved.status_code == 303
    db.expire_all()
    settings = db.get(ScimSettings, api.company_id)
    assert settings is not None and settings.default_country == "KE" and settings.offboard_retrieval
    db.commit()
    (event,) = events(api, "scim_settings.updated")
    assert event["subject_id"] == str(api.company_id) and event["actor"] == "console:ada@example.com"
    assert event["data"]["default_country"] == "KE" and event["data"]["offboard_retrieval"] is True
    # The same values again: no change, no event.
    ada.post(
        "/integrations/scim/settings",
        {"default_country": "KE", "offboard_retrieval": "yes", "csrf_token": ada.csrf()},
    )
    assert len(events(api, "scim_settings.updated")) == 1
    activity = ada.get("/activity").text
    assert "console:ada@example.com changed" in activity and "the SCIM settings" in activity
    assert "created API token" in activity
