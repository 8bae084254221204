"""Two bulk registrations racing for one serial number on PostgreSQL, through a real server: one
wins, the other is refused with a 422 naming the item, and nothing of the loser remains: no device,
no history, no event. The numbers are not read before the write: the unique index decides while
the rows are written (the loser's COPY waits for the winner's transaction, then fails), the
loser's write is undone to its savepoint and the batch is checked again, which finds the number."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from outfitter.equipment import bulk
from outfitter.models import Equipment, EquipmentHistory, Event
from tests.equipment.helpers import register
from tests.factories import Api, assert_error
from tests.payments.conftest import LiveServer, live_server

__all__ = ["live_server"]

DEVICES = 60  # a batch written by COPY


def _batch(name: str, contested: str) -> dict[str, Any]:
    items = [
        {"title": f"{name} {n}", "serial_number": f"{name}-{n}", "status": "In_Storage"}
        for n in range(DEVICES)
    ]
    items[-1]["serial_number"] = contested  # last: both checks pass before either batch is written
    return {"equipment": items}


def _count(db: Session, model: Any) -> int:
    return db.scalar(select(func.count()).select_from(model)) or 0


@pytest.mark.parametrize("round_", range(3))
def test_one_of_two_racing_batches_wins_and_nothing_of_the_other_remains(
    postgres_only: None, live_server: LiveServer, api: Api, db: Session, round_: int
) -> None:
    contested = f"CONTESTED-{round_}"
    # The token's last-used stamp is made now: when due, the first request's stamp would hold the
    # other (a row lock) until it commits, and there would be no race.
    assert api.get("/client/equipment").status_code == 200
    barrier = threading.Barrier(2)
    answers: dict[str, httpx.Response] = {}

    def register(name: str) -> None:
        with live_server.api(api.token) as client:
            barrier.wait()
            answers[name] = client.post("/client/equipment/bulk", json=_batch(name, contested))

    threads = [threading.Thread(target=register, args=(name,)) for name in ("left", "right")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    statuses = sorted(response.status_code for response in answers.values())
    assert statuses == [201, 422], {name: r.text[:300] for name, r in answers.items()}
    winner = next(name for name, response in answers.items() if response.status_code == 201)
    loser = next(name for name, response in answers.items() if response.status_code != 201)
    held = next(device for device in answers[winner].json()["data"] if device["serial_number"] == contested)
    assert answers[loser].json()["errors"] == {
        f"equipment.{DEVICES - 1}.serial_number": [
            f"Equipment with serial number '{contested}' already exists in this company: "
            f"device {held['id']} ({held['status']})."
        ]
    }
    assert len(answers[winner].json()["data"]) == DEVICES
    db.expire_all()
    titles = db.scalars(select(Equipment.title)).all()
    assert len(titles) == DEVICES and all(title.startswith(winner) for title in titles)
    assert _count(db, EquipmentHistory) == 2 * DEVICES  # added, then moved to storage
    assert _count(db, Event) == 2 * DEVICES
    db.rollback()


def test_a_number_freed_between_the_refused_write_and_the_check_is_a_409_to_send_again(
    postgres_only: None, api: Api, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unique index refuses the batch, then, before the check that would name the item, the
    device holding the number is deleted (by an operator, on another connection): nothing to name,
    so a 409 saying to send the request again, and nothing of the batch kept."""
    holder = register(api, title="Holder", serial_number="FREED")
    checks: list[bool] = []
    check = bulk.check_devices

    def deleting_before_the_second_check(
        session: Session, items: Any, *, serials_taken: bool = True, from_text: bool = False
    ) -> Any:
        checks.append(serials_taken)
        if serials_taken:  # the check after the refused write
            db.execute(delete(Equipment).where(Equipment.id == uuid.UUID(holder["id"])))
            db.commit()
        return check(session, items, serials_taken=serials_taken, from_text=from_text)

    monkeypatch.setattr(bulk, "check_devices", deleting_before_the_second_check)
    items = [{"title": f"Device {n}", "serial_number": f"B-{n}"} for n in range(DEVICES)]
    items[3]["serial_number"] = "FREED"
    response = api.post("/client/equipment/bulk", {"equipment": items})
    assert_error(response, 409, "send the request again")
    assert checks == [False, True]
    db.expire_all()
    assert _count(db, Equipment) == 0 and _count(db, EquipmentHistory) == 0
    db.rollback()


def _race(
    live_server: LiveServer, token: str, path: str, bodies: dict[str, Any]
) -> dict[str, httpx.Response]:
    barrier = threading.Barrier(len(bodies))
    answers: dict[str, httpx.Response] = {}

    def send(name: str) -> None:
        with live_server.api(token) as client:
            barrier.wait()
            answers[name] = client.post(path, json=bodies[name])

    threads = [threading.Thread(target=send, args=(name,)) for name in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return answers


@pytest.mark.parametrize("round_", range(4))
def test_two_batches_of_the_same_serials_in_opposite_orders_never_deadlock(
    postgres_only: None, live_server: LiveServer, api: Api, round_: int
) -> None:
    """Each waited for the other's next number in the unique index: a deadlock, and the loser was
    answered 503 ("writes crossed") instead of 422. A company's batches now take turns."""
    assert api.get("/client/equipment").status_code == 200  # the token's stamp, made now
    items = [{"title": f"R{round_} {n}", "serial_number": f"R{round_}-{n}"} for n in range(DEVICES)]
    bodies = {"forward": {"equipment": items}, "backward": {"equipment": items[::-1]}}
    answers = _race(live_server, api.token, "/client/equipment/bulk", bodies)
    statuses = sorted(response.status_code for response in answers.values())
    assert statuses == [201, 422], {name: r.text[:300] for name, r in answers.items()}
    loser = next(response for response in answers.values() if response.status_code == 422)
    assert len(loser.json()["errors"]) == DEVICES  # every number, each at its own position


@pytest.mark.parametrize("round_", range(4))
def test_two_employee_batches_of_the_same_emails_in_opposite_orders_never_deadlock(
    postgres_only: None, live_server: LiveServer, api: Api, round_: int
) -> None:
    assert api.get("/client/employees").status_code == 200
    people = [
        {"first_name": "Ada", "last_name": f"N{n}", "email": f"r{round_}.{n}@acme.io", "country_id": "NG",
         "phone": "+234 801 234 5678", "address": "1 Marina, Lagos"}
        for n in range(DEVICES)
    ]  # fmt: skip
    bodies = {"forward": {"employees": people}, "backward": {"employees": people[::-1]}}
    answers = _race(live_server, api.token, "/client/employees/bulk", bodies)
    statuses = sorted(response.status_code for response in answers.values())
    assert statuses == [201, 422], {name: r.text[:300] for name, r in answers.items()}
    loser = next(response for response in answers.values() if response.status_code == 422)
    assert len(loser.json()["errors"]) == DEVICES
