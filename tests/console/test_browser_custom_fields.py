"""Custom fields in a real browser (Debian's Chromium through Playwright): an admin defines a field on
the settings page, fills it on a device's page, and sees a sensitive value masked; axe-core on each
page (tests/console/conftest.py). Without Chromium the test skips, except under CI=true."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine

from tests.console.conftest import check_page
from tests.console.test_browser_devices import signed_in
from tests.customfields.helpers import define, device
from tests.factories import Api
from tests.payments.conftest import LiveServer, live_server  # noqa: F401  (the module's server)

pytestmark = pytest.mark.one_database


def test_define_a_field_and_fill_it_on_a_device(
    browser: Any,
    engine: Engine,
    live_server: LiveServer,  # noqa: F811
    api: Api,
) -> None:
    define(api, "unlock_pin", sensitive=True)
    made = device(api, "Field phone", type="Phones", custom_fields={"unlock_pin": "4417"})
    context, page = signed_in(browser, engine, live_server, api, "ada@example.com", 1200)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.goto(f"{live_server.url}/console/settings/custom-fields")
        page.locator("#new-key").fill("imei")
        page.locator("#new-label").fill("IMEI")
        page.locator("#new-pattern").fill("[0-9]{15}")
        page.locator("#new-device-types").fill("Phones")
        page.get_by_role("button", name="Define field").click()
        page.wait_for_url(f"{live_server.url}/console/settings/custom-fields?saved=created")
        assert "imei" in page.locator("#custom-fields").inner_text()
        check_page(page, "custom-fields")

        page.goto(f"{live_server.url}/console/devices/{made['id']}")
        assert page.locator("#cf-shown-unlock_pin").inner_text() == "••••••"
        page.get_by_label("IMEI").fill("35693803564380")  # 14 digits: the pattern refuses it
        page.get_by_role("button", name="Save custom fields").click()
        assert "pattern" in page.locator("#cf-error-imei").inner_text()
        check_page(page, "device-custom-fields-error")
        page.get_by_label("IMEI").fill("356938035643809")
        page.get_by_role("button", name="Save custom fields").click()
        page.wait_for_url(f"{live_server.url}/console/devices/{made['id']}?saved=1")
        assert page.locator("#cf-shown-imei").inner_text() == "356938035643809"
        assert "4417" not in page.content()
        check_page(page, "device-custom-fields")
    finally:
        context.close()
    assert not errors
    assert api.get(f"/client/equipment/{made['id']}").json()["data"]["custom_fields"] == {
        "imei": "356938035643809"
    }
