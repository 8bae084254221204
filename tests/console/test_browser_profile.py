"""The profile and the orders pages in a real browser (Debian's Chromium through Playwright): the
dashboard's stage tile leads to the orders it counts and to an order; TOTP enrolled and a sign-in
with a code (pyotp's); a password changed; the same with the keyboard alone at 360 px; axe-core on
every page (check_page)."""

from __future__ import annotations

import re
import time
from typing import Any

import pyotp
import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tests.console.conftest import PASSWORD, check_page, invite_token, tab_to
from tests.console.test_orders_pages import place_orders
from tests.factories import Api
from tests.payments.conftest import LiveServer, live_server  # noqa: F401  (the module's server)

pytestmark = pytest.mark.one_database
NEW_PASSWORD = "another long passphrase"


def next_code(secret: str) -> str:
    """The next time step's code: the enrolment spent the current one, and the window accepts it."""
    return pyotp.TOTP(secret).at(time.time() + 30)


def test_dashboard_to_orders_totp_and_password_with_the_mouse(
    browser: Any,
    engine: Engine,
    live_server: LiveServer,  # noqa: F811
    api: Api,
    db: Session,
    demo_catalog: None,
) -> None:
    orders = place_orders(api, db, engine)
    token = invite_token(engine, api.company_id, "ada@example.com")
    context = browser.new_context(bypass_csp=True, viewport={"width": 1200, "height": 900})  # for axe
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    base = live_server.url
    try:
        page.goto(f"{base}/console/invite/{token}")
        page.get_by_label("Password", exact=True).fill(PASSWORD)
        page.get_by_label("Password again").fill(PASSWORD)
        page.get_by_role("button", name="Set password and sign in").click()
        page.wait_for_url(f"{base}/console/")
        check_page(page, "dashboard")

        # The stage tile links to the orders it counts, and each order to its own page.
        assert page.locator('#stages-table td[data-figure="Product setup"]').inner_text() == "1"
        page.get_by_role("link", name="Product setup").click()
        page.wait_for_url(f"{base}/console/orders?status=in_progress&stage=product_setup")
        check_page(page, "orders")
        rows = page.locator("table.list tbody tr")
        assert rows.count() == 1 and "Purchase" in rows.first.inner_text()
        rows.first.get_by_role("link").click()
        page.wait_for_url(f"{base}/console/orders/{orders['purchase']['id']}")
        assert page.locator("#order-stage").inner_text() == "Product setup"
        check_page(page, "order")

        # TOTP: enrol from the profile (the header's email links there).
        page.get_by_role("link", name="Your profile: ada@example.com").click()
        page.wait_for_url(f"{base}/console/profile")
        check_page(page, "profile")
        page.get_by_role("button", name="Set up a second factor").click()
        secret = page.locator("#totp-secret").inner_text()
        assert page.locator("#totp-uri").inner_text().startswith("otpauth://totp/Outfitter:")
        check_page(page, "profile-totp")
        page.get_by_label("Code from the app").fill(pyotp.TOTP(secret).now())
        page.get_by_role("button", name="Turn on").click()
        page.wait_for_url(f"{base}/console/profile?saved=totp-on")
        assert page.locator("#totp-state").inner_text().startswith("On")

        # A new password, then sign out and in again with it and a code.
        page.get_by_label("Current password").fill(PASSWORD)
        page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
        page.get_by_label("New password again").fill(NEW_PASSWORD)
        page.get_by_role("button", name="Change password").click()
        page.wait_for_url(f"{base}/console/profile?saved=password")
        assert "Your password is changed" in page.get_by_role("status").first.inner_text()
        page.get_by_role("button", name="Sign out").first.click()
        page.wait_for_url(re.compile(r".*/console/sign-in\?signed_out=1$"))
        page.get_by_label("Email").fill("ada@example.com")
        page.get_by_label("Password").fill(NEW_PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(re.compile(r".*/console/sign-in/code.*"))
        check_page(page, "sign-in-code")
        page.get_by_label("Code").fill(next_code(secret))
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{base}/console/")
        assert errors == []
    finally:
        context.close()


def test_the_same_with_the_keyboard_alone_at_360_px(
    browser: Any,
    engine: Engine,
    live_server: LiveServer,  # noqa: F811
    api: Api,
    db: Session,
    demo_catalog: None,
) -> None:
    place_orders(api, db, engine)
    token = invite_token(engine, api.company_id, "kim@example.com")
    context = browser.new_context(bypass_csp=True, viewport={"width": 360, "height": 740})
    page = context.new_page()
    base = live_server.url
    try:
        page.goto(f"{base}/console/invite/{token}")
        tab_to(page, "#password")
        page.keyboard.type(PASSWORD)
        tab_to(page, "#confirm")
        page.keyboard.type(PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{base}/console/")

        tab_to(page, 'a[href="/console/orders?status=in_progress&stage=product_setup"]', presses=120)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{base}/console/orders?status=in_progress&stage=product_setup")
        check_page(page, "orders-360")
        tab_to(page, 'table.list a[href^="/console/orders/"]')
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/console/orders/[0-9a-f-]{36}$"))
        check_page(page, "order-360")

        tab_to(page, 'a[href="/console/profile"]')
        page.keyboard.press("Enter")
        page.wait_for_url(f"{base}/console/profile")
        check_page(page, "profile-360")
        tab_to(page, 'form[action="/console/profile/totp/start"] button')
        page.keyboard.press("Enter")
        page.wait_for_selector("#totp-secret")
        secret = page.locator("#totp-secret").inner_text()
        check_page(page, "profile-totp-360")
        tab_to(page, "#totp-code")
        page.keyboard.type(pyotp.TOTP(secret).now())
        page.keyboard.press("Enter")
        page.wait_for_url(f"{base}/console/profile?saved=totp-on")

        tab_to(page, "#current")
        page.keyboard.type(PASSWORD)
        tab_to(page, "#new")
        page.keyboard.type(NEW_PASSWORD)
        tab_to(page, "#confirm")
        page.keyboard.type(NEW_PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{base}/console/profile?saved=password")

        tab_to(page, "button.link")  # Sign out
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/console/sign-in\?signed_out=1$"))
        tab_to(page, "#email")
        page.keyboard.type("kim@example.com")
        tab_to(page, "#password")
        page.keyboard.type(NEW_PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/console/sign-in/code.*"))
        check_page(page, "sign-in-code-360")
        tab_to(page, "#code")
        page.keyboard.type(next_code(secret))
        page.keyboard.press("Enter")
        page.wait_for_url(f"{base}/console/")
    finally:
        context.close()
