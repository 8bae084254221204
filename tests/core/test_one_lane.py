"""One way into every endpoint: the hottest reads and writes reach their endpoint through the
router like every other request, so what the app declares around its routes (here a dependency
override) applies to them too, on either database."""

from __future__ import annotations

import uuid
from typing import Any, get_args

from fastapi import FastAPI, HTTPException
from fastapi.params import Depends

from outfitter.http.unit_of_work import ReadOnlyAccess, WriteAccess
from tests.factories import Api

EMPLOYEE = {
    "first_name": "Ada",
    "last_name": "Obi",
    "email": "ada.lane@acme.io",
    "country_id": "Kenya",
    "phone": "+254 700 000000",
    "address": "1 Moi Avenue",
}


def _dependency(access: Any) -> Any:
    return next(meta.dependency for meta in get_args(access)[1:] if isinstance(meta, Depends))


async def _refused() -> None:
    raise HTTPException(status_code=418, detail="Declared around the routes.")


def test_the_hot_reads_and_writes_go_through_the_router(app: FastAPI, api: Api) -> None:
    device = api.post("/client/equipment", {"title": "MacBook", "serial_number": "SN-LANE"})
    assert device.status_code == 201
    device_id = device.json()["data"]["id"]
    app.dependency_overrides[_dependency(ReadOnlyAccess)] = _refused
    app.dependency_overrides[_dependency(WriteAccess)] = _refused
    try:
        answers = [
            api.get("/client/equipment"),
            api.get("/client/equipment?per_page=2&page=1&sort=name"),
            api.get("/client/equipment/in-storage"),
            api.get(f"/client/equipment/{device_id}"),
            api.get(f"/client/equipment/{uuid.uuid4()}"),
            api.post("/client/employees", EMPLOYEE),
            api.post("/client/equipment", {"title": "MacBook", "serial_number": "SN-LANE-2"}),
        ]
    finally:
        app.dependency_overrides.clear()
    assert [(answer.status_code, answer.json()["message"]) for answer in answers] == [
        (418, "Declared around the routes.")
    ] * len(answers)
    assert api.get("/client/employees").json()["data"]["total"] == 0  # nothing written meanwhile
