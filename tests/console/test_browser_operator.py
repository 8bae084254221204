"""The operator console in a real browser (Debian's Chromium through Playwright): an operator
invited by the CLI adds the TOTP key and signs up, signs out and in again with the password and a
code, credits a company's wallet with a reason using the keyboard alone (the ledger names the
operator; the company's API shows the balance), and moves an order to delivered, which the
company's console order page then shows. axe-core on every operator page; no CSP violation."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tests.cli import cli_database  # noqa: F401  (the fixture)
from tests.console.conftest import (
    PASSWORD,
    check_page,
    invite_token,
    operator_accepts_invite_in,
    tab_to,
    totp_code,
)
from tests.console.test_orders_pages import place_orders
from tests.factories import Api
from tests.payments.conftest import LiveServer, live_server  # noqa: F401  (the module's server)

pytestmark = [pytest.mark.one_database, pytest.mark.usefixtures("cli_database")]
EMAIL = "olu@outfitter.example"


def test_operator_signs_in_with_totp_credits_a_wallet_and_delivers_an_order(
    browser: Any,
    engine: Engine,
    live_server: LiveServer,  # noqa: F811
    api: Api,
    db: Session,
    demo_catalog: None,
) -> None:
    purchase = place_orders(api, db, engine)["purchase"]
    db.rollback()
    balances = api.get("/client/wallet").json()["data"]["balances"]
    before = Decimal(next(b["balance"] for b in balances if b["currency"] == "NGN"))
    base = live_server.url
    context = browser.new_context(bypass_csp=True, viewport={"width": 1200, "height": 900})  # for axe
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        secret = operator_accepts_invite_in(page, base, EMAIL)
        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url(re.compile(r".*/operator/sign-in\?signed_out=1$"))
        check_page(page, "operator-sign-in")

        page.get_by_label("Email").fill(EMAIL)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Continue").click()
        page.wait_for_url(re.compile(r".*/operator/sign-in/code.*"))
        check_page(page, "operator-code")
        page.get_by_label("Code").fill(totp_code(secret, 1))  # this step's code was spent signing up
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{base}/operator/")
        check_page(page, "operator-companies")

        # The wallet credit, with the keyboard alone.
        tab_to(page, f'a[href="/operator/companies/{api.company_id}"]')
        page.keyboard.press("Enter")
        page.wait_for_url(f"{base}/operator/companies/{api.company_id}")
        tab_to(page, "#currency")
        page.keyboard.type("NGN")
        tab_to(page, "#amount")
        page.keyboard.type("2500.75")
        tab_to(page, "#reason")
        page.keyboard.type("Refund of the broken charger")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*saved=credited.*"))
        check_page(page, "operator-company")
        entry = page.locator("#ledger tbody tr").first.inner_text()
        assert f"Credit by operator:{EMAIL}: Refund of the broken charger" in entry
        with live_server.api(api.token) as client:
            wallet = client.get("/client/wallet").json()["data"]
        assert (
            wallet["entries"][0]["description"] == f"Credit by operator:{EMAIL}: Refund of the broken charger"
        )
        balance = next(b for b in wallet["balances"] if b["currency"] == "NGN")
        assert Decimal(balance["balance"]) == before + Decimal("2500.75")

        page.get_by_role("link", name="Orders", exact=True).click()
        page.wait_for_url(f"{base}/operator/orders")
        check_page(page, "operator-orders")
        page.get_by_role("link", name=re.compile(purchase["tx_ref"])).click()
        page.wait_for_url(f"{base}/operator/orders/{purchase['id']}")
        check_page(page, "operator-order")
        page.get_by_label("To stage").select_option("order_delivered")
        page.get_by_role("button", name="Move").click()
        page.wait_for_url(re.compile(r".*saved=1$"))
        assert page.locator("#order-status").inner_text() == "Completed"

        for name, path in (("anomalies", "/anomalies"), ("queue", "/queue"), ("activity", "/activity")):
            page.goto(f"{base}/operator{path}")
            check_page(page, f"operator-{name}")
        assert "order.completed" in page.locator("#activity").inner_text()
        # At 360 px (a phone): no page scrolls sideways, axe finds nothing serious.
        page.set_viewport_size({"width": 360, "height": 800})
        for name, path in (
            ("companies", "/"),
            ("company", f"/companies/{api.company_id}"),
            ("orders", "/orders"),
            ("order", f"/orders/{purchase['id']}"),
            ("queue", "/queue"),
            ("activity", "/activity"),
        ):
            page.goto(f"{base}/operator{path}")
            check_page(page, f"operator-{name}-360")
        assert errors == []
    finally:
        context.close()

    # The company's console shows the order delivered.
    company = browser.new_context(viewport={"width": 1200, "height": 900})
    console = company.new_page()
    try:
        console.goto(f"{base}/console/invite/{invite_token(engine, api.company_id, 'ada@example.com')}")
        console.get_by_label("Password", exact=True).fill(PASSWORD)
        console.get_by_label("Password again").fill(PASSWORD)
        console.get_by_role("button", name="Set password and sign in").click()
        console.wait_for_url(f"{base}/console/")
        console.goto(f"{base}/console/orders/{purchase['id']}")
        assert console.locator("#order-stage").inner_text() == "Order delivered"
        console.goto(f"{base}/operator/")  # a company session opens no operator page
        assert "/operator/sign-in" in console.url
    finally:
        company.close()
