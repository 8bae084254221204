"""The sandbox checkout in a real browser: headless Chromium (Debian's package) opens the link,
clicks Pay, lands on the redirect URL, and the order exists."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest
from sqlalchemy.orm import Session

from tests.factories import Api
from tests.payments.conftest import LiveServer, add_employee, card_body, prices

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def browser_or_skip() -> ModuleType:
    """playwright's sync API, with Debian's Chromium there to drive. Without them the test skips,
    except under CI=true, where it fails: CI must prove what a browser does (.ci/run installs it)."""
    missing = None
    if not CHROMIUM.exists():
        missing = f"Debian's chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api as sync_api
    except ImportError:
        missing = "the playwright package (make install-dev)"
    if missing is not None:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"the browser test needs {missing}; CI must run it", pytrace=False)
        pytest.skip(f"the browser test needs {missing}")
    return sync_api


def test_pay_in_a_browser(api: Api, db: Session, live_server: LiveServer) -> None:
    sync_api = browser_or_skip()
    employee = add_employee(db, api.company_id)
    pricing = prices(api)[0]
    redirect_url = f"{live_server.url}/healthz?from=checkout"
    with live_server.api(api.token) as client:
        body = card_body(employee, pricing["asset_pricing"]["id"], redirect_url=redirect_url)
        data = client.post("/client/transactions/initiate", json=body).json()["data"]
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                page.goto(data["link"])
                assert page.locator("#tx-ref").inner_text() == data["tx_ref"]
                assert f"{data['total_amount']:,.2f}" in page.locator("#total").inner_text()
                assert pricing["name"] in page.content()
                with page.expect_navigation(url=f"{live_server.url}/healthz**"):
                    page.click("#pay")
                assert page.url == f"{redirect_url}&status=successful&tx_ref={data['tx_ref']}"
            finally:
                browser.close()
        # What the client's landing page does: verify (the webhook may still be on its way).
        assert (
            client.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]["status"]
            == "Fulfilled"
        )
        orders = client.get("/client/orders").json()["data"]
    assert orders["total"] == 1 and orders["data"][0]["tx_ref"] == data["tx_ref"]
