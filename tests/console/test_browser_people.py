"""Employees, departments and the activity log in a real browser (Debian's Chromium through
Playwright): an employee created and edited, a CSV import checked then made, a department with a
head and a member, the activity log telling those changes; the same with the keyboard alone at
360 px; axe-core on every page (conftest.check_page)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.console.conftest import PASSWORD, check_page, invite_token, tab_to
from tests.factories import Api
from tests.payments.conftest import LiveServer, live_server  # noqa: F401  (the module's server)

pytestmark = pytest.mark.one_database

GOOD_CSV = (
    "first_name,last_name,email,country_id,phone,address\n"
    "Ada,Obi,ada.obi@acme.example,NG,+234 801 234 5678,1 Marina\n"
    "Wanjiru,Kamau,wanjiru@acme.example,Kenya,+254 700 000000,2 Moi Avenue\n"
)


def accept_invite(page: Any, url: str, token: str) -> None:
    page.goto(f"{url}/console/invite/{token}")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    page.get_by_role("button", name="Set password and sign in").click()
    page.wait_for_url(f"{url}/console/")


def test_an_employee_a_department_an_import_and_the_activity_log(
    browser: Any,
    engine: Engine,
    live_server: LiveServer,  # noqa: F811
    api: Api,
) -> None:
    url = live_server.url
    context = browser.new_context(bypass_csp=True, viewport={"width": 1200, "height": 900})  # for axe
    page = context.new_page()
    errors: list[str] = []  # a CSP violation, a script error: none expected
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on(
        "console",
        lambda message: (
            errors.append(message.text)
            if message.type == "error" and "status of 4" not in message.text  # the refused forms' 4xx
            else None
        ),
    )
    try:
        accept_invite(page, url, invite_token(engine, api.company_id, "ada@example.com"))
        page.get_by_role("link", name="Employees", exact=True).click()
        page.wait_for_url(f"{url}/console/employees")
        check_page(page, "employees")

        page.get_by_role("link", name="New employee").click()
        page.get_by_role("button", name="Create employee").click()  # empty: every reason beside its field
        assert "Must not be empty" in page.locator("#f-first_name-error").inner_text()
        check_page(page, "employee-form")
        for label, value in [
            ("First name", "Jane"),
            ("Last name", "Doe"),
            ("Work email", "jane.doe@acme.example"),
            ("Country", "Kenya"),
            ("Phone", "+254 700 000000"),
            ("Address", "2 Moi Avenue, Nairobi"),
        ]:
            page.get_by_label(label, exact=False).first.fill(value)
        page.get_by_role("button", name="Create employee").click()
        page.wait_for_url(re.compile(r".*/console/employees/[0-9a-f-]{36}\?saved=created$"))
        employee_url = page.url.split("?")[0]
        assert "Kenya (KE)" in page.locator("#employee-facts").inner_text()
        check_page(page, "employee")

        page.get_by_role("link", name="Edit", exact=True).click()
        page.get_by_label("Job title").fill("Staff Engineer")
        page.get_by_role("button", name="Save").click()
        page.wait_for_url(f"{employee_url}?saved=updated")
        assert "Staff Engineer" in page.locator("#employee-facts").inner_text()

        page.get_by_role("link", name="Employees", exact=True).click()
        page.get_by_role("link", name="Import from a CSV file").click()
        check_page(page, "employees-import")
        page.get_by_label("CSV file").set_input_files(
            {
                "name": "people.csv",
                "mimeType": "text/csv",
                "buffer": GOOD_CSV.replace("Kenya", "Atlantis").encode(),
            }
        )
        page.evaluate("window.stillThisDocument = true")
        page.get_by_role("button", name="Check the file").click()
        assert "country_id" in page.locator("#import-errors").inner_text()  # line 3, beside its column
        assert page.evaluate("window.stillThisDocument") is True  # htmx swapped the result only
        page.get_by_label("CSV file").set_input_files(
            {"name": "people.csv", "mimeType": "text/csv", "buffer": GOOD_CSV.encode()}
        )
        page.get_by_role("button", name="Check the file").click()
        page.locator("#import-ok", has_text="2 employees would be created").wait_for()
        page.get_by_role("button", name="Import").click()  # the same file, still chosen
        page.locator("#import-ok", has_text="2 employees created").wait_for()
        with live_server.api(api.token) as client:
            assert client.get("/client/employees").json()["data"]["total"] == 3

        page.get_by_role("link", name="Departments", exact=True).click()
        page.get_by_label("Name").fill("Platform")
        page.get_by_label("Head (work email)").fill("jane.doe@acme.example")
        page.get_by_role("button", name="Create department").click()
        page.wait_for_url(re.compile(r".*/console/departments/[0-9a-f-]{36}\?saved=created$"))
        assert page.locator("#department-head").inner_text() == "Jane Doe"
        page.get_by_label("Employee's work email").fill("ada.obi@acme.example")
        page.get_by_role("button", name="Add member").click()
        page.wait_for_url(re.compile(r".*\?saved=member-added$"))
        assert "Ada Obi" in page.locator("#members").inner_text()
        check_page(page, "department")
        page.get_by_role("link", name="Departments", exact=True).click()
        check_page(page, "departments")

        page.get_by_role("link", name="Activity", exact=True).click()
        told = page.locator("#events").inner_text()
        for sentence in (
            "console:ada@example.com created employee Jane Doe",
            "console:ada@example.com edited employee Jane Doe (changed job title)",
            "console:ada@example.com created employee Ada Obi",
            "console:ada@example.com created department Platform",
            "console:ada@example.com changed department Platform (added Ada Obi)",
        ):
            assert sentence in told, sentence
        page.locator("#events details summary").first.click()
        assert '"name": "Platform"' in page.locator("#events details pre").first.inner_text()
        check_page(page, "activity")
        page.get_by_label("What").select_option("employee.updated")
        page.get_by_role("button", name="Apply").click()
        page.wait_for_url(re.compile(r".*type=employee.updated.*"))
        assert page.locator("#events li.event").count() == 1
        page.locator("#events li.event a", has_text="Event").click()
        assert "Staff Engineer" in page.locator("#event-data").inner_text()
        check_page(page, "event")
        page.locator("#event-sentence a").click()
        page.wait_for_url(employee_url)
        assert errors == []
    finally:
        context.close()


def test_the_same_with_the_keyboard_alone_at_360_px(
    browser: Any,
    engine: Engine,
    live_server: LiveServer,  # noqa: F811
    api: Api,
) -> None:
    url = live_server.url
    token = invite_token(engine, api.company_id, "kim@example.com")
    context = browser.new_context(bypass_csp=True, viewport={"width": 360, "height": 740})
    page = context.new_page()
    try:
        page.goto(f"{url}/console/invite/{token}")
        tab_to(page, "#password")
        page.keyboard.type(PASSWORD)
        tab_to(page, "#confirm")
        page.keyboard.type(PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{url}/console/")

        tab_to(page, 'nav a[href="/console/employees"]')
        page.keyboard.press("Enter")
        page.wait_for_url(f"{url}/console/employees")
        check_page(page, "employees-360")
        tab_to(page, 'a[href="/console/employees/new"]')
        page.keyboard.press("Enter")
        page.wait_for_url(f"{url}/console/employees/new")
        for field, value in [
            ("#f-first_name", "Lin"),
            ("#f-last_name", "Wu"),
            ("#f-email", "lin.wu@acme.example"),
            ("#f-country", "NG"),
            ("#f-phone", "+234 801 234 5678"),
            ("#f-address", "1 Marina, Lagos"),
        ]:
            tab_to(page, field)
            page.keyboard.type(value)
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/console/employees/[0-9a-f-]{36}\?saved=created$"))
        check_page(page, "employee-360")

        tab_to(page, 'a[href$="/edit"]')
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/edit$"))
        check_page(page, "employee-form-360")
        tab_to(page, "#f-job_title")
        page.keyboard.type("Designer")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*\?saved=updated$"))
        assert "Designer" in page.locator("#employee-facts").inner_text()

        tab_to(page, 'nav a[href="/console/departments"]')
        page.keyboard.press("Enter")
        page.wait_for_url(f"{url}/console/departments")
        tab_to(page, "#new-name")
        page.keyboard.type("Design")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/console/departments/[0-9a-f-]{36}\?saved=created$"))
        tab_to(page, "#member-email")
        page.keyboard.type("lin.wu@acme.example")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*\?saved=member-added$"))
        assert "Lin Wu" in page.locator("#members").inner_text()
        check_page(page, "department-360")

        tab_to(page, 'nav a[href="/console/activity"]')
        page.keyboard.press("Enter")
        page.wait_for_url(f"{url}/console/activity")
        tab_to(page, "#events details summary")
        page.keyboard.press("Enter")  # the data, on demand
        assert page.locator("#events details").first.get_attribute("open") is not None
        told = page.locator("#events").inner_text()
        assert "console:kim@example.com changed department Design (added Lin Wu)" in told
        assert "console:kim@example.com edited employee Lin Wu (changed job title)" in told
        check_page(page, "activity-360")
    finally:
        context.close()
