"""A second company can neither read nor use the first one's transactions, orders and wallet."""

from __future__ import annotations

from sqlalchemy.orm import Session

from tests.factories import Api, assert_error
from tests.payments.conftest import add_credit, add_employee, card_body, prices


def test_orders_transactions_and_wallet_are_walled_off(api: Api, other_api: Api, db: Session) -> None:
    employee = add_employee(db, api.company_id)
    add_credit(db, api.company_id, "NGN", "100000000")
    bought = api.post(
        "/client/transactions/initiate",
        json=card_body(employee, prices(api)[0]["asset_pricing"]["id"], payment_method="Credit"),
    )
    assert bought.status_code == 200, bought.text
    tx_ref = bought.json()["data"]["tx_ref"]
    order_id = api.get("/client/orders").json()["data"]["data"][0]["id"]
    assert api.get(f"/client/orders/{order_id}").json()["data"]["tx_ref"] == tx_ref

    assert_error(other_api.get(f"/client/orders/{order_id}"), 404, "not found")
    assert_error(other_api.get(f"/client/transactions/{tx_ref}/verify"), 404, "not found")
    for path in ("/client/orders", "/client/transactions"):
        page = other_api.get(path).json()["data"]
        assert page["total"] == 0 and page["data"] == []
    assert other_api.get("/client/wallet").json()["data"] == {"balances": [], "entries": []}
    assert other_api.get("/client/equipment").json()["data"]["total"] == 0

    # The first company's figures are untouched by the second one's looking.
    wallet = api.get("/client/wallet").json()["data"]
    assert [balance["currency"] for balance in wallet["balances"]] == ["NGN"]
    assert api.get("/client/equipment").json()["data"]["total"] == 1


def test_a_malformed_order_id_is_404(api: Api) -> None:
    assert_error(api.get("/client/orders/not-an-id"), 404)
