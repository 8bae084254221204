"""What an operator reads from the CLI: `orders list` with its filters and `wallet show`."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from sqlalchemy.orm import Session

from tests.cli import cli_database, run  # noqa: F401  (the fixture)
from tests.factories import Api
from tests.payments.test_retrieval_received import offboarded

pytestmark = [pytest.mark.one_database, pytest.mark.usefixtures("cli_database")]


def listed(*args: str) -> list[dict[str, Any]]:
    code, out, err = run("orders", "list", *args, "--json")
    assert code == 0, err
    orders: list[dict[str, Any]] = json.loads(out)["orders"]
    return orders


def test_orders_list_filters_by_kind_status_and_company(api: Api, other_api: Api, db: Session) -> None:
    _, _, ours = offboarded(api, db, {"MacBook Pro": "storage"})
    _, _, theirs = offboarded(other_api, db, {"ThinkPad": "office"})
    everyone = listed()
    assert [order["id"] for order in everyone] == [theirs, ours]  # newest first
    assert everyone[1]["company_id"] == str(api.company_id)
    assert everyone[1] == {
        **api.get(f"/client/orders/{ours}").json()["data"],
        "company_id": str(api.company_id),
    }  # the API's order, and whose it is
    assert [order["id"] for order in listed("--company", str(api.company_id))] == [ours]
    assert [order["id"] for order in listed("--kind", "retrieval", "--status", "in_progress")] == [
        theirs,
        ours,
    ]
    assert listed("--kind", "purchase") == [] and listed("--status", "completed") == []
    assert [order["id"] for order in listed("--limit", "1")] == [theirs]

    code, out, _ = run("orders", "list", "--company", str(other_api.company_id))
    assert code == 0
    assert (
        out == f"order {theirs} (retrieval) is in_progress; items {everyone[0]['items'][0]['id']}: "
        f"retrieval_scheduled (company {other_api.company_id})\n"
    )
    for args, message in (
        (
            ("--kind", "Retrieval"),
            "--kind takes one of purchase, retrieval, storage_onboarding, got 'Retrieval'",
        ),
        (("--status", "done"), "--status takes one of cancelled, completed, in_progress"),
        (("--company", "acme"), "--company must be a UUID"),
        (("--company", str(uuid.uuid4())), "no company with id"),
    ):
        code, _, err = run("orders", "list", *args)
        assert code == 1 and message in err and err.count("\n") == 1


def test_wallet_show_prints_balances_and_the_recent_ledger(api: Api, other_api: Api, db: Session) -> None:
    code, out, _ = run("wallet", "show", str(api.company_id))
    assert code == 0 and out == "balances: none\n"
    offboarded(api, db, {"MacBook Pro": "storage"})  # a 1,000,000 NGN top-up, then 55,000 paid
    code, out, _ = run("wallet", "show", str(api.company_id), "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown == {"company_id": str(api.company_id), **api.get("/client/wallet").json()["data"]}
    assert [(each["currency"], each["balance"]) for each in shown["balances"]] == [("NGN", "945000.00")]
    assert [(each["kind"], each["amount"]) for each in shown["entries"]] == [
        ("debit", "-55000.00"),
        ("credit", "1000000.00"),
    ]
    code, out, _ = run("wallet", "show", str(api.company_id))
    lines = out.splitlines()
    assert lines[:2] == ["balances: NGN 945000.00", "recent entries, newest first:"]
    assert (
        "debit" in lines[2] and shown["entries"][0]["tx_ref"] in lines[2] and "balance 945000.00" in lines[2]
    )
    code, out, _ = run("wallet", "show", str(other_api.company_id), "--json")
    assert json.loads(out)["balances"] == []  # each company's own
    code, _, err = run("wallet", "show", str(uuid.uuid4()))
    assert code == 1 and "no company with id" in err
