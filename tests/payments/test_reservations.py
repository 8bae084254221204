"""Devices a Pending transaction reserves (storage onboarding, offboarding) cannot be moved: every
move (PATCH, DELETE, bulk move) is 409 naming the transaction, and changes nothing. Behind that
refusal, fulfilment keeps a backstop: a device no longer as the payment found it becomes a
`device_unavailable` payment anomaly. The race of a move and an initiate has one winner on
PostgreSQL, through a real server."""

from __future__ import annotations

import time
import uuid
from decimal import Decimal

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.models import (
    Equipment,
    EquipmentHistory,
    EquipmentReservation,
    EquipmentStatus,
    PaymentAnomaly,
    PaymentAnomalyKind,
    Transaction,
)
from outfitter.payments.gateways.sandbox import SandboxGateway
from tests.factories import Api, assert_error
from tests.payments.conftest import (
    LiveServer,
    add_assigned_device,
    add_employee,
    add_storage_device,
    count,
)
from tests.payments.test_concurrency import race

OFFBOARD = "/client/transactions/offboard/initiate"
STORAGE = "/client/transactions/onboard-from-storage/initiate"


def card(employee: uuid.UUID, devices: list[uuid.UUID]) -> dict[str, object]:
    return {
        "payment_method": "Card",
        "employee_country_id": "NG",
        "orders": {str(employee): [str(device) for device in devices]},
    }


def initiate(api: Api, path: str, employee: uuid.UUID, devices: list[uuid.UUID]) -> str:
    response = api.post(path, card(employee, devices))
    assert response.status_code == 200, response.text
    tx_ref: str = response.json()["data"]["tx_ref"]
    return tx_ref


def state(db: Session, equipment_id: uuid.UUID) -> tuple[EquipmentStatus, uuid.UUID | None, int]:
    equipment = db.get(Equipment, equipment_id, populate_existing=True)
    assert equipment is not None
    entries = len(
        db.scalars(select(EquipmentHistory.id).where(EquipmentHistory.equipment_id == equipment_id)).all()
    )
    db.commit()
    return equipment.status, equipment.assignee_id, entries


def test_every_move_of_a_reserved_device_is_409_naming_the_transaction(api: Api, db: Session) -> None:
    employee = add_employee(db, api.company_id)
    other = add_employee(db, api.company_id, first="Bola")
    held = add_assigned_device(db, employee, "Held laptop")
    stored = add_storage_device(db, api.company_id, "Stored laptop")
    offboarding = initiate(api, OFFBOARD, employee, [held])
    onboarding = initiate(api, STORAGE, employee, [stored])
    before = {device: state(db, device) for device in (held, stored)}

    for device, tx_ref, moves in (
        (held, offboarding, [{"status": "Archived"}, {"assignee_id": str(other)}, {"assignee_id": None}]),
        (stored, onboarding, [{"status": "Sold"}, {"status": "Assigned", "assignee_id": str(other)}]),
    ):
        for move in moves:
            body = assert_error(api.patch(f"/client/equipment/{device}", move), 409, tx_ref)
            assert f"({device})" in body["message"] and "pending transaction" in body["message"]
        assert_error(api.delete(f"/client/equipment/{device}"), 409, tx_ref)
    bulk = assert_error(
        api.post(
            "/client/equipment/bulk-move", {"equipment_ids": [str(stored), str(held)], "status": "Archived"}
        ),
        409,
    )
    assert offboarding in bulk["message"] and onboarding in bulk["message"]
    assert onboarding in bulk["errors"]["equipment_ids.0"][0]
    assert offboarding in bulk["errors"]["equipment_ids.1"][0]
    assert {device: state(db, device) for device in (held, stored)} == before
    # A second initiate for a reserved device names the transaction holding it too.
    again = assert_error(api.post(STORAGE, card(other, [stored])), 409, onboarding)
    assert f"Stored laptop ({stored}), by {onboarding}" in again["message"]

    # An edit that moves nothing is not a move: allowed while reserved.
    edited = api.patch(f"/client/equipment/{held}", {"description": "Scratched lid"})
    assert edited.status_code == 200 and edited.json()["data"]["status"] == "Assigned"


def test_a_device_moved_behind_the_reservation_becomes_an_anomaly_at_settlement(
    api: Api, db: Session, client: TestClient, sandbox: SandboxGateway
) -> None:
    """The backstop: a device gone at settlement (here moved straight in the database, as no
    request can) is recorded with its share of the money, never silently skipped."""
    employee = add_employee(db, api.company_id)
    kept, gone = add_assigned_device(db, employee, "Kept"), add_assigned_device(db, employee, "Gone")
    response = api.post(
        OFFBOARD,
        card(employee, [kept, gone]),
    )
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    equipment = db.get(Equipment, gone)
    assert equipment is not None
    equipment.status, equipment.assignee_id = EquipmentStatus.ARCHIVED, None
    db.commit()

    assert client.post(f"{data['link']}/pay", follow_redirects=False).status_code == 303
    verified = api.get(f"/client/transactions/{data['tx_ref']}/verify").json()["data"]
    assert verified["status"] == "Fulfilled"
    anomaly = db.scalars(select(PaymentAnomaly)).one()
    db.commit()
    assert anomaly.kind == PaymentAnomalyKind.DEVICE_UNAVAILABLE and anomaly.tx_ref == data["tx_ref"]
    assert anomaly.amount == (Decimal(str(data["total_amount"])) / 2).quantize(Decimal("0.01"))
    assert anomaly.currency_code == "NGN"

    # A storage onboarding whose device left storage: the whole payment is the anomaly.
    stored = add_storage_device(db, api.company_id)
    onboarding = api.post(STORAGE, card(employee, [stored])).json()["data"]
    device = db.get(Equipment, stored)
    assert device is not None
    device.status = EquipmentStatus.SOLD
    db.commit()
    assert client.post(f"{onboarding['link']}/pay", follow_redirects=False).status_code == 303
    api.get(f"/client/transactions/{onboarding['tx_ref']}/verify")
    second = db.scalars(select(PaymentAnomaly).where(PaymentAnomaly.tx_ref == onboarding["tx_ref"])).one()
    db.commit()
    assert second.kind == PaymentAnomalyKind.DEVICE_UNAVAILABLE
    assert second.amount == Decimal(str(onboarding["total_amount"]))
    assert state(db, stored)[0] == EquipmentStatus.SOLD


def archive(client: httpx.Client, device: uuid.UUID, lag: int) -> httpx.Response:
    """DELETE, sent after a lag that grows with the round: the initiate does more work before it
    locks the device, so the lags sweep the archive from well ahead of it to behind it, and the
    rounds in between race for real. Only the outcome is asserted, never a time."""
    time.sleep(lag * 0.001)
    return client.delete(f"/client/equipment/{device}")


def test_offboard_initiate_racing_an_archive_has_one_winner(
    postgres_only: None, api: Api, db: Session, live_server: LiveServer
) -> None:
    """24 rounds, each an offboarding and an archive of the same device released together: either
    the archive wins and the initiate is refused, or the initiate wins and the archive is 409
    naming its tx_ref; never both."""
    employee = add_employee(db, api.company_id)
    winners = {"initiate": 0, "archive": 0}
    with live_server.api(api.token) as client:
        for round_number in range(24):
            device = add_assigned_device(db, employee, f"Laptop {round_number}")
            body = card(employee, [device])
            initiated, archived = race(
                [
                    lambda body=body: client.post(OFFBOARD, json=body),
                    lambda device=device, lag=round_number: archive(client, device, lag),
                ]
            )
            status, _, _ = state(db, device)
            reserved = db.scalars(
                select(EquipmentReservation.transaction_id).where(EquipmentReservation.equipment_id == device)
            ).all()
            db.commit()
            if initiated.status_code == 200:
                tx_ref = initiated.json()["data"]["tx_ref"]
                assert archived.status_code == 409, archived.text
                assert tx_ref in archived.json()["message"]
                assert status == EquipmentStatus.ASSIGNED and len(reserved) == 1
                winners["initiate"] += 1
            else:
                assert (initiated.status_code, archived.status_code) == (409, 200), [
                    initiated.text,
                    archived.text,
                ]
                assert "Archived" in initiated.json()["message"]
                assert status == EquipmentStatus.ARCHIVED and not reserved
                winners["archive"] += 1
    assert sum(winners.values()) == 24
    assert count(db, Transaction) == winners["initiate"]
