"""A batch's COPY runs on psycopg's own cursor (SQLAlchemy has no COPY: db.bulk_rows), in the
session's transaction: its errors are raised as SQLAlchemy raises an INSERT's, and the engine's
statement listeners hear of it. Every other statement runs through SQLAlchemy's own execution."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from sqlalchemy import Engine, event

from outfitter.db.copy_rows import COPY_FROM
from tests.factories import Api, assert_error


def test_a_copys_error_is_handled_as_sqlalchemy_handles_one(postgres_only: None, api: Api) -> None:
    """A serial number the unique index refuses mid-COPY is raised as SQLAlchemy's IntegrityError,
    so the batch answers its 422 (the numbers are not read before the write), and nothing of it
    stays."""
    held = api.post("/client/equipment", {"title": "Held", "serial_number": "SN-HELD"})
    assert held.status_code == 201
    items = [{"title": f"Batch {n}", "serial_number": f"SN-B{n}"} for n in range(COPY_FROM)]
    items[-1]["serial_number"] = "SN-HELD"
    answer = api.post("/client/equipment/bulk", {"equipment": items})
    assert assert_error(answer, 422)["errors"] == {
        f"equipment.{COPY_FROM - 1}.serial_number": [
            "Equipment with serial number 'SN-HELD' already exists in this company: "
            f"device {held.json()['data']['id']} (Unassigned)."
        ]
    }
    assert api.get("/client/equipment").json()["data"]["total"] == 1


def test_the_engines_listeners_hear_of_a_copy(postgres_only: None, app: FastAPI, api: Api) -> None:
    """Statement counts (tests.factories.counting_statements) see the COPY."""
    heard: list[str] = []

    def note(_connection: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        heard.append(statement)

    engine: Engine = app.state.engine
    items = [{"title": f"Batch {n}", "serial_number": f"SN-L{n}"} for n in range(COPY_FROM)]
    event.listen(engine, "before_cursor_execute", note)
    try:
        assert api.post("/client/equipment/bulk", {"equipment": items}).status_code == 201
    finally:
        event.remove(engine, "before_cursor_execute", note)
    assert [sql for sql in heard if sql.startswith("COPY equipment ")], heard
