"""A client walks 100,000 devices by cursor while other clients create and archive devices at the
same time, through a real server on PostgreSQL: it sees every device that existed throughout
exactly once, and no device twice.

(With page numbers, each archive ahead of the reader shifts the rest of the list back by one, so
the reader skips a device; each create shifts it forward, so the reader sees one twice.)"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlalchemy import Engine, delete, text

from outfitter.db.base import utcnow
from outfitter.models import Equipment, EquipmentHistory, EquipmentSource, EquipmentStatus
from tests.factories import Api
from tests.payments.conftest import LiveServer, live_server

__all__ = ["live_server"]

DEVICES = 100_000
CREATES = 500
ARCHIVES = 500
PAGE = 100


SEED = text(
    """
    INSERT INTO equipment (id, company_id, title, source, status, serial_number, created_at, updated_at,
                           description, other_details, specs, documents, status_changed_at)
    SELECT device.id, :company_id, 'Device ' || (device.n - 1), :source, :status, 'WALK-' || (device.n - 1),
           made.at, made.at, '', '[]', '{}', '[]', now()
    FROM unnest(CAST(:ids AS uuid[])) WITH ORDINALITY AS device (id, n),
         LATERAL (SELECT :start + make_interval(secs => (device.n - 1) / 10) AS at) AS made
    """
)


@pytest.fixture
def devices(engine: Engine, api: Api) -> Iterator[list[uuid.UUID]]:
    """100,000 Unassigned devices, made by the server in one statement (the API would take minutes,
    rows sent from Python seconds): groups of ten share a created_at, so the id tie-break is walked
    too."""
    start = utcnow() - timedelta(days=30)
    ids = [uuid.uuid4() for _ in range(DEVICES)]
    values = {"source": EquipmentSource.EXTERNAL.value, "status": EquipmentStatus.UNASSIGNED.value}
    with engine.begin() as connection:
        connection.execute(SEED, {"company_id": api.company_id, "start": start, "ids": ids, **values})
    yield ids
    with engine.begin() as connection:  # faster than the suite's clean-up of 100,000 rows
        connection.execute(delete(EquipmentHistory))
        connection.execute(delete(Equipment))


@pytest.mark.runs_long
def test_a_cursor_walk_during_creates_and_archives_sees_each_device_once(
    postgres_only: None, api: Api, live_server: LiveServer, devices: list[uuid.UUID]
) -> None:
    to_archive = devices[:: DEVICES // ARCHIVES][:ARCHIVES]  # spread over the whole list
    archived = set(to_archive)
    writes_done = 0
    progress = threading.Condition()

    def write(n: int) -> uuid.UUID | None:
        nonlocal writes_done
        try:
            with live_server.api(api.token) as client:
                if n % 2:
                    response = client.delete(f"/client/equipment/{to_archive[n // 2]}")
                    assert response.status_code == 200, response.text
                    return None
                response = client.post("/client/equipment", json={"title": f"New {n}"})
                assert response.status_code == 201, response.text
                return uuid.UUID(response.json()["data"]["id"])
        finally:  # a failed write counts too, so the walk never waits for it: its error is raised below
            with progress:
                writes_done += 1
                progress.notify_all()

    seen: list[str] = []
    with ThreadPoolExecutor(max_workers=4) as writers, live_server.api(api.token) as reader:
        futures = [writers.submit(write, n) for n in range(CREATES + ARCHIVES)]
        cursor: str | None = None
        pages = 0
        while True:
            # Page i is read only once i writes have landed: the writes interleave with the whole
            # walk (and more run while each page is read), whatever the machine's speed.
            landed = min(pages, CREATES + ARCHIVES)
            with progress:
                progress.wait_for(lambda landed=landed: writes_done >= landed)
            params: dict[str, str | int] = {"limit": PAGE}
            if cursor:
                params["cursor"] = cursor
            response = reader.get("/client/equipment", params=params)
            assert response.status_code == 200, response.text
            page = response.json()
            seen += [record["id"] for record in page["data"]["data"]]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
        created = {future.result() for future in futures} - {None}

    assert writes_done == CREATES + ARCHIVES and len(created) == CREATES
    assert len(seen) == len(set(seen)), "a device was seen twice"
    seen_ids = {uuid.UUID(record) for record in seen}
    throughout = set(devices) - archived
    assert throughout <= seen_ids, f"{len(throughout - seen_ids)} devices that existed throughout were missed"
    # Beyond those, only archived devices it reached before their archive, and new ones created
    # before it passed the front of the list (newest first: the others were behind it).
    assert seen_ids <= set(devices) | created
    assert pages > (DEVICES - ARCHIVES) // PAGE
