"""The interactive docs in a real browser with no internet: headless Chromium (Debian's package)
may reach the service and nothing else, shows the operations, authorizes with a bearer token and
runs one."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.factories import Api
from tests.payments.conftest import LiveServer, live_server  # noqa: F401 (the fixture)
from tests.payments.test_browser import CHROMIUM, CHROMIUM_ARGS, browser_or_skip


# The page and its assets are the same on either database; the operation it runs is proven on
# both by the API's own tests.
@pytest.mark.one_database
def test_the_docs_page_works_offline_and_runs_an_operation(api: Api, live_server: LiveServer) -> None:  # noqa: F811
    sync_api = browser_or_skip()
    service = urlsplit(live_server.url).netloc
    elsewhere: list[str] = []

    def only_the_service(route: object, request: object) -> None:
        url = request.url  # type: ignore[attr-defined]
        if urlsplit(url).netloc == service:
            route.continue_()  # type: ignore[attr-defined]
        else:
            elsewhere.append(url)
            route.abort()  # type: ignore[attr-defined]

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.route("**/*", only_the_service)
            page.goto(f"{live_server.url}/api/v2/docs")
            currencies = page.locator(".opblock-summary-path", has_text="/api/v2/client/currencies").first
            currencies.wait_for(timeout=30_000)
            assert page.locator(".opblock").count() > 20  # every operation is listed

            page.click(".btn.authorize")
            page.locator(".modal-ux input").first.fill(api.token)
            page.click(".modal-ux .btn.authorize")
            page.click(".modal-ux .btn-done")

            currencies.click()
            page.click(".try-out__btn")
            page.click(".btn.execute")
            status = page.locator(".live-responses-table tbody .response-col_status").first
            status.wait_for(timeout=30_000)
            assert status.inner_text().strip().startswith("200")
            assert '"success": true' in page.locator(".live-responses-table .microlight").first.inner_text()
            # The token served the request from the page alone: nothing of it in the browser's storage.
            stored = page.evaluate("() => JSON.stringify(Object.entries(window.localStorage))")
            assert api.token not in stored
        finally:
            browser.close()
    assert elsewhere == [], f"the page tried to reach other hosts: {elsewhere}"
