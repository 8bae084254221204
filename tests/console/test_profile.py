"""The profile through HTTP: a password change ends the other sessions, TOTP enrolment and the
sign-in's second step (codes from pyotp), the company's "require TOTP", the sessions list, and
every change to a console user an event with the acting user as actor."""

from __future__ import annotations

import re
import time
from typing import Any

import pyotp
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from outfitter.console.security import WRONG_CODE
from tests.console.conftest import PASSWORD, Browser, form_token, sign_up
from tests.factories import Api

NEW_PASSWORD = "another long passphrase"
SECRET = re.compile(r'id="totp-secret">([A-Z2-7]+)<')


def signed_in(app: FastAPI, email: str, password: str = PASSWORD, user_agent: str = "testclient") -> Browser:
    """A second browser of an existing user, signed in with the password only."""
    client = TestClient(
        app, base_url="http://testserver", follow_redirects=False, headers={"user-agent": user_agent}
    )
    page = client.get("/console/sign-in")
    answer = client.post(
        "/console/sign-in", data={"email": email, "password": password, "csrf_token": form_token(page)}
    )
    assert answer.status_code == 303, answer.text
    return Browser(client, email)


def post_form(browser: Browser, path: str, page: str = "/profile", **fields: str) -> Any:
    return browser.post(path, {**fields, "csrf_token": browser.csrf(page)})


def events(api: Api, type: str) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = api.get("/client/events", type=type).json()["data"]["data"]
    return records


def enrol(browser: Browser) -> pyotp.TOTP:
    started = post_form(browser, "/profile/totp/start")
    assert started.status_code == 200, started.text
    secret = SECRET.search(started.text).group(1)  # type: ignore[union-attr]
    assert (
        f'id="totp-uri">otpauth://totp/Outfitter:{browser.email.replace("@", "%40")}?secret={secret}'
        in started.text
    )
    assert 'src="data:image/svg+xml' in started.text  # the QR code, drawn on the server
    totp = pyotp.TOTP(secret)
    wrong = post_form(browser, "/profile/totp/confirm", code="000000" if totp.now() != "000000" else "111111")
    assert wrong.status_code == 422 and WRONG_CODE in wrong.text
    confirmed = post_form(browser, "/profile/totp/confirm", code=totp.now())
    assert confirmed.status_code == 303 and confirmed.headers["location"].endswith("saved=totp-on")
    return totp


def password_step(client: TestClient, email: str, password: str = PASSWORD) -> Any:
    page = client.get("/console/sign-in")
    return client.post(
        "/console/sign-in",
        data={
            "email": email,
            "password": password,
            "csrf_token": form_token(page),
            "next": "/console/devices",
        },
    )


def test_a_password_change_ends_every_other_session_and_rotates_this_one(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    other = signed_in(app, "ada@example.com", user_agent="Firefox on the other laptop")
    sessions = ada.get("/profile")
    assert "Firefox on the other laptop" in sessions.text and "this browser" in sessions.text

    wrong = post_form(
        ada, "/profile/password", current="not my password", new=NEW_PASSWORD, confirm=NEW_PASSWORD
    )
    assert wrong.status_code == 422 and "The current password is wrong." in wrong.text
    common = post_form(ada, "/profile/password", current=PASSWORD, new="password1234", confirm="password1234")
    assert common.status_code == 422 and "one of the commonest" in common.text
    short = post_form(ada, "/profile/password", current=PASSWORD, new="short", confirm="short")
    assert short.status_code == 422 and "at least 12 characters" in short.text
    assert other.get("/").status_code == 200  # refused changes changed nothing

    old_cookie = ada.session_cookie
    changed = post_form(ada, "/profile/password", current=PASSWORD, new=NEW_PASSWORD, confirm=NEW_PASSWORD)
    assert changed.status_code == 303, changed.text
    assert ada.session_cookie and ada.session_cookie != old_cookie
    assert ada.get("/").status_code == 200
    assert other.get("/").headers["location"].startswith("/console/sign-in")  # the other session ended
    replay = TestClient(app, base_url="http://testserver", follow_redirects=False)
    replay.cookies.set("outfitter_session", old_cookie or "")
    assert replay.get("/console/").status_code == 303  # the old cookie is refused
    assert "Firefox on the other laptop" not in ada.get("/profile").text

    assert password_step(TestClient(app, follow_redirects=False), "ada@example.com").status_code == 401
    assert (
        password_step(TestClient(app, follow_redirects=False), "ada@example.com", NEW_PASSWORD).status_code
        == 303
    )
    (event,) = events(api, "console_user.password_changed")
    assert event["actor"] == "console:ada@example.com" and event["data"]["email"] == "ada@example.com"
    assert not {"password", "password_hash", "totp_secret", "invite_hash"} & set(event["data"])


def test_totp_enrol_then_sign_in_with_a_code_refusing_wrong_and_replayed_codes(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    totp = enrol(ada)
    assert 'id="totp-state">On' in ada.get("/profile").text
    (event,) = events(api, "console_user.totp_enabled")
    assert event["actor"] == "console:ada@example.com" and event["data"]["totp_enabled"] is True
    assert totp.secret not in str(event)

    browser = TestClient(app, base_url="http://testserver", follow_redirects=False)
    answer = password_step(browser, "ada@example.com")
    assert answer.status_code == 303 and answer.headers["location"].startswith("/console/sign-in/code")
    pending = browser.cookies.get("outfitter_session")
    assert browser.get("/console/").status_code == 303  # no session until the code
    code_page = browser.get(answer.headers["location"])
    assert code_page.status_code == 200 and 'autocomplete="one-time-code"' in code_page.text
    token = form_token(code_page)

    def send(code: str) -> Any:
        return browser.post(
            "/console/sign-in/code", data={"code": code, "csrf_token": token, "next": "/console/devices"}
        )

    wrong, replayed = send("12345"), send(totp.now())  # the enrolment spent this step's code
    assert wrong.status_code == replayed.status_code == 401
    assert WRONG_CODE in wrong.text and WRONG_CODE in replayed.text
    accepted = send(totp.at(time.time() + 30))  # the next step's, within the window
    assert accepted.status_code == 303 and accepted.headers["location"] == "/console/devices"
    assert browser.cookies.get("outfitter_session") not in (None, pending)  # a new id
    assert browser.get("/console/devices").status_code == 200

    # Off with the password: sign-in asks for the password only again.
    off = post_form(ada, "/profile/totp/disable", proof=PASSWORD)
    assert off.status_code == 303
    assert events(api, "console_user.totp_disabled")[0]["actor"] == "console:ada@example.com"
    assert password_step(TestClient(app, follow_redirects=False), "ada@example.com").headers["location"] == (
        "/console/devices"
    )


def test_the_code_step_is_rate_limited_like_sign_in(app: FastAPI, engine: Engine, api: Api) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    totp = enrol(ada)
    browser = TestClient(app, base_url="http://testserver", follow_redirects=False)
    answer = password_step(browser, "ada@example.com")  # one attempt of the account's ten
    token = form_token(browser.get(answer.headers["location"]))
    statuses = [
        browser.post("/console/sign-in/code", data={"code": "000001", "csrf_token": token}).status_code
        for _ in range(10)
    ]
    assert statuses == [401] * 9 + [429]
    limited = browser.post(
        "/console/sign-in/code", data={"code": totp.at(time.time() + 30), "csrf_token": token}
    )
    assert limited.status_code == 429 and "Too many attempts" in limited.text
    assert browser.get("/console/").status_code == 303


def test_a_company_requiring_totp_sends_users_without_it_to_enrol_first(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    bob = sign_up(app, engine, api.company_id, "bob@example.com", role="viewer")
    refused = post_form(bob, "/settings/second-factor", page="/profile", require_totp="yes")
    assert refused.status_code == 403
    assert bob.get("/devices").status_code == 200

    enrol(ada)
    assert post_form(ada, "/settings/second-factor", page="/users", require_totp="yes").status_code == 303
    assert 'name="require_totp" value="yes" checked' in ada.get("/users").text
    # The change is an event naming the admin; setting it again changes nothing and writes none.
    assert post_form(ada, "/settings/second-factor", page="/users", require_totp="yes").status_code == 303
    events = api.get("/client/events", type="console_settings.updated").json()["data"]["data"]
    assert [(e["subject_id"], e["actor"], e["data"]) for e in events] == [
        (str(api.company_id), "console:ada@example.com", {"require_totp": True})
    ]
    for path in ("/", "/devices", "/orders"):
        sent = bob.get(path)
        assert sent.status_code == 303 and sent.headers["location"] == "/console/profile?enrol=required", path
    profile = bob.get("/profile?enrol=required")
    assert profile.status_code == 200 and 'id="enrol-required"' in profile.text
    enrol(bob)
    assert bob.get("/devices").status_code == 200
    kept = post_form(bob, "/profile/totp/disable", proof=PASSWORD)
    assert kept.status_code == 422 and "requires a second factor" in kept.text
    assert 'id="totp-state">On' in bob.get("/profile").text


def test_sessions_list_ends_one_or_every_other(app: FastAPI, engine: Engine, api: Api) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    phone = signed_in(app, "ada@example.com", user_agent="Safari on a phone")
    tablet = signed_in(app, "ada@example.com", user_agent="Chrome on a tablet")
    page = ada.get("/profile")
    refs = re.findall(r'name="ref" value="([0-9a-f]+)"', page.text)
    assert len(refs) == 2 and "Safari on a phone" in page.text and "Chrome on a tablet" in page.text
    phone_row = page.text.index("Safari on a phone")
    phone_ref = next(ref for ref in refs if page.text.index(ref) > phone_row)
    assert post_form(ada, "/profile/sessions/end", ref=phone_ref).status_code == 303
    assert phone.get("/").status_code == 303 and tablet.get("/").status_code == 200
    # Bob cannot end Ada's sessions, whatever ref he sends.
    bob = sign_up(app, engine, api.company_id, "bob@example.com")
    bob_refs = re.findall(r'name="ref" value="([0-9a-f]+)"', ada.get("/profile").text)
    for ref in bob_refs:
        post_form(bob, "/profile/sessions/end", ref=ref)
    assert tablet.get("/").status_code == 200
    assert post_form(ada, "/profile/sessions/end").status_code == 303
    assert tablet.get("/").status_code == 303 and ada.get("/").status_code == 200


def test_user_changes_are_events_with_the_admin_as_actor_and_reach_webhooks(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    endpoint = api.post(
        "/client/webhook-endpoints",
        {"url": "https://hooks.acme.invalid/outfitter", "event_types": ["console_user.role_changed"]},
    ).json()["data"]
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    invited = post_form(ada, "/users", page="/users", email="cy@example.com", role="viewer")
    assert invited.status_code == 201
    (invite,) = [
        event for event in events(api, "console_user.invited") if event["data"]["email"] == "cy@example.com"
    ]
    assert invite["actor"] == "console:ada@example.com"
    assert invite["data"]["status"] == "invited" and invite["data"]["role"] == "viewer"
    cy_id = invite["subject_id"]
    assert post_form(ada, f"/users/{cy_id}", page="/users", role="admin").status_code == 303
    assert post_form(ada, f"/users/{cy_id}", page="/users", deactivate="yes").status_code == 303

    changed = events(api, "console_user.*")
    assert [(event["type"], event["subject_id"]) for event in changed[:3]] == [
        ("console_user.deactivated", cy_id),
        ("console_user.role_changed", cy_id),
        ("console_user.invited", cy_id),
    ]
    assert {event["actor"] for event in changed[:3]} == {"console:ada@example.com"}
    assert changed[0]["data"]["status"] == "deactivated" and changed[1]["data"]["role"] == "admin"
    for event in changed:
        assert not {"password_hash", "totp_secret", "invite_hash", "token"} & set(event["data"])
    deliveries = api.get(f"/client/webhook-endpoints/{endpoint['id']}/deliveries").json()["data"]["data"]
    assert [delivery["event_type"] for delivery in deliveries] == ["console_user.role_changed"]
