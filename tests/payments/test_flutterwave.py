"""The Flutterwave adapter against a local stand-in that answers as Flutterwave's v3 API documents:
POST /payments -> data.link; GET /transactions/verify_by_reference?tx_ref= -> data.status, amount,
currency, tx_ref; webhooks carry the `verif-hash` header."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from outfitter.app import create_app
from outfitter.cli import app as cli
from outfitter.config import Settings, get_settings
from outfitter.db.base import utcnow
from outfitter.models import Order, Transaction
from outfitter.payments.gateways import registry_of
from outfitter.payments.gateways.flutterwave import FlutterwaveGateway
from tests.factories import Api, assert_error
from tests.payments.conftest import add_employee, card_body, count, prices

BASE = "https://flutterwave.test/v3"
SECRET = "FLWSECK_TEST-standin"
HASH = "outfitter-webhook-hash"


class FlutterwaveStandIn:
    """Payments created through /payments; a test marks one paid as a payer would at Flutterwave."""

    def __init__(self) -> None:
        self.payments: dict[str, dict[str, Any]] = {}
        self.next_id = 1000
        self.created: list[dict[str, Any]] = []  # the bodies of POST /payments
        self.verified_by: list[str] = []  # "reference" or "id", per verification asked
        self.outages = 0  # the next N requests answer 503
        self.timeouts = 0  # the next N requests time out

    def fail(self, tx_ref: str) -> dict[str, Any]:
        """A declined card: Flutterwave keeps the checkout open for another try."""
        payment = self.payments[tx_ref]
        self.next_id += 1
        payment.update(id=self.next_id, status="failed")
        return payment

    def pay(self, tx_ref: str, amount: str | None = None, currency: str | None = None) -> dict[str, Any]:
        payment = self.payments[tx_ref]
        self.next_id += 1
        payment.update(
            id=self.next_id,
            status="successful",
            amount=Decimal(amount) if amount else Decimal(payment["amount"]),
            currency=currency or payment["currency"],
        )
        return payment

    def fetched(self, payment: dict[str, Any]) -> httpx.Response:
        """A verification's answer; a payment's `amount_json`, if set, is its amount as raw JSON."""
        fields = {name: value for name, value in payment.items() if name != "amount_json"}
        data = {**fields, "amount": float(payment["amount"]), "charged_amount": float(payment["amount"])}
        body = json.dumps({"status": "success", "message": "Transaction fetched", "data": data})
        if "amount_json" in payment:
            body = body.replace(f'"amount": {data["amount"]}', f'"amount": {payment["amount_json"]}', 1)
        return httpx.Response(200, content=body, headers={"Content-Type": "application/json"})

    def handle(self, request: httpx.Request) -> httpx.Response:
        if self.timeouts:
            self.timeouts -= 1
            raise httpx.ReadTimeout("the stand-in did not answer", request=request)
        if self.outages:
            self.outages -= 1
            return httpx.Response(503, json={"status": "error", "message": "Service unavailable"})
        if request.headers.get("authorization") != f"Bearer {SECRET}":
            return httpx.Response(401, json={"status": "error", "message": "Invalid authorization key"})
        if request.method == "POST" and request.url.path == "/v3/payments":
            body = json.loads(request.content)
            assert {"tx_ref", "amount", "currency", "customer"} <= set(body)
            self.created.append(body)
            self.payments[body["tx_ref"]] = {
                "tx_ref": body["tx_ref"],
                "amount": body["amount"],
                "currency": body["currency"],
                "status": "pending",
            }
            link = f"https://checkout.flutterwave.test/v3/hosted/pay/{body['tx_ref'].lower()}"
            return httpx.Response(
                200, json={"status": "success", "message": "Hosted Link", "data": {"link": link}}
            )
        by_id = re.fullmatch(r"/v3/transactions/(\d+)/verify", request.url.path)
        if request.method == "GET" and by_id:
            self.verified_by.append("id")
            charge = next((p for p in self.payments.values() if str(p.get("id")) == by_id[1]), None)
            if charge is None:
                return httpx.Response(
                    404, json={"status": "error", "message": "No transaction was found for this id"}
                )
            return self.fetched(charge)
        if request.method == "GET" and request.url.path == "/v3/transactions/verify_by_reference":
            self.verified_by.append("reference")
            payment = self.payments.get(request.url.params.get("tx_ref", ""))
            if payment is None or "id" not in payment:
                return httpx.Response(
                    400, json={"status": "error", "message": "No transaction was found", "data": None}
                )
            return self.fetched(payment)
        return httpx.Response(404, json={"status": "error", "message": "Not found"})


@pytest.fixture
def standin() -> FlutterwaveStandIn:
    return FlutterwaveStandIn()


@pytest.fixture
def flutterwave_app(database_url: str, engine: Engine, standin: FlutterwaveStandIn) -> Iterator[FastAPI]:
    settings = Settings(
        database_url=database_url,
        rate_limit="off",
        public_url="http://testserver",
        gateway="flutterwave",
        flutterwave_base_url=BASE,
        flutterwave_secret_key=SECRET,
        flutterwave_webhook_hash=HASH,
    )
    application = create_app(settings)
    client = httpx.Client(transport=httpx.MockTransport(standin.handle))
    gateway = FlutterwaveGateway(BASE, SECRET, HASH, client=client, backoff_seconds=0.01)
    registry_of(application.state).put(gateway)
    yield application
    application.state.engine.dispose()


@pytest.fixture
def fw(flutterwave_app: FastAPI, api: Api) -> Iterator[Api]:
    with TestClient(flutterwave_app, base_url="http://testserver") as client:
        yield Api(client, api.token, api.company_id, api.token_id)


def webhook(fw: Api, payment: dict[str, Any], secret_hash: str | None = HASH) -> httpx.Response:
    body = {"event": "charge.completed", "data": {**payment, "amount": float(payment["amount"])}}
    headers = {"verif-hash": secret_hash} if secret_hash is not None else {}
    return fw.client.post("/api/v2/webhooks/payments/flutterwave", json=body, headers=headers)


def test_card_purchase_through_flutterwave(fw: Api, db: Session, standin: FlutterwaveStandIn) -> None:
    employee = add_employee(db, fw.company_id)
    data = fw.post(
        "/client/transactions/initiate", card_body(employee, prices(fw)[0]["asset_pricing"]["id"])
    ).json()["data"]
    assert data["link"].startswith("https://checkout.flutterwave.test/") and data["status"] == "Pending"
    assert standin.payments[data["tx_ref"]]["amount"] == f"{data['total_amount']:.2f}"
    assert fw.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]["status"] == "Pending"
    payment = standin.pay(data["tx_ref"])
    assert_error(webhook(fw, payment, "wrong"), 401)
    assert_error(webhook(fw, payment, None), 401)
    first = webhook(fw, payment)
    assert first.status_code == 200 and first.json()["data"]["outcome"] == "fulfilled"
    assert webhook(fw, payment).json()["data"]["outcome"] == "duplicate"
    assert count(db, Order) == 1
    verified = fw.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]
    assert verified["status"] == "Fulfilled" and verified["total_amount"] == f"{data['total_amount']:.2f}"


def test_verify_completes_a_flutterwave_payment_without_webhook(
    fw: Api, db: Session, standin: FlutterwaveStandIn
) -> None:
    employee = add_employee(db, fw.company_id)
    data = fw.post(
        "/client/transactions/initiate", card_body(employee, prices(fw)[0]["asset_pricing"]["id"])
    ).json()["data"]
    standin.pay(data["tx_ref"])
    assert fw.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]["status"] == "Fulfilled"


def test_a_short_flutterwave_payment_fails(fw: Api, db: Session, standin: FlutterwaveStandIn) -> None:
    employee = add_employee(db, fw.company_id)
    data = fw.post(
        "/client/transactions/initiate", card_body(employee, prices(fw)[0]["asset_pricing"]["id"])
    ).json()["data"]
    payment = standin.pay(data["tx_ref"], amount="10.00")
    # The webhook body claims the full amount; verify_by_reference says 10.00.
    lying = {**payment, "amount": Decimal(str(data["total_amount"]))}
    assert webhook(fw, lying).json()["data"]["outcome"] == "failed"
    assert count(db, Order) == 0


def _initiate(fw: Api, db: Session) -> dict[str, Any]:
    employee = add_employee(db, fw.company_id)
    response = fw.post(
        "/client/transactions/initiate", card_body(employee, prices(fw)[0]["asset_pricing"]["id"])
    )
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def test_the_checkout_session_ends_within_the_time_to_live(
    fw: Api, db: Session, standin: FlutterwaveStandIn
) -> None:
    _initiate(fw, db)
    created = standin.created[-1]
    assert created["session_duration"] == 24 * 60  # the default time to live, in minutes
    assert created["max_retry_attempt"] >= 1


def test_a_failed_attempt_is_not_final_and_a_successful_retry_fulfils(
    fw: Api, db: Session, standin: FlutterwaveStandIn
) -> None:
    """The money-losing case: a verify between a failed card and a successful retry once marked the
    transaction Failed, and the retry's payment was then answered already_settled."""
    data = _initiate(fw, db)
    failed = standin.fail(data["tx_ref"])
    assert webhook(fw, failed).json()["data"]["outcome"] == "pending"
    assert fw.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]["status"] == "Pending"
    retried = standin.pay(data["tx_ref"])
    assert webhook(fw, retried).json()["data"]["outcome"] == "fulfilled"
    assert count(db, Order) == 1


def test_a_pending_or_wrong_currency_payment_gives_no_order(
    fw: Api, db: Session, standin: FlutterwaveStandIn
) -> None:
    data = _initiate(fw, db)
    standin.payments[data["tx_ref"]].update(id=1, status="pending")
    assert fw.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]["status"] == "Pending"
    standin.pay(data["tx_ref"], currency="USD")
    verified = fw.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]
    assert verified["status"] == "Failed" and count(db, Order) == 0


@pytest.mark.parametrize("trouble", ["outages", "timeouts"])
def test_timeouts_and_5xx_are_retried(
    fw: Api, db: Session, standin: FlutterwaveStandIn, trouble: str
) -> None:
    data = _initiate(fw, db)
    standin.pay(data["tx_ref"])
    setattr(standin, trouble, 2)  # two failures, then an answer: within the three attempts
    assert fw.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]["status"] == "Fulfilled"
    setattr(standin, trouble, 3)  # every attempt fails: the initiate is refused, nothing is written
    employee = add_employee(db, fw.company_id, first="Grace")
    refused = fw.post(
        "/client/transactions/initiate", card_body(employee, prices(fw)[0]["asset_pricing"]["id"])
    )
    assert_error(refused, 502)


def test_a_bad_key_is_an_error_not_an_unpaid_transaction(
    flutterwave_app: FastAPI, fw: Api, db: Session, standin: FlutterwaveStandIn
) -> None:
    data = _initiate(fw, db)
    standin.pay(data["tx_ref"])
    client = httpx.Client(transport=httpx.MockTransport(standin.handle))
    gateway = registry_of(flutterwave_app.state).get("flutterwave")
    registry_of(flutterwave_app.state).put(FlutterwaveGateway(BASE, "FLWSECK-wrong", HASH, client=client))
    try:
        verified = fw.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]
        assert verified["status"] == "Pending"  # the gateway's word is missing, not negative
    finally:
        assert gateway is not None
        registry_of(flutterwave_app.state).put(gateway)
    assert fw.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]["status"] == "Fulfilled"


def _anomalies(monkeypatch: pytest.MonkeyPatch, database_url: str, *args: str) -> list[dict[str, Any]]:
    """`outfitter payments anomalies --json`, as an operator runs it."""
    monkeypatch.setenv("OUTFITTER_DATABASE_URL", database_url)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(cli, ["payments", "anomalies", "--json", *args])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    anomalies: list[dict[str, Any]] = json.loads(result.stdout)["anomalies"]
    return anomalies


def test_a_payment_after_the_transaction_expired_is_recorded_not_lost(
    fw: Api, db: Session, standin: FlutterwaveStandIn, monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    data = _initiate(fw, db)
    transaction = db.scalars(select(Transaction).where(Transaction.tx_ref == data["tx_ref"])).one()
    transaction.expires_at = utcnow() - timedelta(minutes=1)
    db.commit()
    assert fw.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]["status"] == "Expired"

    payment = standin.pay(data["tx_ref"])  # the payer finished just as it expired
    assert webhook(fw, payment).json()["data"]["outcome"] == "already_settled"
    redelivered = fw.client.post(
        "/api/v2/webhooks/payments/flutterwave",
        json={"event": "charge.completed.retry", "data": {**payment, "amount": float(payment["amount"])}},
        headers={"verif-hash": HASH},
    )
    assert redelivered.json()["data"]["outcome"] == "already_settled"
    anomalies = _anomalies(monkeypatch, database_url)
    assert len(anomalies) == 1  # once per payment, however often it is told
    late = anomalies[0]
    assert (late["kind"], late["tx_ref"], late["gateway_reference"]) == (
        "late_payment",
        data["tx_ref"],
        str(payment["id"]),
    )
    assert Decimal(late["amount"]) == Decimal(str(data["total_amount"])) and late["currency"] == "NGN"
    assert count(db, Order) == 0

    monkeypatch.setenv("OUTFITTER_DATABASE_URL", database_url)
    get_settings.cache_clear()
    assert CliRunner().invoke(cli, ["payments", "resolve", late["id"]]).exit_code == 0
    assert _anomalies(monkeypatch, database_url) == []
    assert len(_anomalies(monkeypatch, database_url, "--all")) == 1


def test_an_overpayment_fulfils_and_records_the_excess(
    fw: Api, db: Session, standin: FlutterwaveStandIn, monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    data = _initiate(fw, db)
    paid = Decimal(f"{data['total_amount']:.2f}") + Decimal("100.00")
    payment = standin.pay(data["tx_ref"], amount=str(paid))
    assert webhook(fw, payment).json()["data"]["outcome"] == "fulfilled"
    [over] = _anomalies(monkeypatch, database_url)
    assert (over["kind"], over["amount"], over["currency"]) == ("overpayment", "100.00", "NGN")


def test_less_than_a_minor_unit_over_is_no_overpayment(
    fw: Api, db: Session, standin: FlutterwaveStandIn, monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    """A float's last digits at the gateway are not money an operator must refund."""
    data = _initiate(fw, db)
    payment = standin.pay(data["tx_ref"])
    payment["amount_json"] = f"{data['total_amount']:.2f}0000000001"
    assert fw.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]["status"] == "Fulfilled"
    assert _anomalies(monkeypatch, database_url) == []


@pytest.mark.parametrize("amount", ["NaN", "Infinity", "-Infinity", "1e400", '"1e40"', "-5", "true", "null"])
def test_an_amount_no_payment_can_have_is_a_malformed_answer(
    fw: Api, db: Session, standin: FlutterwaveStandIn, amount: str
) -> None:
    """Such an answer left verify and the webhook at 500 on every retry; it is the gateway's error
    now (as "abc" was): the transaction stays Pending, and the gateway's next word settles it."""
    data = _initiate(fw, db)
    payment = standin.pay(data["tx_ref"])
    payment["amount_json"] = amount
    verified = fw.get(f"/client/transactions/{data['tx_ref']}/verify")
    assert verified.status_code == 200 and verified.json()["data"]["status"] == "Pending"
    refused = assert_error(webhook(fw, payment), 502)
    assert "amount" in refused["message"] and "Flutterwave" in refused["message"]
    del payment["amount_json"]  # the gateway answers a real amount again
    assert webhook(fw, payment).json()["data"]["outcome"] == "fulfilled"
    assert count(db, Order) == 1


def test_reconcile_goes_past_a_transaction_it_cannot_settle(
    flutterwave_app: FastAPI,
    fw: Api,
    db: Session,
    standin: FlutterwaveStandIn,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Runs take the oldest Pending first: one that cannot be settled was retried first in every run
    and stopped it, so no transaction after it was ever settled."""
    from outfitter.payments import reconcile as reconciliation

    stuck, paid = _initiate(fw, db), _initiate(fw, db)
    for transaction in (stuck, paid):
        standin.pay(transaction["tx_ref"])
    settle = reconciliation.settle
    stuck_id = db.scalars(select(Transaction.id).where(Transaction.tx_ref == stuck["tx_ref"])).one()
    db.commit()  # the test's own session holds no lock while the run writes

    def refusing(session: Session, transaction_id: Any, *args: Any, **kwargs: Any) -> Transaction:
        transaction = settle(session, transaction_id, *args, **kwargs)
        if transaction_id == stuck_id:
            session.flush()
            raise ValueError("a value the database refuses")  # after its writes: they must go too
        return transaction

    monkeypatch.setattr(reconciliation, "settle", refusing)
    state = flutterwave_app.state
    summary = reconciliation.reconcile(state.sessionmaker, registry_of(state))
    assert (summary.checked, summary.outcomes, summary.failed) == (2, {"Fulfilled": 1}, 1)
    assert "could not be settled 1" in summary.described()
    rows = db.execute(select(Transaction.tx_ref, Transaction.status))
    statuses = {tx_ref: status for tx_ref, status in rows}
    assert (statuses[stuck["tx_ref"]], statuses[paid["tx_ref"]]) == ("Pending", "Fulfilled")
    assert count(db, Order) == 1


def test_webhooks_verify_by_the_charge_id_and_check_its_tx_ref(
    fw: Api, db: Session, standin: FlutterwaveStandIn
) -> None:
    data = _initiate(fw, db)
    other = _initiate(fw, db)
    paid_other = standin.pay(other["tx_ref"])
    # A notice for our tx_ref naming another transaction's charge: that charge pays for nothing here.
    mixed = {**standin.payments[data["tx_ref"]], "id": paid_other["id"], "status": "successful"}
    assert webhook(fw, mixed).json()["data"]["outcome"] == "pending"
    assert standin.verified_by[-1] == "id"
    payment = standin.pay(data["tx_ref"])
    assert webhook(fw, payment).json()["data"]["outcome"] == "fulfilled"
    assert standin.verified_by[-1] == "id"
    fw.get(f"/client/transactions/{other['tx_ref']}/verify")
    assert standin.verified_by[-1] == "reference"  # verify and reconciliation go by reference


def test_a_notice_whose_key_is_over_200_characters_is_400_never_cut(
    fw: Api, db: Session, standin: FlutterwaveStandIn
) -> None:
    """A notice is recorded once by its key (event, charge id and status); cut to 200 characters,
    two notices differing past the cut would be taken for one, the second dropped as a duplicate."""
    data = _initiate(fw, db)
    payment = standin.pay(data["tx_ref"])
    body = {"event": "charge.completed" + "x" * 200, "data": {**payment, "amount": float(payment["amount"])}}
    refused = fw.client.post("/api/v2/webhooks/payments/flutterwave", json=body, headers={"verif-hash": HASH})
    assert_error(refused, 400, "1 to 200 characters")
    assert count(db, Order) == 0
    assert webhook(fw, payment).json()["data"]["outcome"] == "fulfilled"  # the same payment, a usual key
