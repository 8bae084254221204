"""The equipment CSV export: header, flattened fields, the list's filters and order, chunks,
formula injection, tenancy."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session

from outfitter.csvio.writer import record_cells
from outfitter.db.copy_rows import COPY_FROM
from outfitter.equipment import export
from tests.equipment.helpers import make_employee, register
from tests.factories import Api, assert_error


def read_csv(response: httpx.Response) -> list[dict[str, str]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    assert response.headers["content-disposition"].startswith('attachment; filename="equipment-')
    rows = list(csv.reader(io.StringIO(response.text, newline="")))
    assert rows[0] == list(export.COLUMNS)
    return [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]


def test_export_writes_the_list_flattened_newest_first(api: Api, other_api: Api, db: Session) -> None:
    employee = make_employee(db, api.company_id, "Ada", "Obi")
    first = register(
        api, title='Laptop, 14" "Pro"', serial_number="S1", currency="USD", purchase_price="1200.5"
    )
    second = register(
        api,
        title="Phone\nwith a line break",
        specs={"memory": "8 GB", "color": "black"},
        country="KE",
        status="Assigned",
        assignee_id=str(employee.id),
    )
    register(other_api, title="Not ours")
    rows = read_csv(api.get("/client/equipment/export"))
    assert [row["id"] for row in rows] == [second["id"], first["id"]]
    assert rows[1]["title"] == 'Laptop, 14" "Pro"' and rows[0]["title"] == "Phone\nwith a line break"
    assert rows[1]["currency.code"] == "USD" and rows[1]["purchase_price"] == "1200.50"
    assert rows[1]["serial_number"] == "S1" and rows[1]["assignee.name"] == ""
    assert rows[0]["specs.memory"] == "8 GB" and rows[0]["specs.color"] == "black"
    assert rows[0]["assignee.name"] == "Ada Obi" and rows[0]["assignee.id"] == str(employee.id)
    assert rows[0]["country_code"] == "KE" and rows[0]["status"] == "Assigned"
    assert rows[0]["created_at"] == second["created_at"] and rows[0]["other_details"] == "[]"
    listed = api.get("/client/equipment").json()["data"]["data"]
    assert [row["id"] for row in rows] == [record["id"] for record in listed]


def test_export_takes_the_list_filters(api: Api) -> None:
    register(api, title="stored", status="In_Storage", serial_number="A")
    register(api, title="free", serial_number="B")
    gone = register(api, title="gone")
    assert api.delete(f"/client/equipment/{gone['id']}").status_code == 200
    assert [row["title"] for row in read_csv(api.get("/client/equipment/export"))] == ["free", "stored"]
    stored = read_csv(api.get("/client/equipment/export", status="In_Storage"))
    assert [row["title"] for row in stored] == ["stored"]
    assert [row["title"] for row in read_csv(api.get("/client/equipment/export", serial_number="B,Z"))] == [
        "free"
    ]
    assert [row["title"] for row in read_csv(api.get("/client/equipment/export", status="Archived"))] == [
        "gone"
    ]
    body = assert_error(api.get("/client/equipment/export", country="Atlantis"), 422)
    assert list(body["errors"]) == ["query.country"]
    assert list(assert_error(api.get("/client/equipment/export", status="Lost"), 422)["errors"]) == [
        "query.status"
    ]


def test_cells_a_spreadsheet_would_run_are_escaped(api: Api) -> None:
    titles = ['=HYPERLINK("http://evil")', "+1+1", "-2", "@SUM(A1)", "\tcmd", "plain = fine"]
    for title in titles:
        register(api, title=title, description="=1+1")
    rows = read_csv(api.get("/client/equipment/export"))
    escaped = {row["title"] for row in rows}
    # "\tcmd" is stripped by the title's validation; the others keep their text behind a quote
    assert escaped == {'\'=HYPERLINK("http://evil")', "'+1+1", "'-2", "'@SUM(A1)", "cmd", "plain = fine"}
    assert {row["description"] for row in rows} == {"'=1+1"}


def test_export_reads_chunk_after_chunk(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export, "CHUNK_ROWS", 2)
    items: list[dict[str, Any]] = [{"title": f"d{index}"} for index in range(7)]
    created = api.post("/client/equipment/bulk", {"equipment": items}).json()["data"]
    rows = read_csv(api.get("/client/equipment/export"))
    listed = api.get("/client/equipment", per_page=100).json()["data"]["data"]
    assert [row["id"] for row in rows] == [record["id"] for record in listed]
    assert sorted(row["id"] for row in rows) == sorted(record["id"] for record in created)
    assert read_csv(api.get("/client/equipment/export", status="Sold")) == []


def test_export_then_import_gives_back_every_cell_exactly(api: Api, other_api: Api) -> None:
    from tests.equipment.test_import import post_csv

    awkward = ["'=", "'", "''+1", "=1+1", "\tcmd", " lead", "'plain", "-", "@x", "a,b", 'say "hi"', "l1\nl2"]
    for index, value in enumerate(awkward):
        register(api, title=f"T{index}", serial_number=f"S{index}", specs={"color": value, "memory": value})
    rows = read_csv(api.get("/client/equipment/export"))
    columns = ["title", "serial_number", "specs.color", "specs.memory"]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(columns)
    writer.writerows([row[column] for column in columns] for row in rows)
    imported = post_csv(other_api, buffer.getvalue())
    assert imported.status_code == 200, imported.text
    back = read_csv(other_api.get("/client/equipment/export"))
    assert sorted([row[column] for column in columns] for row in back) == sorted(
        [row[column] for column in columns] for row in rows
    )
    listed = other_api.get("/client/equipment", per_page=100).json()["data"]["data"]
    details = {record["serial_number"]: record for record in listed}
    assert [details[f"S{index}"]["specs"]["color"] for index in range(len(awkward))] == awkward


def test_a_long_cell_the_api_stores_imports_back(api: Api, other_api: Api) -> None:
    """A device's `other_details` of 100 texts of 2,000 characters (a 200 KB cell): the csv
    module's default limit (128 KiB) refused it on import, with its own words."""
    from tests.equipment.test_import import post_csv

    details = [f"{index:03d}" + "x" * 1997 for index in range(100)]
    register(api, title="Loaded", serial_number="LOAD-1", other_details=details)
    [row] = read_csv(api.get("/client/equipment/export"))
    assert len(row["other_details"]) > 128 * 1024
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(
        [
            ["title", "serial_number", "other_details"],
            [row["title"], row["serial_number"], row["other_details"]],
        ]
    )
    imported = post_csv(other_api, buffer.getvalue())
    assert imported.status_code == 200, imported.text
    [device] = other_api.get("/client/equipment").json()["data"]["data"]
    assert json.loads(device["other_details"]) == details  # the answers give it as JSON text


def test_rows_written_by_a_batch_export_what_the_list_says_too(api: Api) -> None:
    """A batch writes its JSON columns by COPY, in text of another spacing than an INSERT's: the
    export renders them as the answers do, not as whichever text the row keeps."""
    devices = [
        {"title": f"Batch {n}", "serial_number": f"B{n}", "other_details": ["café", f"bag, {n}"]}
        for n in range(COPY_FROM)
    ]
    assert api.post("/client/equipment/bulk", {"equipment": devices}).status_code == 201
    register(api, title="Single", other_details=["café", "bag, single"])
    rows = read_csv(api.get("/client/equipment/export"))
    listed = api.get("/client/equipment", per_page=100).json()["data"]["data"]
    assert [list(row.values()) for row in rows] == record_cells(export.COLUMNS, listed)
    assert rows[0]["other_details"] == '["caf\\u00e9", "bag, single"]'
    assert {row["other_details"] for row in rows[1:]} == {
        f'["caf\\u00e9", "bag, {n}"]' for n in range(COPY_FROM)
    }


def test_each_row_is_what_cell_writes_of_the_list_record(api: Api, db: Session) -> None:
    """The export writes its cells straight from the columns; they must be exactly what `cell`
    writes of the list's records, field by field, whatever the values."""
    employee = make_employee(db, api.company_id, "=Ada", "Obi")
    register(
        api,
        title="-1 minus",
        make="@make",
        model="+model",
        year="2023",
        type="Laptop",
        state="Used",
        serial_number="'quoted",
        purchase_date="2024-02-29T23:30:00-02:00",
        purchase_price="0.125",
        currency="ngn",
        country="Kenya",
        description='a "description", with\r\na line break',
        image_url="https://example.com/x.png",
        other_details=["=charger", "bag, black"],
        specs={"memory": "\t16GB", "storage": "=512", "color": "'red"},
        status="Assigned",
        assignee_id=str(employee.id),
    )
    register(api, title="Plain", purchase_price="1200", status="In_Storage")
    register(api, title="Bare")
    rows = read_csv(api.get("/client/equipment/export"))
    listed = api.get("/client/equipment", per_page=100).json()["data"]["data"]
    assert [list(row.values()) for row in rows] == record_cells(export.COLUMNS, listed)
    assert rows[2]["assignee.name"] == "'=Ada Obi" and rows[2]["specs.color"] == "''red"
    assert rows[2]["purchase_price"] == "0.125" and rows[1]["purchase_price"] == "1200.00"
