"""Employees from CSV files: the bulk rules through the same code, errors by line and column,
encodings, separators, dry runs, all or nothing."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from outfitter.models import Employee
from tests.factories import Api, assert_error
from tests.people.helpers import create_employee

HEADER = "first_name,last_name,email,country_id,phone,address,job_title"


def post_csv(api: Api, content: bytes | str, **params: Any) -> httpx.Response:
    data = content.encode() if isinstance(content, str) else content
    return api.request(
        "POST", "/client/employees/import", content=data, headers={"Content-Type": "text/csv"}, params=params
    )


def employee_count(db: Session) -> int:
    total = db.scalar(select(func.count()).select_from(Employee)) or 0
    db.rollback()
    return total


def row(number: int, **fields: str) -> str:
    values = {
        "first_name": "Ada",
        "last_name": f"Obi{number}",
        "email": f"ada{number}@acme.io",
        "country_id": "NG",
        "phone": "'+234 801 234 5678",  # as our export escapes it
        "address": f'"{number} Marina Road, Lagos"',
        "job_title": "",
    } | fields
    return ",".join(values[name] for name in HEADER.split(","))


def test_import_creates_every_employee_as_the_api_answers_them(api: Api, db: Session) -> None:
    content = "\n".join([HEADER, row(1, country_id="Kenya", job_title="Engineer"), row(2)]) + "\n"
    response = post_csv(api, content)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["message"] == "2 employees created successfully." and body["data"]["count"] == 2
    first = api.get(f"/client/employees/{body['data']['ids'][0]}").json()["data"]
    assert (
        first["email"] == "ada1@acme.io"
        and first["country_code"] == "KE"
        and first["job_title"] == "Engineer"
    )
    assert first["phone"] == "+234 801 234 5678" and first["address"] == "1 Marina Road, Lagos"
    assert employee_count(db) == 2


def test_bom_semicolons_and_non_ascii_names(api: Api) -> None:
    content = (
        "\ufeff" + HEADER.replace(",", ";") + "\n" + "Zoë;Müller;zoe@acme.io;DE;+49 30 1234567;Straße 1;\n"
    )
    response = post_csv(api, content.encode("utf-8"))
    assert response.status_code == 200, response.text
    [employee_id] = response.json()["data"]["ids"]
    record = api.get(f"/client/employees/{employee_id}").json()["data"]
    assert (record["first_name"], record["last_name"], record["country_code"]) == ("Zoë", "Müller", "DE")


def test_tab_separated_cells_as_a_spreadsheet_copies_them(api: Api) -> None:
    cells = ("Ada", "Obi", "ada@acme.io", "NG", "+234 801 234 5678", "1 Marina, Lagos", "")
    content = HEADER.replace(",", "\t") + "\n" + "\t".join(cells) + "\n"
    response = post_csv(api, content)
    assert response.status_code == 200, response.text
    [employee_id] = response.json()["data"]["ids"]
    record = api.get(f"/client/employees/{employee_id}").json()["data"]
    assert (record["email"], record["address"]) == ("ada@acme.io", "1 Marina, Lagos")  # the comma is text


def test_errors_are_keyed_by_line_and_column_and_nothing_is_created(api: Api, db: Session) -> None:
    create_employee(api, email="taken@acme.io")
    rows = [row(number) for number in range(2, 1502)]
    rows[5] = row(7, email="broken")
    rows[100] = row(102, country_id="Atlantis")
    rows[700] = row(702, email="TAKEN@acme.io")
    rows[1498] = row(1500, email="ada2@acme.io")  # the email of line 2, deep in the file
    content = HEADER + "\n" + "\n".join(rows) + "\n"
    body = assert_error(post_csv(api, content), 422)
    assert list(body["errors"]) == [
        "rows.7.email",
        "rows.102.country_id",
        "rows.702.email",
        "rows.1500.email",
    ]
    assert "rows.2" in body["errors"]["rows.1500.email"][0]
    assert "already exists" in body["errors"]["rows.702.email"][0]
    assert employee_count(db) == 1


def test_a_dry_run_writes_nothing_and_the_file_is_checked(api: Api, db: Session) -> None:
    content = "\n".join([HEADER, row(1), row(2), row(3)]) + "\n"
    response = post_csv(api, content, dry_run="true")
    assert response.status_code == 200, response.text
    assert response.json()["data"] == {"dry_run": True, "count": 3, "ids": []}
    assert response.json()["message"] == "Dry run: 3 employees would be created; nothing was written."
    one = post_csv(api, "\n".join([HEADER, row(1)]) + "\n", dry_run="true").json()
    assert one["message"] == "Dry run: 1 employee would be created; nothing was written."
    assert employee_count(db) == 0
    assert list(assert_error(post_csv(api, HEADER + ",salary\n"), 422)["errors"]) == ["rows.1.salary"]
    latin = (HEADER + "\n" + row(1) + "\n" + row(2, first_name="Zo\xeb") + "\n").encode("latin-1")
    assert list(assert_error(post_csv(api, latin), 422, "UTF-8")["errors"]) == ["rows.3"]
    assert_error(api.post("/client/employees/import", {"employees": []}), 415)
    assert employee_count(db) == 0


def test_the_file_can_be_uploaded_as_a_form(api: Api, db: Session) -> None:
    content = "\n".join([HEADER, row(1), row(2)]) + "\n"
    response = api.request(
        "POST", "/client/employees/import", files={"file": ("people.csv", content.encode(), "text/csv")}
    )
    assert response.status_code == 200, response.text
    assert response.json()["data"]["count"] == 2
    first = api.get(f"/client/employees/{response.json()['data']['ids'][0]}").json()["data"]
    assert first["email"] == "ada1@acme.io" and first["phone"] == "+234 801 234 5678"
    assert employee_count(db) == 2


def test_a_large_import_leaves_its_table_analyzed(postgres_only: None, api: Api, db: Session) -> None:
    """A table never analyzed is planned as nearly empty: the export right after a new company's
    first imports scanned every employee once per device. An import of ANALYZE_FROM_ROWS rows or
    more (and a tenth of what the statistics count) analyzes its table before it commits: the
    statistics count its rows at once."""
    from sqlalchemy import text

    from outfitter.csvio.reader import ANALYZE_FROM_ROWS

    # The tables as a new company's first imports find them: their statistics count no row.
    db.execute(text("ANALYZE employees"))
    db.execute(text("ANALYZE equipment"))
    db.commit()
    people = "\n".join([HEADER, *(row(number) for number in range(ANALYZE_FROM_ROWS))]) + "\n"
    assert post_csv(api, people).json()["data"]["count"] == ANALYZE_FROM_ROWS
    devices = "title,serial_number\n" + "".join(f"Laptop {n},S{n}\n" for n in range(ANALYZE_FROM_ROWS))
    imported = api.request(
        "POST", "/client/equipment/import", content=devices.encode(), headers={"Content-Type": "text/csv"}
    )
    assert imported.json()["data"]["count"] == ANALYZE_FROM_ROWS, imported.text
    counted = dict(
        db.execute(
            text("SELECT relname, reltuples FROM pg_class WHERE relname IN ('employees', 'equipment')")
        ).all()
    )
    db.rollback()
    assert counted == {"employees": ANALYZE_FROM_ROWS, "equipment": ANALYZE_FROM_ROWS}
    export = api.get("/client/equipment/export")
    assert export.status_code == 200 and export.text.count("\n") == ANALYZE_FROM_ROWS + 1


def test_a_required_column_missing_from_the_header_is_said_once(api: Api, db: Session) -> None:
    """Not once per row and field (a file of 10,000 rows lacking four columns: 40,000 errors)."""
    content = "first_name,email\n" + "".join(f"Ada,ada{number}@acme.io\n" for number in range(500))
    body = assert_error(post_csv(api, content, dry_run="true"), 422)
    assert body["errors"] == {
        f"rows.1.{column}": [f"The file has no {column!r} column, which every row needs."]
        for column in ("last_name", "country_id", "phone", "address")
    }
    assert employee_count(db) == 0


def test_blank_lines_are_skipped_up_to_a_bound(api: Api, db: Session) -> None:
    """A few blank lines (or rows of empty cells, as spreadsheets write) are nothing; a file of
    little else is refused before it costs the server seconds of reading."""
    content = "\n".join([HEADER, "", row(1), ",,,,,,", "  ", row(2), ""]) + "\n"
    response = post_csv(api, content)
    assert response.status_code == 200, response.text
    assert response.json()["data"]["count"] == 2

    content = HEADER + "\n" + row(3) + "\n" + "\r\n" * 10_000 + ",,,\n" + row(4) + "\n"
    body = assert_error(post_csv(api, content), 422)
    assert body["errors"] == {
        "rows": [
            "At most 10,000 blank lines (or rows of empty cells) a file; this one has more (from line "
            "10003): delete them."
        ]
    }
    assert employee_count(db) == 2
