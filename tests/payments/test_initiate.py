"""Initiating transactions: the answer's shape, every check of section 9, Credit and storage."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
from sqlalchemy import Engine, func, select, update
from sqlalchemy.orm import Session

from outfitter.core.errors import UNKNOWN_FIELD
from outfitter.models import (
    AssetPricing,
    Equipment,
    EquipmentHistory,
    EquipmentReservation,
    EquipmentStatus,
    Order,
    SandboxPayment,
    Transaction,
    TransactionItem,
    Wallet,
    WalletEntry,
)
from outfitter.payments import drafts
from tests.factories import Api, assert_error
from tests.payments.conftest import add_credit, add_employee, add_storage_device, card_body, count, prices

AMOUNT_FIELDS = (
    "amount",
    "insurance",
    "gateway_fee",
    "onboarding_fee",
    "device_config_fee",
    "platform_fee",
    "total_amount",
)


def test_card_initiate_answers_a_pending_transaction_with_numbers_and_a_link(api: Api, db: Session) -> None:
    employee = add_employee(db, api.company_id)
    pricing = prices(api)[0]["asset_pricing"]
    response = api.post("/clients/transactions/initiate", card_body(employee, pricing["id"]))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["message"] == "Transaction initiated successfully."
    data = body["data"]
    assert data["status"] == "Pending" and data["payment_method"] == "Card" and data["currency"] == "NGN"
    assert all(isinstance(data[name], float | int) for name in AMOUNT_FIELDS)
    assert data["amount"] == float(pricing["amount"])
    assert data["link"] == f"http://testserver/sandbox/checkout/{data['tx_ref']}"
    assert data["order_id"] is None
    assert count(db, Order) == 0


def test_a_price_finer_than_its_currency_is_charged_as_listed(api: Api, db: Session) -> None:
    """A price stored finer than the currency's unit (imported before the import refused them) is
    charged as /client/assets lists it: unit price x quantity, not the rounded exact product."""
    employee = add_employee(db, api.company_id)
    listed = prices(api)[0]["asset_pricing"]
    db.execute(
        update(AssetPricing).where(AssetPricing.id == uuid.UUID(listed["id"])).values(amount="1000.005")
    )
    db.commit()
    shown = next(record for record in prices(api) if record["asset_pricing"]["id"] == listed["id"])
    assert shown["asset_pricing"]["amount"] == "1000.01"
    data = api.post("/client/transactions/initiate", card_body(employee, listed["id"], quantity=3)).json()[
        "data"
    ]
    assert data["amount"] == 3000.03  # 3 x 1000.01; 3 x 1000.005 would round to 3000.02
    unit_prices = db.scalars(
        select(TransactionItem.unit_price).join(Transaction).where(Transaction.tx_ref == data["tx_ref"])
    ).all()
    assert unit_prices == [Decimal("1000.01")]


def test_a_device_takes_the_type_of_its_category_or_none(api: Api, db: Session, engine: Engine) -> None:
    """A category named as a type (any case, singular or plural) gives that type; another gives
    none. A device of type 'Gadgets' (the category's name) could not be filtered on, set or
    imported: the type is one of the API's or null."""
    import json

    from outfitter.catalog.importer import import_catalog, parse_catalog

    def asset(name: str, category: str) -> dict[str, object]:
        price = {"country": "NG", "currency": "NGN", "amount": "1000"}
        return {"name": name, "year": "2025", "make": "Acme", "model": name, "category": category,
                "specifications": [{"spec": {"RAM": "8GB"}, "prices": [price]}]}  # fmt: skip

    catalog = {"assets": [asset("Gizmo", "Gadgets"), asset("Lappy", "laptop")]}
    with Session(engine) as session, session.begin():
        import_catalog(session, parse_catalog(json.dumps(catalog).encode(), "catalog.json"))
    employee = add_employee(db, api.company_id)
    add_credit(db, api.company_id, "NGN", "1000000")
    listed = {record["name"]: record["asset_pricing"]["id"] for record in prices(api)}
    for name in ("Gizmo", "Lappy"):
        bought = api.post(
            "/client/transactions/initiate", card_body(employee, listed[name], payment_method="Credit")
        )
        assert bought.status_code == 200, bought.text
    devices = api.get("/client/equipment", per_page=100).json()["data"]["data"]
    assert {device["title"]: device["type"] for device in devices} == {"Gizmo": None, "Lappy": "Laptop"}
    assert api.get("/client/equipment", type="Laptop/Workstation").json()["data"]["total"] == 1


@pytest.mark.usefixtures("postgres_only")
def test_a_card_transaction_is_stamped_within_its_database_transaction(
    api: Api, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Card initiate ends its reads before it calls the gateway, and writes in a new database
    transaction: its stamp must not be older than that transaction's start, or an `updated_since`
    walk, whose horizon is the oldest transaction in flight, could pass it while it is uncommitted
    and never return it (a black-box probe lost 10 of 6,000 this way)."""
    started: list[object] = []
    original = drafts._write

    def written(session: Session, *args: object) -> Transaction:
        transaction = original(session, *args)
        started.append(session.scalar(select(func.now())))  # the database transaction's start
        return transaction

    monkeypatch.setattr(drafts, "_write", written)
    employee = add_employee(db, api.company_id)
    response = api.post(
        "/client/transactions/initiate", card_body(employee, prices(api)[0]["asset_pricing"]["id"])
    )
    assert response.status_code == 200, response.text
    stamped = db.scalars(select(Transaction.updated_at)).one()
    assert started and stamped >= started[0]


def test_flat_list_orders_are_accepted(api: Api, db: Session) -> None:
    employee = add_employee(db, api.company_id)
    pricing = prices(api)[0]["asset_pricing"]["id"]
    body = {
        "payment_method": "Card",
        "employee_country_id": "Nigeria",
        "orders": [{"employee_id": str(employee), "asset_pricing_id": pricing, "quantity": 3}],
    }
    response = api.post("/client/transactions/initiate", body)
    assert response.status_code == 200, response.text
    assert response.json()["data"]["onboarding_fee"] == 45000.0  # 3 devices x 15,000 NGN
    for line in (5, {"asset_pricing_id": pricing}):  # a line that names no employee
        refused = assert_error(api.post("/client/transactions/initiate", {**body, "orders": [line]}), 422)
        assert list(refused["errors"]) == ["orders"]
        assert refused["errors"]["orders"][0].startswith("Line 0 of the list needs an employee_id")


def test_other_company_employee_is_422_naming_it_and_nothing_is_written(
    api: Api, other_api: Api, db: Session
) -> None:
    stranger = add_employee(db, other_api.company_id)
    pricing = prices(api)[0]["asset_pricing"]["id"]
    body = assert_error(api.post("/client/transactions/initiate", card_body(stranger, pricing)), 422)
    assert list(body["errors"]) == [f"orders.{stranger}"]
    assert count(db, Transaction) == 0


def test_employee_of_another_country_and_price_of_another_country_are_422(api: Api, db: Session) -> None:
    kenyan = add_employee(db, api.company_id, "KE")
    nigerian = add_employee(db, api.company_id, "NG", "Bola")
    ke_price = prices(api, "KE", "KES")[0]["asset_pricing"]["id"]
    body = card_body(kenyan, ke_price)
    body["orders"][str(nigerian)] = [{"asset_pricing_id": ke_price}]
    errors = assert_error(api.post("/client/transactions/initiate", body), 422)["errors"]
    assert "Kenya" in errors[f"orders.{kenyan}"][0]
    assert f"orders.{kenyan}.0.asset_pricing_id" in errors  # a Kenyan price for a Nigerian order
    assert count(db, Transaction) == 0


def test_prices_in_two_currencies_unknown_pricing_and_bad_values_are_422(api: Api, db: Session) -> None:
    employee = add_employee(db, api.company_id)
    ngn = prices(api, "NG", "NGN")[0]["asset_pricing"]["id"]
    usd = prices(api, "NG", "USD")[0]["asset_pricing"]["id"]
    body = card_body(employee, ngn)
    body["orders"][str(employee)] += [{"asset_pricing_id": usd}, {"asset_pricing_id": str(uuid.uuid4())}]
    errors = assert_error(api.post("/client/transactions/initiate", body), 422)["errors"]
    assert "one currency" in errors[f"orders.{employee}.1.asset_pricing_id"][0]
    assert f"orders.{employee}.2.asset_pricing_id" in errors
    for bad in (
        {**card_body(employee, ngn), "payment_method": "Cash"},
        {**card_body(employee, ngn), "employee_country_id": "Atlantis"},
        {**card_body(employee, ngn), "redirect_url": "javascript:alert(1)"},
        {**card_body(employee, ngn), "surprise": True},
        card_body(employee, ngn, quantity=0),
        card_body(employee, "not-a-uuid"),
        {**card_body(employee, ngn), "orders": {}},
    ):
        assert_error(api.post("/client/transactions/initiate", bad), 422)
    for empty in ({}, []):  # a map or a list of lines with nothing in it: no Python words
        refused = assert_error(
            api.post("/client/transactions/initiate", {**card_body(employee, ngn), "orders": empty}), 422
        )
        assert refused["errors"] == {"orders": ["Give at least 1 entry here; 0 given."]}
    assert count(db, Transaction) == 0


def test_an_unknown_employee_or_device_is_named_as_everywhere_else(api: Api, db: Session) -> None:
    """The same words as every other place that takes an employee's or a device's id."""
    stranger, device = uuid.uuid4(), uuid.uuid4()
    pricing = prices(api)[0]["asset_pricing"]["id"]
    bought = assert_error(api.post("/client/transactions/initiate", card_body(stranger, pricing)), 422)
    assert bought["errors"][f"orders.{stranger}"] == [
        "Unknown employee: give the id of one of your employees."
    ]
    employee = add_employee(db, api.company_id)
    storage = {
        "payment_method": "Card",
        "employee_country_id": "NG",
        "orders": {str(employee): [str(device)]},
    }
    onboarded = assert_error(api.post("/client/transactions/onboard-from-storage/initiate", storage), 422)
    assert list(onboarded["errors"].values()) == [["Unknown equipment: give the id of one of your devices."]]
    assert count(db, Transaction) == 0


def test_credit_initiate_debits_the_wallet_and_is_fulfilled_at_once(api: Api, db: Session) -> None:
    employee = add_employee(db, api.company_id)
    pricing = prices(api)[0]["asset_pricing"]["id"]
    add_credit(db, api.company_id, "NGN", "100000000")
    response = api.post(
        "/client/transactions/initiate", card_body(employee, pricing, payment_method="Credit")
    )
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["status"] == "Fulfilled" and data["gateway_fee"] == 0 and data["link"] is None
    order = api.get(f"/client/orders/{data['order_id']}").json()["data"]
    assert order["tx_ref"] == data["tx_ref"] and len(order["items"]) == 1
    wallet = api.get("/client/wallet").json()["data"]
    expected = f"{100000000 - data['total_amount']:.2f}"
    assert wallet["balances"][0]["balance"] == expected
    assert [entry["kind"] for entry in wallet["entries"]] == ["debit", "credit"]
    assert wallet["entries"][0]["balance_after"] == expected
    # the debit names its transaction as clients know it; the top-up has none
    assert [entry["tx_ref"] for entry in wallet["entries"]] == [data["tx_ref"], None]
    assert (
        api.get(f"/client/transactions/{wallet['entries'][0]['tx_ref']}/verify").json()["data"]["status"]
        == "Fulfilled"
    )
    equipment = db.get(Equipment, uuid.UUID(order["items"][0]["equipment_id"]))
    assert (
        equipment is not None
        and equipment.status == EquipmentStatus.ASSIGNED
        and equipment.assignee_id == employee
    )


def test_credit_short_is_402_and_nothing_is_written(api: Api, db: Session) -> None:
    employee = add_employee(db, api.company_id)
    pricing = prices(api)[0]["asset_pricing"]["id"]
    add_credit(db, api.company_id, "NGN", "1000")
    response = api.post(
        "/client/transactions/initiate", card_body(employee, pricing, payment_method="Credit")
    )
    message = assert_error(response, 402, "not enough credit")["message"]
    assert "the wallet holds 1000.00 NGN" in message  # written in the currency's minor units
    assert count(db, Transaction) == 0 and count(db, Equipment) == 0 and count(db, WalletEntry) == 1
    no_wallet = api.post(
        "/client/transactions/initiate",
        card_body(employee, prices(api, "NG", "USD")[0]["asset_pricing"]["id"])
        | {"payment_method": "Credit"},
    )
    assert_error(no_wallet, 402)
    assert count(db, Wallet) == 1


def storage_body(employee: uuid.UUID, *devices: uuid.UUID, method: str = "Card") -> dict[str, object]:
    return {
        "payment_method": method,
        "employee_country_id": "NG",
        "orders": {str(employee): [str(device) for device in devices]},
    }


def test_storage_initiate_charges_device_fees_only_and_reserves(api: Api, db: Session) -> None:
    employee = add_employee(db, api.company_id)
    first, second = add_storage_device(db, api.company_id), add_storage_device(db, api.company_id, "Pixel 8")
    response = api.post(
        "/client/transactions/onboard-from-storage/initiate", storage_body(employee, first, second)
    )
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["amount"] == 0 and data["insurance"] == 0 and data["platform_fee"] == 0
    assert (data["onboarding_fee"], data["device_config_fee"]) == (30000.0, 20000.0)
    assert data["total_amount"] == 50750.0  # 50,000 plus 1.5 % gateway fee
    assert data["link"] and data["currency"] == "NGN"
    assert count(db, EquipmentReservation) == 2
    again = api.post("/client/transactions/onboard-from-storage/initiate", storage_body(employee, second))
    assert_error(again, 409, "reserved")


def test_a_malformed_storage_device_is_named_at_its_path(api: Api, db: Session) -> None:
    """An id or `{"equipment_id"}`: anything else is named once, at its own path."""
    employee = add_employee(db, api.company_id)
    for item, path, message in [
        ({"foo": 1}, "0.foo", UNKNOWN_FIELD),
        ({"foo": 1}, "0.equipment_id", "Field required"),
        (5, "0.equipment_id", "valid string"),
    ]:
        body = {**storage_body(employee), "orders": {str(employee): [item]}}
        refused = assert_error(api.post("/client/transactions/onboard-from-storage/initiate", body), 422)
        assert message in refused["errors"][f"orders.{employee}.{path}"][0], refused
        assert all(key.startswith(f"orders.{employee}.0.") for key in refused["errors"]), refused


def test_storage_checks_ownership_status_and_duplicates(api: Api, other_api: Api, db: Session) -> None:
    employee = add_employee(db, api.company_id)
    theirs = add_storage_device(db, other_api.company_id)
    mine = add_storage_device(db, api.company_id)
    errors = assert_error(
        api.post("/client/transactions/onboard-from-storage/initiate", storage_body(employee, theirs)), 422
    )["errors"]
    assert list(errors) == [f"orders.{employee}.0"]
    assert_error(
        api.post("/client/transactions/onboard-from-storage/initiate", storage_body(employee, mine, mine)),
        422,
    )
    device = db.get(Equipment, mine)
    assert device is not None
    device.status = EquipmentStatus.UNASSIGNED
    db.commit()
    assert_error(
        api.post("/client/transactions/onboard-from-storage/initiate", storage_body(employee, mine)), 409
    )
    assert count(db, Transaction) == 0


def test_storage_by_credit_assigns_the_devices(api: Api, db: Session) -> None:
    employee = add_employee(db, api.company_id)
    device = add_storage_device(db, api.company_id)
    add_credit(db, api.company_id, "NGN", "25000")
    response = api.post(
        "/client/transactions/onboard-from-storage/initiate", storage_body(employee, device, method="Credit")
    )
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["status"] == "Fulfilled" and data["total_amount"] == 25000.0
    db.expire_all()
    equipment = db.get(Equipment, device)
    assert equipment is not None
    assert (equipment.status, equipment.assignee_id, equipment.asset_order_id) == (
        EquipmentStatus.ASSIGNED,
        employee,
        uuid.UUID(data["order_id"]),
    )
    events = db.scalars(
        select(EquipmentHistory.event_type).where(EquipmentHistory.equipment_id == device)
    ).all()
    assert events == ["assigned"]
    assert count(db, EquipmentReservation) == 0
    assert api.get("/client/wallet").json()["data"]["balances"][0]["balance"] == "0.00"


@pytest.mark.parametrize(
    "path", ["/client/transactions/initiate", "/clients/transactions/initiate", "/transactions/initiate"]
)
def test_initiate_answers_at_each_of_its_three_paths(api: Api, db: Session, path: str) -> None:
    """The interface's heading writes `/transactions/initiate` under /api/v2 (decisions 12)."""
    employee = add_employee(db, api.company_id)
    response = api.post(path, card_body(employee, prices(api)[0]["asset_pricing"]["id"]))
    assert response.status_code == 200, response.text
    assert response.json()["data"]["status"] == "Pending"


@pytest.mark.parametrize("quantity", [True, "2", 1.5, 0, 1001])
def test_a_quantity_is_a_whole_number_not_a_boolean_or_a_string(
    api: Api, db: Session, quantity: object
) -> None:
    employee = add_employee(db, api.company_id)
    body = card_body(employee, prices(api)[0]["asset_pricing"]["id"])
    body["orders"][str(employee)][0]["quantity"] = quantity
    errors = assert_error(api.post("/client/transactions/initiate", body), 422)["errors"]
    assert f"orders.{employee}.0.quantity" in errors
    assert count(db, Transaction) == 0


@pytest.mark.parametrize("method", ["Card", "Credit"])
def test_a_total_beyond_what_a_charge_may_reach_is_422_and_nothing_is_written(
    api: Api, db: Session, method: str
) -> None:
    """A catalog price may be as high as 999,999,999,999.99 (core.money.MAX_AMOUNT bounds each
    amount), but a transaction's total, quantities and fees included, is bounded too: no gateway is
    asked, nothing is written (on SQLite such a total could not even be stored)."""
    from outfitter.core.money import MAX_AMOUNT

    employee = add_employee(db, api.company_id)
    pricing = prices(api)[0]["asset_pricing"]
    db.execute(
        update(AssetPricing)
        .where(AssetPricing.id == uuid.UUID(pricing["id"]))
        .values(amount=Decimal("999999999999.99"))
    )
    db.commit()
    for quantity in (1, 100):  # over the bound by the fees alone, then by far
        response = api.post(
            "/client/transactions/initiate",
            card_body(employee, pricing["id"], quantity, payment_method=method),
        )
        error = assert_error(response, 422, "split it into smaller ones")
        assert list(error["errors"]) == ["orders"] and f"{MAX_AMOUNT:,}" in error["message"]
    assert count(db, Transaction) == 0 and count(db, SandboxPayment) == 0 and count(db, Equipment) == 0


def test_a_redirect_url_with_a_space_or_control_character_is_422(api: Api, db: Session) -> None:
    """The payer is sent to redirect_url (a Location header): a CR/LF, a tab or a space in it would
    be mangled or worse, so it is refused, as a webhook URL's are; an IRI's letters are kept."""
    employee = add_employee(db, api.company_id)
    pricing = prices(api)[0]["asset_pricing"]["id"]
    for url in (
        "https://ok.example/cb\r\nSet-Cookie: x=1",
        "https://ok.example/a b",
        "https://ok.example/\ta",
    ):
        response = api.post("/client/transactions/initiate", card_body(employee, pricing, redirect_url=url))
        error = assert_error(response, 422, "spaces or control characters")
        assert list(error["errors"]) == ["redirect_url"]
    assert count(db, Transaction) == 0
    kept = api.post(
        "/client/transactions/initiate", card_body(employee, pricing, redirect_url="https://例え.jp/済み")
    )
    assert kept.status_code == 200, kept.text
    assert db.scalars(select(Transaction.redirect_url)).one() == "https://例え.jp/済み"
