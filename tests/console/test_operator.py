"""The operator console through HTTP (both databases): an operator invited by the CLI signs up
with a password and a TOTP code and signs in again with both; sessions apart from the companies'
console; a wallet credited with a reason; a company suspended and reinstated; tokens; an order
moved; an anomaly resolved; the queue; the operators' activity. Every change an event under
`operator:<email>`."""

from __future__ import annotations

import json
import re
import uuid
from decimal import Decimal

import pytest
from fastapi import FastAPI
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from outfitter.models import ApiToken, Company, Event, OperatorSession, PaymentAnomaly, PaymentAnomalyKind
from tests.cli import cli_database, run  # noqa: F401  (the fixture)
from tests.console.conftest import (
    OPERATOR_SECRET,
    PASSWORD,
    form_token,
    operator_invite,
    operator_sign_up,
    sign_up,
    totp_code,
)
from tests.console.test_orders_pages import place_orders
from tests.factories import Api

pytestmark = pytest.mark.usefixtures("cli_database")


def events_of(db: Session, actor: str) -> list[tuple[str, uuid.UUID]]:
    db.expire_all()
    rows = db.execute(
        select(Event.type, Event.company_id).where(Event.actor == actor).order_by(Event.created_at)
    )
    found = [(str(kind), company) for kind, company in rows]
    db.rollback()  # SQLite: the app's next write must not wait for this read's transaction
    return found


def test_invite_by_the_cli_then_sign_in_with_password_and_code(app: FastAPI, db: Session) -> None:
    operator = operator_sign_up(app)
    cookie = next(c for c in operator.client.cookies.jar if c.name == "outfitter_operator")
    assert cookie.path == "/operator"  # never sent to /console
    home = operator.get("/")
    assert home.status_code == 200 and "Companies" in home.text and operator.email in home.text

    operator.post("/sign-out", {"csrf_token": operator.csrf()})
    assert operator.get("/").headers["location"] == "/operator/sign-in?next=/operator/"
    page = operator.get("/sign-in")
    wrong = operator.post(
        "/sign-in", {"email": operator.email, "password": "not the password", "csrf_token": form_token(page)}
    )
    assert wrong.status_code == 401 and "The email or the password is wrong." in wrong.text
    answer = operator.post(
        "/sign-in", {"email": operator.email, "password": PASSWORD, "csrf_token": form_token(page)}
    )
    assert answer.headers["location"].startswith("/operator/sign-in/code")
    assert operator.get("/").status_code == 303  # the password alone signs no one in
    code_page = operator.get("/sign-in/code")
    bad = operator.post("/sign-in/code", {"code": "000000", "csrf_token": form_token(code_page)})
    assert bad.status_code == 401 and "The code is wrong" in bad.text
    # The code of the next step: the one of this step was spent when the invite was accepted.
    done = operator.post(
        "/sign-in/code", {"code": totp_code(operator.secret, 1), "csrf_token": form_token(code_page)}
    )
    assert done.status_code == 303 and done.headers["location"] == "/operator/"
    assert operator.get("/").status_code == 200
    db.expire_all()
    assert len(db.scalars(select(OperatorSession)).all()) == 1  # the pending one ended, one live
    db.rollback()

    listed = run("operator", "list", "--json")
    assert '"status": "active"' in listed[1] and operator.email in listed[1]

    assert run("operator", "deactivate", operator.email)[0] == 0
    assert operator.get("/").status_code == 303  # the session is over
    page = operator.get("/sign-in")
    refused = operator.post(
        "/sign-in", {"email": operator.email, "password": PASSWORD, "csrf_token": form_token(page)}
    )
    assert refused.status_code == 401
    assert run("operator", "deactivate", "nobody@outfitter.example")[0] == 1
    assert "/operator/invite/" in run("operator", "invite", operator.email)[1]  # invited anew


def test_an_invite_needs_a_right_code_and_a_company_user_is_never_an_operator(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    operator_sign_up(app)
    again = run("operator", "invite", "olu@outfitter.example")
    assert again[0] == 1 and "is an operator already" in again[2]

    sign_up(app, engine, api.company_id, "ada@example.com")
    refused = run("operator", "invite", "ADA@example.com")
    assert refused[0] == 1 and "is a company's console user" in refused[2]
    console_invite = run("user", "invite", str(api.company_id), "olu@outfitter.example")
    assert console_invite[0] == 1 and "is an Outfitter operator" in console_invite[2]

    from fastapi.testclient import TestClient

    client = TestClient(app, base_url="http://testserver", follow_redirects=False)
    link = operator_invite("kim@outfitter.example")
    page = client.get(link)
    secret = OPERATOR_SECRET.search(page.text).group(1)  # type: ignore[union-attr]
    short = client.post(
        link,
        data={
            "password": "short",
            "confirm": "short",
            "code": totp_code(secret),
            "csrf_token": form_token(page),
        },
    )
    assert short.status_code == 422 and "at least 12 characters" in short.text
    wrong = client.post(
        link,
        data={"password": PASSWORD, "confirm": PASSWORD, "code": "123456", "csrf_token": form_token(page)},
    )
    assert wrong.status_code == 422 and "The code is wrong" in wrong.text
    forged = client.post(link, data={"password": PASSWORD, "confirm": PASSWORD, "code": totp_code(secret)})
    assert forged.status_code == 403
    assert client.get("/operator/").status_code == 303  # still no session


def test_sessions_apart_a_company_session_never_opens_operator_pages(
    app: FastAPI, engine: Engine, api: Api
) -> None:
    operator = operator_sign_up(app)
    company_user = sign_up(app, engine, api.company_id, "ada@example.com")
    # The company's cookie goes to /operator (its path is /), and opens nothing there.
    assert company_user.client.get("/operator/").status_code == 303
    assert company_user.client.get("/operator/").headers["location"].startswith("/operator/sign-in")
    # The operator's cookie is not sent to /console; given by hand, it is no console session.
    session_id = operator.client.cookies.get("outfitter_operator")
    assert session_id
    stranger = company_user.client.__class__(app, base_url="http://testserver", follow_redirects=False)
    stranger.cookies.set("outfitter_session", session_id)
    assert stranger.get("/console/").status_code == 303


def test_credit_with_a_reason_names_the_operator_in_the_ledger_and_the_api_shows_it(
    app: FastAPI, engine: Engine, api: Api, db: Session
) -> None:
    operator = operator_sign_up(app)
    path = f"/companies/{api.company_id}"
    token = operator.csrf(path)
    missing = operator.post(
        f"{path}/credit", {"currency": "NGN", "amount": "1500", "reason": " ", "csrf_token": token}
    )
    assert missing.status_code == 422 and "Say why this credit is given" in missing.text
    bad = operator.post(
        f"{path}/credit", {"currency": "NGN", "amount": "-5", "reason": "x", "csrf_token": token}
    )
    assert bad.status_code == 422 and "The amount must be greater than zero." in bad.text
    unknown = operator.post(
        f"{path}/credit", {"currency": "ZZZ", "amount": "5", "reason": "x", "csrf_token": token}
    )
    assert unknown.status_code == 422
    forged = operator.post(f"{path}/credit", {"currency": "NGN", "amount": "1500", "reason": "x"})
    assert forged.status_code == 403
    assert api.get("/client/wallet").json()["data"]["balances"] == []  # nothing written so far

    done = operator.post(
        f"{path}/credit",
        {
            "currency": "NGN",
            "amount": "1500.50",
            "reason": "Goodwill for the late delivery",
            "csrf_token": token,
        },
    )
    assert done.status_code == 303
    wallet = api.get("/client/wallet").json()["data"]
    assert [(b["currency"], Decimal(b["balance"])) for b in wallet["balances"]] == [
        ("NGN", Decimal("1500.50"))
    ]
    assert wallet["entries"][0]["description"] == (
        f"Credit by operator:{operator.email}: Goodwill for the late delivery"
    )
    assert events_of(db, operator.actor) == [("wallet.credited", api.company_id)]
    page = operator.get(path)
    assert "Goodwill for the late delivery" in page.text and "NGN 1500.50" in page.text
    activity = operator.get("/activity").text
    assert "wallet.credited" in activity and "Acme Ltd" in activity
    company_log = sign_up(app, engine, api.company_id, "ada@example.com").get("/activity").text
    assert f"Outfitter operator {operator.email} credited" in company_log


def test_the_cli_records_its_operator_actions_as_events_too(api: Api, db: Session) -> None:
    code, out, err = run("wallet", "credit", str(api.company_id), "NGN", "100", "--reason", "Pilot credit")
    assert code == 0, err
    assert api.get("/client/wallet").json()["data"]["entries"][0]["description"] == (
        "Credit by operator: Pilot credit"
    )
    code, out, err = run("company", "create", "Initech", "--json")
    assert code == 0, err
    company_id = uuid.UUID(json.loads(out)["id"])
    code, out, err = run("token", "create", str(company_id), "--json")
    assert code == 0, err
    assert run("token", "revoke", json.loads(out)["id"])[0] == 0
    assert events_of(db, "operator") == [
        ("wallet.credited", api.company_id),
        ("company.created", company_id),
        ("api_token.created", company_id),
        ("api_token.revoked", company_id),
    ]


def test_suspending_a_company_refuses_its_tokens_and_console_until_reinstated(
    app: FastAPI, engine: Engine, api: Api, db: Session
) -> None:
    operator = operator_sign_up(app)
    company_user = sign_up(app, engine, api.company_id, "ada@example.com")
    assert api.get("/client/employees").status_code == 200
    path = f"/companies/{api.company_id}"
    done = operator.post(f"{path}/suspension", {"suspend": "yes", "csrf_token": operator.csrf(path)})
    assert done.status_code == 303
    for path_read in ("/client/employees", "/client/equipment"):  # a hot read too (db.reads)
        refused = api.get(path_read)
        assert refused.status_code == 403
        assert "This company is suspended by Outfitter" in refused.json()["message"]
    assert company_user.get("/").status_code == 303  # signed out
    page = company_user.get("/sign-in")
    again = company_user.post(
        "/sign-in", {"email": "ada@example.com", "password": PASSWORD, "csrf_token": form_token(page)}
    )
    assert again.status_code == 403 and "suspended by Outfitter" in again.text
    assert "Suspended" in operator.get(path).text

    operator.post(f"{path}/suspension", {"csrf_token": operator.csrf(path)})
    assert api.get("/client/employees").status_code == 200
    assert [kind for kind, _ in events_of(db, operator.actor)] == ["company.suspended", "company.reinstated"]


def test_companies_settings_tokens_and_console_users(app: FastAPI, db: Session) -> None:
    operator = operator_sign_up(app)
    empty = operator.post("/companies", {"name": "  ", "csrf_token": operator.csrf()})
    assert empty.status_code == 422 and "The company name is empty." in empty.text
    created = operator.post("/companies", {"name": "Globex", "csrf_token": operator.csrf()})
    company_id = re.search(r"/companies/([0-9a-f-]{36})", created.headers["location"]).group(1)  # type: ignore[union-attr]
    path = f"/companies/{company_id}"
    token = operator.csrf(path)
    settings = operator.post(
        f"{path}/settings",
        {
            "name": "Globex Corp",
            "offboard_retrieval": "on",
            "default_country": "Nigeria",
            "csrf_token": token,
        },
    )
    assert settings.status_code == 303
    bad_country = operator.post(
        f"{path}/settings", {"name": "Globex Corp", "default_country": "Atlantis", "csrf_token": token}
    )
    assert bad_country.status_code == 422 and "Unknown country" in bad_country.text

    issued = operator.post(
        f"{path}/tokens",
        {"name": "ERP sync", "scopes": ["read"], "expires_in_days": "30", "csrf_token": token},
    )
    assert issued.status_code == 201
    secret = re.search(r'<code id="new-token">(otf_[^<]+)</code>', issued.text).group(1)  # type: ignore[union-attr]
    from fastapi.testclient import TestClient

    client = TestClient(app, base_url="http://testserver")
    answer = client.get("/api/v2/client/employees", headers={"Authorization": f"Bearer {secret}"})
    assert answer.status_code == 200
    bad_scope = operator.post(f"{path}/tokens", {"scopes": ["root"], "csrf_token": token})
    assert bad_scope.status_code == 422 and "unknown scope" in bad_scope.text.lower()
    db.expire_all()
    token_id = db.scalars(select(ApiToken.id).where(ApiToken.company_id == uuid.UUID(company_id))).one()
    db.rollback()
    operator.post(f"/tokens/{token_id}/revoke", {"csrf_token": token})
    assert (
        client.get("/api/v2/client/employees", headers={"Authorization": f"Bearer {secret}"}).status_code
        == 401
    )

    invited = operator.post(
        f"{path}/users", {"email": "boss@globex.example", "role": "admin", "csrf_token": token}
    )
    assert invited.status_code == 201 and "/console/invite/" in invited.text
    assert "boss@globex.example" in operator.get(path).text
    db.expire_all()
    assert db.get(Company, uuid.UUID(company_id)).name == "Globex Corp"  # type: ignore[union-attr]
    db.rollback()
    assert [kind for kind, _ in events_of(db, operator.actor)] == [
        "company.created",
        "company.updated",
        "api_token.created",
        "api_token.revoked",
        "console_user.invited",
    ]
    assert operator.get("/companies/not-an-id").status_code == 404


def test_an_order_moved_to_delivered_shows_on_the_company_console(
    app: FastAPI, engine: Engine, api: Api, db: Session, demo_catalog: None
) -> None:
    orders = place_orders(api, db, engine)
    purchase = orders["purchase"]
    operator = operator_sign_up(app)
    listed = operator.get("/orders")
    assert purchase["tx_ref"] in listed.text and "Acme Ltd" in listed.text
    path = f"/orders/{purchase['id']}"
    token = operator.csrf(path)
    backwards = operator.post(f"{path}/advance", {"stage": "order_placed", "csrf_token": token})
    assert backwards.status_code == 409 and "stages only move forward" in backwards.text
    no_item = operator.post(
        f"{path}/advance", {"stage": "order_delivered", "item": "nope", "csrf_token": token}
    )
    assert no_item.status_code == 422 and "Choose a device of this order" in no_item.text
    moved = operator.post(
        f"{path}/advance",
        {"stage": "order_delivered", "note": "Signed for at reception", "csrf_token": token},
    )
    assert moved.status_code == 303
    answer = api.get(f"/client/orders/{purchase['id']}").json()["data"]
    assert answer["status"] == "completed" and {item["stage"] for item in answer["items"]} == {
        "order_delivered"
    }
    company_user = sign_up(app, engine, api.company_id, "ada@example.com")
    page = company_user.get(f"/orders/{purchase['id']}")
    assert (
        re.search(r'<dd id="order-stage">Order delivered</dd>', page.text)
        and "Signed for at reception" in page.text
    )
    assert events_of(db, operator.actor) == [
        ("order.updated", api.company_id),
        ("order.completed", api.company_id),
    ]
    assert operator.get("/orders/00000000-0000-0000-0000-000000000000").status_code == 404


def test_anomalies_resolved_and_the_queue_figures(
    app: FastAPI, engine: Engine, api: Api, db: Session, demo_catalog: None
) -> None:
    orders = place_orders(api, db, engine)
    from outfitter.db.tenancy import TenantSession, bind_company
    from outfitter.models import Transaction

    with TenantSession(engine) as session, session.begin():
        bind_company(session, api.company_id)
        transaction = session.scalars(
            select(Transaction).where(Transaction.tx_ref == orders["purchase"]["tx_ref"])
        ).one()
        session.add(
            PaymentAnomaly(
                company_id=api.company_id,
                transaction_id=transaction.id,
                tx_ref=transaction.tx_ref,
                kind=PaymentAnomalyKind.OVERPAYMENT,
                amount=Decimal("250.00"),
                currency_code="NGN",
                gateway_reference="gw-42",
            )
        )
    operator = operator_sign_up(app)
    page = operator.get("/anomalies")
    assert "gw-42" in page.text
    anomaly_id = db.scalars(select(PaymentAnomaly.id)).one()
    db.rollback()
    assert (
        operator.post(f"/anomalies/{anomaly_id}/resolve", {"csrf_token": form_token(page)}).status_code == 303
    )
    assert (
        "gw-42" not in operator.get("/anomalies").text and "gw-42" in operator.get("/anomalies?show=all").text
    )
    assert events_of(db, operator.actor) == [("payment_anomaly.resolved", api.company_id)]

    queue = operator.get("/queue").text
    assert re.search(r'data-figure="depth">\d+<', queue) and "No endpoint is failing." in queue


def test_sign_in_attempts_are_limited(app: FastAPI) -> None:
    operator = operator_sign_up(app)
    page = operator.get("/sign-in")
    answers = [
        operator.post(
            "/sign-in", {"email": operator.email, "password": "wrong", "csrf_token": form_token(page)}
        ).status_code
        for _ in range(11)
    ]
    assert answers[:10] == [401] * 10 and answers[10] == 429
