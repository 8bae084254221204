"""The devices pages in a real browser (Debian's Chromium through Playwright): a bulk move with its
preview, a CSV import with an error row (its progress streamed), registering a device; then the
same with the keyboard alone at 360 px wide. axe-core on each new page (tests/console/conftest.py).

One browser for the module. Without Chromium the tests skip, except under CI=true, where they fail."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.console.conftest import PASSWORD, check_page, invite_token, tab_to
from tests.factories import Api
from tests.payments.conftest import LiveServer, live_server  # noqa: F401  (the module's server)

pytestmark = pytest.mark.one_database

CSV_WITH_AN_ERROR = (
    "title,serial_number,type,status\n"
    "Imported laptop,IMP-1,Laptop,In_Storage\n"
    "Imported phone,IMP-2,Phones,Lost\n"
    "Imported tablet,IMP-3,Tablet,Unassigned\n"
)


def add_devices(api: Api) -> list[dict[str, Any]]:
    bodies = [
        {"title": "Spare laptop", "status": "Unassigned", "serial_number": "SP-1"},
        {"title": "Shelf laptop", "status": "In_Storage", "serial_number": "SH-1"},
    ]
    return [api.post("/client/equipment", json=body).json()["data"] for body in bodies]


def signed_in(browser: Any, engine: Engine, server: LiveServer, api: Api, email: str, width: int) -> Any:
    context = browser.new_context(bypass_csp=True, viewport={"width": width, "height": 900})  # for axe
    page = context.new_page()
    page.goto(f"{server.url}/console/invite/{invite_token(engine, api.company_id, email)}")
    page.locator("#password").fill(PASSWORD)
    page.locator("#confirm").fill(PASSWORD)
    page.locator("#confirm").press("Enter")
    page.wait_for_url(f"{server.url}/console/")
    return context, page


def status_of(api: Api, device: dict[str, Any]) -> str:
    status: str = api.get(f"/client/equipment/{device['id']}").json()["data"]["status"]
    return status


def test_bulk_move_import_and_register_with_the_mouse(
    browser: Any,
    engine: Engine,
    live_server: LiveServer,  # noqa: F811
    api: Api,
    tmp_path: Path,
) -> None:
    spare, _shelf = add_devices(api)
    context, page = signed_in(browser, engine, live_server, api, "ada@example.com", 1200)
    errors: list[str] = []  # a CSP violation, a script error: none expected
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.goto(f"{live_server.url}/console/devices")
        page.get_by_label("Select Spare laptop").check()
        page.get_by_label("Select Shelf laptop").check()
        page.get_by_label("Action").select_option("In_Storage")
        page.get_by_role("button", name="Preview").click()
        page.wait_for_url(f"{live_server.url}/console/devices/bulk")
        assert page.locator("#bulk-count").inner_text() == "1 device will change"
        assert "Shelf laptop" in page.locator("#refused").inner_text()
        check_page(page, "device-bulk")
        assert status_of(api, spare) == "Unassigned"  # a preview changes nothing
        page.get_by_role("button", name="Apply to 1 device").click()
        page.wait_for_url(re.compile(r".*moved=1&to=In_Storage$"))
        assert "1 device moved to In Storage" in page.locator("#bulk-done").inner_text()
        assert status_of(api, spare) == "In_Storage"

        page.get_by_role("link", name="Import from CSV").click()
        check_page(page, "device-import")
        sheet = tmp_path / "devices.csv"
        sheet.write_text(CSV_WITH_AN_ERROR)
        page.get_by_label("CSV file").set_input_files(str(sheet))
        page.get_by_role("button", name="Check the file").click()
        page.locator("#import-errors").wait_for()
        assert page.locator("#import-bar").get_attribute("hidden") is None
        cells = page.locator("#import-errors tbody td").all_inner_texts()
        assert cells[:2] == ["3", "status"]
        check_page(page, "device-import-errors")
        sheet.write_text(CSV_WITH_AN_ERROR.replace(",Lost", ",Unassigned"))
        page.get_by_label("CSV file").set_input_files(str(sheet))
        page.get_by_role("button", name="Import", exact=True).click()
        page.get_by_text("3 devices registered").wait_for()
        assert api.get("/client/equipment", q="IMP-").json()["data"]["total"] == 3

        page.goto(f"{live_server.url}/console/devices/new")
        check_page(page, "device-new")
        page.get_by_label("Name").fill("Monitor")
        page.get_by_label("Year").fill("20x4")
        page.get_by_role("button", name="Register the device").click()
        assert (
            "pattern" in page.locator("#year-error").inner_text() or page.locator("#year-error").is_visible()
        )
        check_page(page, "device-new-errors")
        page.get_by_label("Year").fill("2024")
        page.get_by_role("button", name="Register the device").click()
        page.wait_for_url(re.compile(r".*/console/devices/[0-9a-f-]{36}\?saved=registered$"))
        assert page.locator("#device-title").inner_text() == "Monitor"
        assert [error for error in errors if "status of 422" not in error] == []  # the form's 422
    finally:
        context.close()


def test_the_same_with_the_keyboard_alone_at_360_px(
    browser: Any,
    engine: Engine,
    live_server: LiveServer,  # noqa: F811
    api: Api,
    tmp_path: Path,
) -> None:
    spare, _shelf = add_devices(api)
    context, page = signed_in(browser, engine, live_server, api, "kim@example.com", 360)
    try:
        page.goto(f"{live_server.url}/console/devices")
        tab_to(page, f"#pick-{spare['id']}", presses=120)
        page.keyboard.press("Space")
        tab_to(page, "#bulk-action", presses=120)
        page.keyboard.press("ArrowDown")  # Move to In storage
        assert page.locator("#bulk-action").input_value() == "In_Storage"
        tab_to(page, '#bulk-form button[type="submit"]')
        page.keyboard.press("Enter")
        page.wait_for_url(f"{live_server.url}/console/devices/bulk")
        check_page(page, "device-bulk-360")
        tab_to(page, '#bulk-apply button[type="submit"]')
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*moved=1&to=In_Storage$"))
        assert status_of(api, spare) == "In_Storage"

        tab_to(page, 'a[href="/console/devices/import"]', presses=120)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{live_server.url}/console/devices/import")
        check_page(page, "device-import-360")
        sheet = tmp_path / "devices.csv"
        sheet.write_text(CSV_WITH_AN_ERROR)
        tab_to(page, "#import-file")
        with page.expect_file_chooser() as chosen:
            page.keyboard.press("Space")
        chosen.value.set_files(str(sheet))
        tab_to(page, 'button[value="check"]')
        page.keyboard.press("Enter")
        page.locator("#import-errors").wait_for()
        assert page.evaluate("document.activeElement.id") == "import-result-heading"

        page.goto(f"{live_server.url}/console/devices/new")
        tab_to(page, "#f-title")
        page.keyboard.type("Keyboard-made phone")
        tab_to(page, 'button[name="register"]', presses=80)
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*\?saved=registered$"))
        check_page(page, "device-registered-360")
        assert api.get("/client/equipment", q="Keyboard-made").json()["data"]["total"] == 1
    finally:
        context.close()
