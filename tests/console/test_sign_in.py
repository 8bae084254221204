"""Console sign-in through HTTP: invites, passwords, sessions, cookies, CSRF and rate limits."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from outfitter.app import create_app
from outfitter.cli import app as cli
from outfitter.config import Settings, get_settings
from outfitter.models import ConsoleSession, ConsoleUser
from tests.console.conftest import PASSWORD, Browser, form_token, invite_token, sign_up
from tests.factories import Api

WRONG = "The email or the password is wrong."


def sessions_of(engine: Engine, email: str) -> int:
    with Session(engine) as session:
        return (
            session.scalar(
                select(func.count())
                .select_from(ConsoleSession)
                .join(ConsoleUser, ConsoleUser.id == ConsoleSession.user_id)
                .where(ConsoleUser.email == email)
            )
            or 0
        )


def sign_in(browser: TestClient, email: str, password: str, **headers: str) -> tuple[int, str, str]:
    page = browser.get("/console/sign-in")
    answer = browser.post(
        "/console/sign-in",
        data={"email": email, "password": password, "csrf_token": form_token(page)},
        headers=headers,
    )
    return answer.status_code, answer.text, answer.headers.get("location", "")


@pytest.fixture
def browser(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, base_url="http://testserver", follow_redirects=False) as fresh:
        yield fresh


def test_cli_invite_prints_a_one_time_link_that_sets_the_password(
    monkeypatch: pytest.MonkeyPatch, database_url: str, engine: Engine, api: Api, browser: TestClient
) -> None:
    monkeypatch.setenv("OUTFITTER_DATABASE_URL", database_url)
    monkeypatch.setenv("OUTFITTER_PUBLIC_URL", "http://testserver")
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(
            cli, ["user", "invite", str(api.company_id), "Ada@Example.com", "--role", "admin", "--json"]
        )
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.stderr
    invited = json.loads(result.stdout)
    assert invited["email"] == "ada@example.com" and invited["role"] == "admin"
    assert invited["link"].startswith("http://testserver/console/invite/") and invited["expires_at"]
    path = invited["link"].removeprefix("http://testserver")

    page = browser.get(path)
    assert page.status_code == 200 and "ada@example.com" in page.text and "Acme Ltd" in page.text
    token = form_token(page)
    for weak, says in (("short", "at least 12 characters"), ("Password1234", "one of the commonest")):
        refused = browser.post(path, data={"password": weak, "confirm": weak, "csrf_token": token})
        assert refused.status_code == 422 and says in refused.text
    differ = browser.post(path, data={"password": PASSWORD, "confirm": PASSWORD + "!", "csrf_token": token})
    assert differ.status_code == 422 and "The two passwords differ" in differ.text
    assert sessions_of(engine, "ada@example.com") == 0

    accepted = browser.post(path, data={"password": PASSWORD, "confirm": PASSWORD, "csrf_token": token})
    assert accepted.status_code == 303 and accepted.headers["location"] == "/console/"
    assert sessions_of(engine, "ada@example.com") == 1
    assert "ada@example.com" in browser.get("/console/").text
    # One time: the link is spent.
    assert browser.get(path).status_code == 404
    with Session(engine) as session:
        stored = session.scalars(select(ConsoleUser)).one()
    assert stored.password_hash is not None and stored.password_hash.startswith("$argon2id$")
    assert stored.invite_hash is None


def test_wrong_email_and_wrong_password_answer_alike(
    app: FastAPI, engine: Engine, api: Api, browser: TestClient
) -> None:
    sign_up(app, engine, api.company_id, "ada@example.com")
    wrong_password = sign_in(browser, "ada@example.com", "not the password at all")
    unknown_email = sign_in(browser, "bob@example.com", "not the password at all")
    assert wrong_password[0] == unknown_email[0] == 401
    assert WRONG in wrong_password[1] and WRONG in unknown_email[1]
    assert wrong_password[1].replace("ada@example.com", "X") == unknown_email[1].replace(
        "bob@example.com", "X"
    )
    assert sign_in(browser, "ADA@example.com", PASSWORD)[0] == 303  # the email in any case


def test_sign_in_sets_a_new_session_id_and_sign_out_ends_it_server_side(
    app: FastAPI, engine: Engine, api: Api, browser: TestClient
) -> None:
    sign_up(app, engine, api.company_id, "ada@example.com")
    browser.cookies.set("outfitter_session", "planted-by-an-attacker-0123456789", domain="testserver.local")
    status, _, location = sign_in(browser, "ada@example.com", PASSWORD)
    assert status == 303 and location == "/console/"
    first = browser.cookies.get("outfitter_session")
    assert first and first != "planted-by-an-attacker-0123456789"

    status, _, _ = sign_in(browser, "ada@example.com", PASSWORD)  # signing in again: a new id
    second = browser.cookies.get("outfitter_session")
    assert status == 303 and second != first
    stale = TestClient(app, base_url="http://testserver", follow_redirects=False)
    stale.cookies.set("outfitter_session", first)
    assert stale.get("/console/").status_code == 303  # the earlier session ended

    before = sessions_of(engine, "ada@example.com")
    signed_out = browser.post("/console/sign-out", data={"csrf_token": form_token(browser.get("/console/"))})
    assert signed_out.status_code == 303 and signed_out.headers["location"] == "/console/sign-in?signed_out=1"
    assert sessions_of(engine, "ada@example.com") == before - 1
    replayed = TestClient(app, base_url="http://testserver", follow_redirects=False)
    replayed.cookies.set("outfitter_session", second)  # a copy of the cookie kept after sign-out
    answer = replayed.get("/console/devices?status=Sold")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/sign-in?next=/console/devices?status=Sold"


@pytest.mark.one_database  # the cookie's flags: the same on either database
def test_cookie_flags_over_http(app: FastAPI, engine: Engine, api: Api, browser: TestClient) -> None:
    sign_up(app, engine, api.company_id, "ada@example.com")
    page = browser.get("/console/sign-in")
    answer = browser.post(
        "/console/sign-in",
        data={"email": "ada@example.com", "password": PASSWORD, "csrf_token": form_token(page)},
    )
    cookie = next(v for v in answer.headers.get_list("set-cookie") if v.startswith("outfitter_session="))
    flags = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite=lax", "path=/"} <= flags and "secure" not in flags


@pytest.mark.one_database  # the cookie's name and flags: the same on either database
def test_cookie_is_host_prefixed_and_secure_when_the_public_url_is_https(
    database_url: str, engine: Engine, api: Api
) -> None:
    secure_app = create_app(
        Settings(database_url=database_url, rate_limit="off", public_url="https://o.example")
    )
    try:
        token = invite_token(engine, api.company_id, "ada@example.com")
        with TestClient(secure_app, base_url="https://o.example", follow_redirects=False) as browser:
            page = browser.get(f"/console/invite/{token}")
            answer = browser.post(
                f"/console/invite/{token}",
                data={"password": PASSWORD, "confirm": PASSWORD, "csrf_token": form_token(page)},
                headers={"Origin": "https://o.example"},
            )
            assert answer.status_code == 303
            cookie = next(v for v in answer.headers.get_list("set-cookie") if "outfitter_session=" in v)
            assert cookie.startswith("__Host-outfitter_session=")
            flags = {part.strip().lower() for part in cookie.split(";")[1:]}
            assert {"httponly", "samesite=lax", "path=/", "secure"} <= flags
            assert browser.get("/console/").status_code == 200
    finally:
        secure_app.state.engine.dispose()


@pytest.mark.one_database  # CSRF is checked before any write
def test_a_forged_post_is_refused(app: FastAPI, engine: Engine, api: Api) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    token = ada.csrf()
    before = sessions_of(engine, "ada@example.com")
    # No token, a wrong token, another site's Origin, a cross-site fetch: 403, and nothing happens.
    for data, headers in (
        ({}, {}),
        ({"csrf_token": "guessed"}, {}),
        ({"csrf_token": token}, {"Origin": "https://evil.example"}),
        ({"csrf_token": token}, {"Sec-Fetch-Site": "cross-site"}),
    ):
        refused = ada.post("/sign-out", data, headers=headers)
        assert refused.status_code == 403, (data, headers)
        assert "not sent from this console" in refused.text
        assert sessions_of(engine, "ada@example.com") == before
    # The sign-in form's own token (before any session): a post without it is refused too.
    assert (
        ada.client.post(
            "/console/sign-in", data={"email": "ada@example.com", "password": PASSWORD}
        ).status_code
        == 403
    )
    # The real form, from the console's own origin, works.
    assert (
        ada.post(
            "/sign-out",
            {"csrf_token": token},
            headers={"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"},
        ).status_code
        == 303
    )


@pytest.mark.one_database  # the limiter counts in memory
def test_sign_in_attempts_are_rate_limited_per_account(
    app: FastAPI, engine: Engine, api: Api, browser: TestClient
) -> None:
    sign_up(app, engine, api.company_id, "ada@example.com")
    statuses = [sign_in(browser, "ada@example.com", "wrong password here")[0] for _ in range(10)]
    assert statuses == [401] * 10
    status, text, _ = sign_in(browser, "ada@example.com", PASSWORD)  # even the right one, for now
    assert status == 429 and "Too many sign-in attempts" in text
    assert sign_in(browser, "bob@example.com", "wrong password here")[0] == 401  # another account


def test_a_deactivated_user_is_signed_out(app: FastAPI, engine: Engine, api: Api) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    with Session(engine) as session, session.begin():
        user = session.scalars(select(ConsoleUser)).one()
        user.deactivated_at = user.created_at
    assert ada.get("/").status_code == 303
    assert sign_in(ada.client, "ada@example.com", PASSWORD)[0] == 401


@pytest.mark.one_database  # response headers
def test_pages_refuse_framing_and_inline_script(app: FastAPI, engine: Engine, api: Api) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    for path in ("/", "/devices", "/sign-in"):
        headers = ada.get(path).headers
        csp = headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert headers["x-frame-options"] == "DENY" and headers["cache-control"] == "no-store"


@pytest.mark.one_database  # routing
def test_the_console_is_not_in_the_api_document(client: TestClient) -> None:
    document = client.get("/api/v2/openapi.json").json()
    assert not [path for path in document["paths"] if "console" in path]
    assert client.get("/console", follow_redirects=False).headers["location"] == "/console/"


@pytest.mark.one_database  # the pages' rules, the same on either database
def test_viewer_reads_but_cannot_change(app: FastAPI, engine: Engine, api: Api) -> None:
    device = api.post("/client/equipment", json={"title": "MacBook", "status": "In_Storage"}).json()["data"]
    viewer: Browser = sign_up(app, engine, api.company_id, "vera@example.com", role="viewer")
    page = viewer.get(f"/devices/{device['id']}")
    assert page.status_code == 200 and "Change status" not in page.text
    refused = viewer.post(
        f"/devices/{device['id']}/status", {"status": "Sold", "csrf_token": form_token(page)}
    )
    assert refused.status_code == 403 and "Only an admin" in refused.text
    assert api.get(f"/client/equipment/{device['id']}").json()["data"]["status"] == "In_Storage"


@pytest.mark.one_database  # the link; `demo` itself runs on both in tests/core/test_cli.py
def test_demo_prints_a_link_that_signs_the_demo_admin_up(
    monkeypatch: pytest.MonkeyPatch, database_url: str, engine: Engine, browser: TestClient
) -> None:
    monkeypatch.setenv("OUTFITTER_DATABASE_URL", database_url)
    monkeypatch.setenv("OUTFITTER_PUBLIC_URL", "http://testserver")
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(cli, ["demo"])
        assert result.exit_code == 0, result.stdout
        line = next(line for line in result.stdout.splitlines() if line.startswith("Console:"))
        path = line.split()[1].removeprefix("http://testserver")
        page = browser.get(path)
        assert page.status_code == 200 and "admin@demo.example" in page.text
        data = {"password": PASSWORD, "confirm": PASSWORD, "csrf_token": form_token(page)}
        assert browser.post(path, data=data).status_code == 303
        assert "admin@demo.example" in browser.get("/console/").text
        # Run again, once the admin has a password: the sign-in page, no new link.
        again = CliRunner().invoke(cli, ["demo"])
        line = next(line for line in again.stdout.splitlines() if line.startswith("Console:"))
        assert line == "Console: http://testserver/console/sign-in (as admin@demo.example)"
    finally:
        get_settings.cache_clear()
