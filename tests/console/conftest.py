"""Console test helpers: users invited and signed up through the console's own pages."""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pyotp
import pytest
from argon2 import PasswordHasher
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from outfitter.console import accounts
from outfitter.db.tenancy import TenantSession, across_companies
from outfitter.models import ConsoleRole
from tests.payments.test_browser import CHROMIUM, CHROMIUM_ARGS

PASSWORD = "a long passphrase of mine"
TOKEN_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')


def invite_token(engine: Engine, company_id: uuid.UUID, email: str, role: str = "admin") -> str:
    with across_companies(TenantSession(engine)) as session, session.begin():
        return accounts.invite(session, company_id, email, ConsoleRole(role)).token


def form_token(response: httpx.Response) -> str:
    found = TOKEN_FIELD.search(response.text)
    assert found, response.text
    return found.group(1)


@dataclass
class Browser:
    """A browser's view of the console: its own cookie jar."""

    client: TestClient
    email: str

    def get(self, path: str, **kwargs: object) -> httpx.Response:
        return self.client.get(f"/console{path}", **kwargs)  # type: ignore[arg-type]

    def post(self, path: str, data: dict[str, str] | None = None, **kwargs: object) -> httpx.Response:
        return self.client.post(f"/console{path}", data=data, **kwargs)  # type: ignore[arg-type]

    def csrf(self, path: str = "/") -> str:
        return form_token(self.get(path))

    @property
    def session_cookie(self) -> str | None:
        return self.client.cookies.get("outfitter_session")


def sign_up(app: FastAPI, engine: Engine, company_id: uuid.UUID, email: str, role: str = "admin") -> Browser:
    """A new browser whose user accepted an invite (and is so signed in)."""
    client = TestClient(app, base_url="http://testserver", follow_redirects=False)
    token = invite_token(engine, company_id, email, role)
    page = client.get(f"/console/invite/{token}")
    answer = client.post(
        f"/console/invite/{token}",
        data={"password": PASSWORD, "confirm": PASSWORD, "csrf_token": form_token(page)},
    )
    assert answer.status_code == 303, answer.text
    return Browser(client, email)


@pytest.fixture(autouse=True, scope="session")
def _cheaper_password_hashes() -> Iterator[None]:
    """argon2id with a small cost: the suite signs in hundreds of times, and the cost is not what
    these tests prove (the stored hash is still argon2id, checked by test_sign_in)."""
    production = accounts._hasher
    accounts._hasher = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)
    yield
    accounts._hasher = production


@pytest.fixture(autouse=True)
def _fresh_sign_in_limits(app: FastAPI) -> Iterator[None]:
    """Each test starts with no sign-in attempt counted (the app is the session's)."""
    for limiter in (*app.state.console_sign_in_limits, *app.state.operator_sign_in_limits):
        limiter.storage.reset()
    yield


# --- a real browser (Debian's Chromium through Playwright), shared by the browser test modules ---

AXE = Path(__file__).with_name("axe.min.js")
# Set to a folder (docs/console) to save a screenshot of each page there.
SCREENSHOTS = os.environ.get("CONSOLE_SCREENSHOTS")
SERIOUS = """() => axe.run(document, {resultTypes: ['violations']}).then(result =>
  result.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
    .map(v => v.id + ': ' + v.help + ' at ' + v.nodes.map(n => n.target.join(' ')).join(', ')))"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        message = "the console's browser tests need Debian's chromium at /usr/bin/chromium"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need playwright")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def check_page(page: Any, name: str) -> None:
    """No serious or critical axe violation, no horizontal scroll, and a screenshot when asked.

    axe (650 KB) is handed to the page's context once, which evaluates it in each page it opens
    from then on; sending it through Playwright's driver for every check cost more than axe's run."""
    if page.evaluate("typeof axe === 'undefined'"):
        if not getattr(page.context, "axe_on_every_page", False):
            page.context.add_init_script(path=str(AXE))
            page.context.axe_on_every_page = True
        page.add_script_tag(path=str(AXE))
    assert page.evaluate(SERIOUS) == [], name
    width = page.viewport_size["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= width, f"{name} scrolls sideways"
    if SCREENSHOTS:
        page.screenshot(path=str(Path(SCREENSHOTS) / f"{name}.png"), full_page=True)


def tab_to(page: Any, selector: str, presses: int = 60) -> None:
    """Press Tab until `selector` has the focus, which must be visible."""
    for _ in range(presses):
        page.keyboard.press("Tab")
        if page.evaluate("s => document.activeElement && document.activeElement.matches(s)", selector):
            assert page.evaluate("document.activeElement.matches(':focus-visible')"), selector
            return
    pytest.fail(f"Tab never reached {selector}")


# --- the operator console (/operator) ------------------------------------------------------------

OPERATOR_SECRET = re.compile(r'<code id="totp-secret">([A-Z2-7]+)</code>')


def operator_invite(email: str) -> str:
    """`outfitter operator invite EMAIL` (the suite's database: the `cli_database` fixture): the link."""
    from tests.cli import run

    code, out, err = run("operator", "invite", email, "--json")
    assert code == 0, err
    link: str = json.loads(out)["link"]
    return urlsplit(link).path  # the CLI's public URL is not the test client's


def totp_code(secret: str, steps_ahead: int = 0) -> str:
    """The code an authenticator app shows now (or `steps_ahead` steps of 30 s later, which the
    server accepts within its window: a second code without waiting for the clock)."""
    totp = pyotp.TOTP(secret)
    return totp.at(datetime.now(UTC) + timedelta(seconds=30 * steps_ahead))


@dataclass
class Operator:
    client: TestClient
    email: str
    secret: str

    def get(self, path: str, **kwargs: object) -> httpx.Response:
        return self.client.get(f"/operator{path}", **kwargs)  # type: ignore[arg-type]

    def post(self, path: str, data: dict[str, Any] | None = None, **kwargs: object) -> httpx.Response:
        return self.client.post(f"/operator{path}", data=data, **kwargs)  # type: ignore[arg-type]

    def csrf(self, path: str = "/") -> str:
        return form_token(self.get(path))

    @property
    def actor(self) -> str:
        return f"operator:{self.email}"


def operator_sign_up(app: FastAPI, email: str = "olu@outfitter.example") -> Operator:
    """An operator invited by the CLI who accepted the invite (password and TOTP code), signed in."""
    client = TestClient(app, base_url="http://testserver", follow_redirects=False)
    link = operator_invite(email)
    page = client.get(link)
    found = OPERATOR_SECRET.search(page.text)
    assert found, page.text
    secret = found.group(1)
    answer = client.post(
        link,
        data={
            "password": PASSWORD,
            "confirm": PASSWORD,
            "code": totp_code(secret),
            "csrf_token": form_token(page),
        },
    )
    assert answer.status_code == 303, answer.text
    return Operator(client, email, secret)


def operator_accepts_invite_in(page: Any, base: str, email: str) -> str:
    """In a browser page: `outfitter operator invite EMAIL`'s link opened, the password set and the
    app's code given, signed in on /operator/. Answers the TOTP key the page showed."""
    page.goto(f"{base}{operator_invite(email)}")
    check_page(page, "operator-invite")
    secret: str = page.locator("#totp-secret").inner_text()
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    page.get_by_label("Code from your app").fill(totp_code(secret))
    page.get_by_role("button", name="Set password and sign in").click()
    page.wait_for_url(f"{base}/operator/")
    return secret
