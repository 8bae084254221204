"""Buying and retrieving in a real browser (Debian's Chromium through Playwright), against the app
under uvicorn, whose sandbox gateway serves its own checkout page and posts its webhook back over
HTTP: a Card purchase for two employees through the gateway's page to a Fulfilled transaction
and an order whose tracker shows its stages; a Credit purchase refused while the wallet is short
and accepted once an operator credits it on the operator console; an offboarding from an
employee's page to a retrieval order, with the keyboard alone at 360 px. axe-core on every page
(conftest.check_page)."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tests.cli import cli_database  # noqa: F401  (the fixture: the operator's CLI invite)
from tests.console.conftest import PASSWORD, check_page, invite_token, operator_accepts_invite_in, tab_to
from tests.console.test_browser_people import accept_invite
from tests.factories import Api
from tests.payments.conftest import (
    LiveServer,
    add_assigned_device,
    add_credit,
    add_employee,
    add_storage_device,
    live_server,  # noqa: F401  (the module's server)
)

# What the pages compute is proven on both databases by test_buying.py; here the browser's part.
pytestmark = pytest.mark.one_database


def watch_errors(page: Any) -> list[str]:
    """Script errors and CSP violations on the console's pages (the sandbox gateway's page is not
    the console's: it has no icon, so the browser's request for one is a 404); the refused
    payment's 402 is expected."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on(
        "console",
        lambda message: (
            errors.append(message.text)
            if message.type == "error" and "status of 402" not in message.text and "/console/" in page.url
            else None
        ),
    )
    return errors


def choose(page: Any, select: str, text: str) -> None:
    """Select the option of `select` whose text has `text`."""
    page.locator(select).select_option(page.locator(f"{select} option", has_text=text).get_attribute("value"))


@pytest.mark.usefixtures("cli_database")
def test_card_for_two_then_credit_refused_until_the_wallet_is_credited(
    browser: Any,
    engine: Engine,
    live_server: LiveServer,  # noqa: F811
    api: Api,
    db: Session,
    demo_catalog: None,
) -> None:
    url = live_server.url
    add_employee(db, api.company_id, first="Ada")
    add_employee(db, api.company_id, first="Grace")
    context = browser.new_context(bypass_csp=True, viewport={"width": 1200, "height": 900})  # for axe
    page = context.new_page()
    errors = watch_errors(page)
    try:
        accept_invite(page, url, invite_token(engine, api.company_id, "ada@example.com"))
        page.get_by_role("link", name="Buy", exact=True).click()
        page.get_by_label("Employees' country").select_option("NG")
        page.get_by_label("Currency").select_option("NGN")
        page.get_by_role("button", name="Show the catalog").click()
        page.wait_for_url(re.compile(r".*/console/buy\?country=NG&currency=NGN$"))
        check_page(page, "buy")
        item = page.locator("#line-0-pricing option").nth(1).get_attribute("value")
        for line, person in ((0, "Ada"), (1, "Grace")):
            choose(page, f"#line-{line}-employee", f"{person} ")
            page.locator(f"#line-{line}-pricing").select_option(item)
        page.get_by_label("Card").check()
        page.get_by_role("button", name="Review the order").click()
        assert page.locator("#review-lines tbody tr").count() == 2
        total = page.locator("#review-total").inner_text()
        check_page(page, "checkout-review")

        page.locator("#pay").click()  # to the gateway's page, served by the sandbox
        page.wait_for_url(re.compile(r".*/sandbox/checkout/OTF-.*"))
        assert f"{Decimal(total.split()[0]):,.2f}" in page.locator("#total").inner_text()
        page.locator("#pay").click()
        page.wait_for_url(re.compile(r".*/console/transactions/OTF-[0-9A-F]+\?returned=1$"))
        page.locator("#tx-status", has_text="Fulfilled").wait_for()
        assert page.locator("#tx-total").inner_text() == total
        check_page(page, "transaction")
        page.locator("#tx-order").click()
        page.wait_for_url(re.compile(r".*/console/orders/[0-9a-f-]{36}$"))
        steps = page.locator("#tracker li").all_inner_texts()
        assert [step.split("\n")[0].strip() for step in steps][:2] == ["Order placed", "Order confirmed"]
        assert "UTC" in steps[0] and page.locator("#tracker li.current").inner_text().startswith(
            "Order confirmed"
        )
        assert page.locator(".order-items > li").count() == 2
        check_page(page, "order")

        # Credit, with an empty wallet: refused with the reason, then paid once it is credited.
        page.get_by_role("link", name="Buy", exact=True).click()
        page.goto(f"{url}/console/buy?country=NG&currency=NGN")
        choose(page, "#line-0-employee", "Ada ")
        page.locator("#line-0-pricing").select_option(item)
        page.get_by_label("Credit").check()
        page.get_by_role("button", name="Review the order").click()
        assert page.locator("#wallet-short").is_visible()
        credit_total = Decimal(page.locator("#review-total").inner_text().split()[0])
        page.locator("#pay").click()
        assert "Not enough credit" in page.locator("#checkout-error").inner_text()
        check_page(page, "checkout-refused")
        # An operator credits the wallet on the operator console; the same review then pays.
        operator = browser.new_context(bypass_csp=True, viewport={"width": 1200, "height": 900})
        try:
            desk = operator.new_page()
            operator_accepts_invite_in(desk, url, "olu@outfitter.example")
            desk.goto(f"{url}/operator/companies/{api.company_id}")
            desk.locator("#currency").fill("NGN")
            desk.locator("#amount").fill(str(credit_total))
            desk.locator("#reason").fill("Prepaid for the laptops")
            desk.get_by_role("button", name="Credit wallet").click()
            desk.wait_for_url(re.compile(r".*saved=credited.*"))
            entry = desk.locator("#ledger tbody tr").first.inner_text()
            assert "Credit by operator:olu@outfitter.example: Prepaid for the laptops" in entry
        finally:
            operator.close()
        page.locator("#pay").click()
        page.wait_for_url(re.compile(r".*/console/transactions/OTF-[0-9A-F]+$"))
        assert page.locator("#tx-status").inner_text() == "Fulfilled"

        page.get_by_role("link", name="Transactions", exact=True).click()
        assert page.locator("#transactions tbody tr").count() == 2
        check_page(page, "transactions")
        page.get_by_role("link", name="Wallet", exact=True).click()
        assert page.locator('#balances td[data-balance="NGN"]').inner_text() == "0.00 NGN"
        assert page.locator("#ledger tbody tr").count() == 2  # the top-up and the payment
        check_page(page, "wallet")
        with live_server.api(api.token) as client:
            listed = client.get("/client/transactions").json()["data"]["data"]
        assert sorted(tx["payment_method"] for tx in listed) == ["Card", "Credit"]
        assert {tx["status"] for tx in listed} == {"Fulfilled"}
        assert errors == []
    finally:
        context.close()


def test_an_offboarding_with_the_keyboard_alone_at_360_px(
    browser: Any,
    engine: Engine,
    live_server: LiveServer,  # noqa: F811
    api: Api,
    db: Session,
    demo_catalog: None,
) -> None:
    url = live_server.url
    employee = add_employee(db, api.company_id, first="Lin")
    laptop = add_assigned_device(db, employee, "MacBook Pro")
    add_credit(db, api.company_id, "NGN", "1000000")
    token = invite_token(engine, api.company_id, "kim@example.com")
    context = browser.new_context(bypass_csp=True, viewport={"width": 360, "height": 740})
    page = context.new_page()
    errors = watch_errors(page)
    try:
        page.goto(f"{url}/console/invite/{token}")
        tab_to(page, "#password")
        page.keyboard.type(PASSWORD)
        tab_to(page, "#confirm")
        page.keyboard.type(PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{url}/console/")
        page.goto(f"{url}/console/employees/{employee}")

        tab_to(page, "#offboard-devices")
        page.keyboard.press("Enter")
        page.wait_for_url(f"{url}/console/employees/{employee}/offboard")
        check_page(page, "offboard-360")
        tab_to(page, f'input[name="device-{laptop}"]:checked')  # "Leave it with them"
        page.keyboard.press("ArrowDown")  # wraps to the first: storage
        assert page.locator(f'input[name="device-{laptop}"]:checked').get_attribute("value") == "storage"
        tab_to(page, 'input[name="method"]:checked')
        page.keyboard.press("ArrowDown")  # Credit
        tab_to(page, 'form#offboard button[type="submit"]')
        page.keyboard.press("Enter")
        page.wait_for_url(f"{url}/console/employees/{employee}/offboard/review")
        assert page.locator('td[data-fee="Storage"]').inner_text() == "18000.00 NGN"
        check_page(page, "offboard-review-360")

        tab_to(page, "#pay")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/console/transactions/OTF-[0-9A-F]+$"))
        assert page.locator("#tx-status").inner_text() == "Fulfilled"
        tab_to(page, "#tx-order")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/console/orders/[0-9a-f-]{36}$"))
        assert page.locator("h1").inner_text().startswith("Retrieval order")
        assert page.locator("#tracker li.done").inner_text().startswith("Retrieval scheduled")
        assert page.locator("#tracker li.current").inner_text().startswith("Picked up")
        check_page(page, "order-retrieval-360")

        add_storage_device(db, api.company_id, "ThinkPad T14")  # the storage shipment's form
        page.goto(f"{url}/console/buy/storage?country=NG")
        check_page(page, "ship-360")
        tab_to(page, 'select[name^="ship-"]')
        page.keyboard.press("ArrowDown")  # Lin Lovelace
        tab_to(page, 'form#ship button[type="submit"]')
        page.keyboard.press("Enter")
        page.wait_for_url(f"{url}/console/buy/storage/review")
        assert page.locator('td[data-fee="Onboarding"]').inner_text() == "15000.00 NGN"
        check_page(page, "ship-review-360")

        for name, path in (
            ("buy-360", "/console/buy?country=NG&currency=NGN"),
            ("transactions-360", "/console/transactions"),
            ("wallet-360", "/console/wallet"),
        ):
            page.goto(f"{url}{path}")
            check_page(page, name)  # no sideways scroll at 360 px, no serious axe violation
        assert errors == []
    finally:
        context.close()
