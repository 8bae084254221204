"""The Integrations pages in a real browser (Debian's Chromium through Playwright): an API token
created and copied, used against the API and revoked (then refused); the SCIM page's values copied
under the real CSP; a webhook endpoint created, pinged and a delivery replayed to a receiver in
the test that verifies the signature, with the keyboard alone at 360 px; axe-core on every page
(check_page)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import Engine
from standardwebhooks import Webhook

from outfitter.config import Settings
from outfitter.worker import Worker
from tests.console.conftest import PASSWORD, check_page, invite_token, tab_to
from tests.console.test_integrations_webhooks import drain
from tests.factories import Api
from tests.payments.conftest import LiveServer, live_server  # noqa: F401  (the module's server)
from tests.webhooks.conftest import receiver, webhook_settings, worker  # noqa: F401
from tests.webhooks.receiver import Receiver, served_document

pytestmark = pytest.mark.one_database


@pytest.fixture
def private_receivers(live_server: LiveServer, webhook_settings: Settings) -> Iterator[None]:  # noqa: F811
    """The live server registers 127.0.0.1 URLs during the test, as OUTFITTER_WEBHOOK_ALLOW_PRIVATE."""
    state = live_server.app.state
    original = state.settings
    state.settings = webhook_settings.model_copy(update={"public_url": original.public_url})
    yield
    state.settings = original


def in_a_thread(work: Callable[..., Any], *args: Any) -> None:
    """Run `work` in another thread: Playwright's sync API holds this thread's event loop, and the
    worker's run_once starts its own."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(work, *args).result()


def sign_in(page: Any, engine: Engine, api: Api, base: str, email: str) -> None:
    page.goto(f"{base}/console/invite/{invite_token(engine, api.company_id, email)}")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    page.get_by_role("button", name="Set password and sign in").click()
    page.wait_for_url(f"{base}/console/")


def test_a_token_created_copied_used_and_revoked_then_scim_values(
    browser: Any,
    engine: Engine,
    live_server: LiveServer,  # noqa: F811
    api: Api,
) -> None:
    base = live_server.url
    context = browser.new_context(
        bypass_csp=True,  # for axe
        viewport={"width": 1200, "height": 900},
        permissions=["clipboard-read", "clipboard-write"],
    )
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        sign_in(page, engine, api, base, "ada@example.com")
        page.get_by_role("link", name="Integrations").click()
        page.wait_for_url(f"{base}/console/integrations/tokens")
        check_page(page, "integrations-tokens")
        page.get_by_label("Name").fill("Payroll sync")
        page.get_by_label("write").uncheck()
        page.get_by_label("Expires").select_option("90")
        page.get_by_role("button", name="Create token").click()
        token = page.locator("#new-token").inner_text()
        assert token.startswith("otf_")
        page.get_by_role("button", name="Copy the new token").click()
        assert page.evaluate("navigator.clipboard.readText()") == token
        check_page(page, "integrations-token-created")

        with live_server.api(token) as client:
            answer = client.get("/client/events", params={"type": "api_token.created"})
            assert answer.status_code == 200, answer.text
            (event,) = answer.json()["data"]["data"]
            assert event["actor"] == "console:ada@example.com"
            assert event["data"]["name"] == "Payroll sync" and event["data"]["scopes"] == ["read"]
            page.goto(f"{base}/console/integrations/tokens")  # shown once: gone now; its last use listed
            assert page.locator("#new-token").count() == 0 and token not in page.content()
            row = page.locator("tr", has_text="Payroll sync")
            assert row.locator("[data-last-used] time").count() == 1
            row.get_by_role("button", name="Revoke Payroll sync").click()
            page.wait_for_url(f"{base}/console/integrations/tokens?saved=revoked")
            assert row.locator(".status").inner_text() == "revoked"
            refused = client.get("/client/events")
            assert refused.status_code == 401 and refused.json()["message"] == "The token has been revoked."

        page.get_by_role("navigation", name="Integrations").get_by_role("link", name="SCIM").click()
        page.wait_for_url(f"{base}/console/integrations/scim")
        check_page(page, "integrations-scim")
        page.get_by_role("navigation", name="Integrations").get_by_role("link", name="Webhooks").click()
        page.wait_for_url(f"{base}/console/integrations/webhooks")
        check_page(page, "integrations-webhooks")
        assert errors == []
    finally:
        context.close()

    # Under the console's real CSP (no bypass): the copy buttons' script runs, nothing is refused.
    strict = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    page = strict.new_page()
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    try:
        page.goto(f"{base}/console/sign-in")
        page.get_by_label("Email").fill("ada@example.com")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{base}/console/")
        page.goto(f"{base}/console/integrations/scim")
        page.get_by_role("button", name="Copy the base URL").click()
        assert page.evaluate("navigator.clipboard.readText()") == f"{base}/scim/v2"
        assert errors == []
    finally:
        strict.close()


def test_a_webhook_created_pinged_and_replayed_with_the_keyboard_at_360_px(
    browser: Any,
    engine: Engine,
    live_server: LiveServer,  # noqa: F811
    api: Api,
    private_receivers: None,
    receiver: Receiver,  # noqa: F811
    worker: Worker,  # noqa: F811
) -> None:
    served_document()  # the receiver's schemas, built before it must answer within the deadline
    base = live_server.url
    context = browser.new_context(bypass_csp=True, viewport={"width": 360, "height": 740})
    page = context.new_page()
    try:
        sign_in(page, engine, api, base, "kim@example.com")
        tab_to(page, 'a[href="/console/integrations/tokens"]')
        page.keyboard.press("Enter")
        page.wait_for_url(f"{base}/console/integrations/tokens")
        tab_to(page, 'nav.tabs a[href="/console/integrations/webhooks"]')
        page.keyboard.press("Enter")
        page.wait_for_url(f"{base}/console/integrations/webhooks")
        check_page(page, "integrations-webhooks-360")
        tab_to(page, "#endpoint-url")
        page.keyboard.type(receiver.url)
        tab_to(page, "#endpoint-description")
        page.keyboard.type("Asset register sync")
        tab_to(page, "form[action='/console/integrations/webhooks'] button[type=submit]")
        page.keyboard.press("Enter")
        page.wait_for_selector("#endpoint-secret")
        secret = page.locator("#endpoint-secret").inner_text()
        assert secret.startswith("whsec_")
        check_page(page, "integrations-webhook-created-360")

        tab_to(page, 'form[action$="/ping"] button')
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/console/integrations/webhooks/[0-9a-f-]{36}\?saved=ping$"))
        assert page.locator("#endpoint-secret").count() == 0  # shown once
        in_a_thread(drain, worker)
        page.reload()
        check_page(page, "integrations-webhook-360")
        ping_row = page.locator("#deliveries tr", has_text="ping").filter(has_not_text="pinged")
        delivery_id = ping_row.get_attribute("data-delivery")
        tab_to(page, f'tr[data-delivery="{delivery_id}"] a')
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(rf".*/deliveries/{delivery_id}$"))
        assert page.locator("#delivery-status").inner_text() == "succeeded"
        assert '"type": "ping"' in page.locator("#payload").inner_text()
        assert "HTTP 200" in page.locator("#attempts").inner_text()
        check_page(page, "integrations-delivery-360")

        sent_before = len(receiver.received)
        tab_to(page, 'form[action$="/replay"] button')
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*\?saved=replayed$"))
        in_a_thread(drain, worker)
        replayed = [r for r in receiver.received[sent_before:] if b'"type":"ping"' in r.body]
        assert replayed and replayed[-1].headers["webhook-id"] == page.locator("dd code").first.inner_text()
        verified = Webhook(secret).verify(replayed[-1].body, replayed[-1].headers)
        assert verified["type"] == "ping" and verified["data"]["url"] == receiver.url
        page.reload()
        assert page.locator("#attempts").inner_text().count("HTTP 200") >= 2
    finally:
        context.close()
