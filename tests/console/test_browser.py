"""The console in a real browser (Debian's Chromium through Playwright): an invite accepted, the
dashboard, a filter shared by its URL, a device's timeline and sign-out; the same with the keyboard
alone at 360 px wide; axe-core (vendored: tests/console/axe.min.js, 4.14.1) on every page.

One browser for the module. Without Chromium the tests skip, except under CI=true, where they fail:
CI must run them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.console.conftest import PASSWORD, check_page, invite_token, tab_to
from tests.factories import Api
from tests.payments.conftest import LiveServer, live_server  # noqa: F401  (the module's server)

# What the pages show is proven on both databases by the TestClient tests (test_pages.py): here
# the browser's part (scripts, focus, layout, axe), which no storage changes.
pytestmark = pytest.mark.one_database


def add_devices(api: Api) -> list[dict[str, Any]]:
    devices = []
    for number, (title, status, kind) in enumerate(
        [
            ("MacBook Pro 14", "In_Storage", "Laptop"),
            ("MacBook Air 13", "Unassigned", "Laptop"),
            ("iPhone 15", "In_Storage", "Phones"),
            ("Dell U2723QE monitor", "Unassigned", "Accessories"),
            ("iPad Air", "In_Storage", "Tablet"),
        ]
    ):
        body = {"title": title, "status": status, "type": kind, "serial_number": f"SN-{number:04}"}
        devices.append(api.post("/client/equipment", json=body).json()["data"])
    api.patch(f"/client/equipment/{devices[0]['id']}", json={"status": "Unassigned"})
    return devices


def test_invite_dashboard_shared_filter_timeline_and_sign_out(
    browser: Any,
    engine: Engine,
    live_server: LiveServer,  # noqa: F811
    api: Api,
) -> None:
    devices = add_devices(api)
    token = invite_token(engine, api.company_id, "ada@example.com")
    context = browser.new_context(bypass_csp=True, viewport={"width": 1200, "height": 900})  # for axe
    page = context.new_page()
    errors: list[str] = []  # a CSP violation, a script error: none expected
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.goto(f"{live_server.url}/console/invite/{token}")
        check_page(page, "invite")
        page.get_by_label("Password", exact=True).fill(PASSWORD)
        page.get_by_label("Password again").fill(PASSWORD)
        page.get_by_role("button", name="Set password and sign in").click()
        page.wait_for_url(f"{live_server.url}/console/")
        check_page(page, "dashboard")
        with live_server.api(api.token) as client:
            in_storage = client.get("/client/equipment", params={"status": "In_Storage"}).json()["data"]
        cell = page.locator('#by-status-table td[data-figure="In Storage"]')
        assert int(cell.inner_text()) == in_storage["total"] == 2

        page.get_by_role("link", name="Devices", exact=True).first.click()
        page.evaluate("window.stillThisDocument = true")
        page.locator("#status").select_option("In_Storage")
        page.get_by_label("Search").fill("i")
        page.get_by_role("button", name="Apply").click()
        page.wait_for_url(re.compile(r".*status=In_Storage.*"))
        shared = page.url
        assert page.evaluate("window.stillThisDocument") is True  # htmx swapped <main>, no reload
        page.wait_for_function("document.activeElement === document.querySelector('main h1')")
        check_page(page, "devices")
        rows = page.locator("table.list tbody tr").all_inner_texts()

        other = context.new_page()  # the link opens the same view
        other.goto(shared)
        assert other.locator("table.list tbody tr").all_inner_texts() == rows
        assert other.locator("#status").input_value() == "In_Storage"
        other.close()

        page.get_by_role("link", name="iPhone 15").click()
        page.wait_for_url(f"{live_server.url}/console/devices/{devices[2]['id']}")
        assert "equipment added" in page.locator("#timeline").inner_text()
        check_page(page, "device")
        page.get_by_label("New status").select_option("Sold")
        page.get_by_role("button", name="Move").click()
        page.wait_for_url(re.compile(r".*saved=1$"))
        assert "by console:ada@example.com" in page.locator("#timeline").inner_text()

        page.get_by_role("link", name="Users").click()
        page.get_by_label("Email").fill("bob@example.com")
        page.get_by_role("button", name="Invite").click()
        assert "/console/invite/" in page.locator("#invite-link").inner_text()
        check_page(page, "users")

        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url(re.compile(r".*/console/sign-in\?signed_out=1$"))
        check_page(page, "sign-in")
        page.goto(f"{live_server.url}/console/devices")  # the session is over
        assert "/console/sign-in" in page.url
        assert errors == []
    finally:
        context.close()


def test_the_same_with_the_keyboard_alone_at_360_px(
    browser: Any,
    engine: Engine,
    live_server: LiveServer,  # noqa: F811
    api: Api,
) -> None:
    devices = add_devices(api)
    token = invite_token(engine, api.company_id, "kim@example.com")
    context = browser.new_context(bypass_csp=True, viewport={"width": 360, "height": 740})
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/console/invite/{token}")
        tab_to(page, "#password")
        page.keyboard.type(PASSWORD)
        tab_to(page, "#confirm")
        page.keyboard.type(PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{live_server.url}/console/")
        check_page(page, "dashboard-360")

        tab_to(page, 'nav a[href="/console/devices"]')
        page.keyboard.press("Enter")
        page.wait_for_url(f"{live_server.url}/console/devices")
        tab_to(page, "#status")
        page.keyboard.press("ArrowDown")  # Assigned
        page.keyboard.press("ArrowDown")  # Unassigned
        assert page.locator("#status").input_value() == "Unassigned"
        tab_to(page, 'button[type="submit"]:not(.link)')
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*status=Unassigned.*"))
        check_page(page, "devices-360")

        tab_to(page, f'a[href="/console/devices/{devices[1]["id"]}"]')
        page.keyboard.press("Enter")
        page.wait_for_url(f"{live_server.url}/console/devices/{devices[1]['id']}")
        assert "equipment added" in page.locator("#timeline").inner_text()
        check_page(page, "device-360")

        tab_to(page, "button.link")  # Sign out
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/console/sign-in\?signed_out=1$"))
        tab_to(page, "#email")
        page.keyboard.type("kim@example.com")
        tab_to(page, "#password")
        page.keyboard.type(PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{live_server.url}/console/")
    finally:
        context.close()
