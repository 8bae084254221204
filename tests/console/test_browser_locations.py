"""The locations pages in a real browser (Debian's Chromium through Playwright): a location made
inside another with the keyboard-usable form, the tree showing it indented with its device count,
and axe-core on both pages (conftest.check_page)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine

from tests.console.conftest import check_page, invite_token
from tests.console.test_browser_people import accept_invite
from tests.equipment.helpers import register
from tests.factories import Api
from tests.locations.helpers import create_location
from tests.payments.conftest import LiveServer, live_server  # noqa: F401  (the module's server)

pytestmark = pytest.mark.one_database


def test_a_location_made_inside_another_shows_in_the_tree_with_its_devices(
    browser: Any,
    engine: Engine,
    live_server: LiveServer,  # noqa: F811
    api: Api,
) -> None:
    url = live_server.url
    lagos = create_location(api, "Lagos", kind="Site")
    register(api, title="Loaner laptop", location_id=lagos["id"])
    context = browser.new_context(bypass_csp=True, viewport={"width": 1200, "height": 900})  # for axe
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        accept_invite(page, url, invite_token(engine, api.company_id, "ada@example.com"))
        page.get_by_role("link", name="Locations", exact=True).click()
        page.wait_for_url(f"{url}/console/locations")
        check_page(page, "locations")

        page.locator("#new-name").fill("Store room")
        page.locator("#new-kind").select_option("Room")
        page.locator("#new-parent").select_option(lagos["id"])
        page.get_by_role("button", name="Create location").click()
        page.wait_for_url(f"{url}/console/locations/*?saved=created")
        assert page.locator("#location-name").inner_text() == "Store room"
        assert (
            page.get_by_role("navigation", name="Breadcrumb").get_by_role("link", name="Lagos").is_visible()
        )
        check_page(page, "location")

        page.get_by_role("link", name="All locations").click()
        rows = page.locator("#location-tree tbody tr")
        assert rows.count() == 2
        assert "Store room" in rows.nth(1).inner_text()
        assert rows.nth(0).locator(".count-beneath").inner_text() == "1"
        assert errors == []
    finally:
        context.close()
