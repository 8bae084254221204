"""Two bulk registrations racing for one serial number on PostgreSQL, through a real server: one
wins, the other is refused (422 when its check already sees the number, 409 when both passed their
checks and the unique constraint decided while the rows were being written), and nothing of the
loser remains: no device, no history, no event."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from outfitter.models import Equipment, EquipmentHistory, Event
from tests.factories import Api
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
    assert statuses in ([201, 409], [201, 422]), {name: r.text[:300] for name, r in answers.items()}
    winner = next(name for name, response in answers.items() if response.status_code == 201)
    loser = next(name for name, response in answers.items() if response.status_code != 201)
    refusal = answers[loser].json()
    if answers[loser].status_code == 409:
        assert refusal["message"] == (
            "A device with one of these serial numbers was registered meanwhile; nothing was registered."
        )
    else:
        assert f"equipment.{DEVICES - 1}.serial_number" in refusal["errors"]
    assert len(answers[winner].json()["data"]) == DEVICES
    db.expire_all()
    titles = db.scalars(select(Equipment.title)).all()
    assert len(titles) == DEVICES and all(title.startswith(winner) for title in titles)
    assert _count(db, EquipmentHistory) == 2 * DEVICES  # added, then moved to storage
    assert _count(db, Event) == 2 * DEVICES
    db.rollback()
