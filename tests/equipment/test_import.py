"""Equipment from CSV files: encodings, separators, errors by line and column, all or nothing,
dry runs, limits, tenancy, and the body rules of the import path."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from outfitter.models import Equipment
from tests.equipment.helpers import make_employee, register
from tests.factories import Api, assert_error


def post_csv(api: Api, content: bytes | str, **params: Any) -> httpx.Response:
    data = content.encode() if isinstance(content, str) else content
    return api.request(
        "POST", "/client/equipment/import", content=data, headers={"Content-Type": "text/csv"}, params=params
    )


def device_count(db: Session) -> int:
    total = db.scalar(select(func.count()).select_from(Equipment)) or 0
    db.rollback()
    return total


def test_import_registers_every_row_with_nested_columns(api: Api, db: Session) -> None:
    employee = make_employee(db, api.company_id)
    content = (
        "title,serial_number,specs.memory,country,currency,purchase_price,status,assignee_id,other_details\r\n"
        "MacBook,SN1,16GB,NG,usd,1200.50,Unassigned,,\r\n"
        f'"Dell, XPS",SN2,,Kenya,,,Assigned,{employee.id},"[""charger"", ""bag""]"\r\n'
        "\r\n"
        "'=Tablet,SN3,,,,,In_Storage,,sleeve\r\n"
    )
    response = post_csv(api, content)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["message"] == "3 equipment created successfully."
    assert body["data"]["dry_run"] is False and body["data"]["count"] == 3
    records = [api.get(f"/client/equipment/{each}").json()["data"] for each in body["data"]["ids"]]
    assert [record["title"] for record in records] == ["MacBook", "Dell, XPS", "=Tablet"]
    assert records[0]["specs"]["memory"] == "16GB" and records[0]["currency"]["code"] == "USD"
    assert records[0]["purchase_price"] == "1200.50" and records[0]["country_code"] == "NG"
    assert (
        records[1]["assignee"]["id"] == str(employee.id)
        and records[1]["other_details"] == '["charger", "bag"]'
    )
    assert records[2]["status"] == "In_Storage" and records[2]["other_details"] == '["sleeve"]'


def test_a_bom_and_semicolons_are_read(api: Api) -> None:
    content = '\ufefftitle;serial_number;description\nÉcran 27";S-1;Bürobedarf, groß\n'
    response = post_csv(api, content.encode("utf-8"))
    assert response.status_code == 200, response.text
    [device_id] = response.json()["data"]["ids"]
    record = api.get(f"/client/equipment/{device_id}").json()["data"]
    assert record["title"] == 'Écran 27"' and record["description"] == "Bürobedarf, groß"


def test_a_byte_that_is_not_utf8_is_named_by_its_line(api: Api, db: Session) -> None:
    lines = ["title,serial_number"] + [f"Device {number},S{number}" for number in range(2, 80)]
    lines[1] = "Bürostuhl ergonomisch,S2"  # UTF-8 before the bad line: a file of mixed encodings
    data = "\n".join(lines).encode()
    data = data.replace(b"Device 57,", "Écran 57,".encode("latin-1"))
    body = assert_error(post_csv(api, data), 422, "UTF-8")
    assert list(body["errors"]) == ["rows.57"]
    assert device_count(db) == 0


def test_every_row_error_is_keyed_by_line_and_column_and_nothing_is_written(
    api: Api, other_api: Api, db: Session
) -> None:
    register(api, title="Existing", serial_number="TAKEN")
    stranger = make_employee(db, other_api.company_id, "Eve", "Other")
    rows = [f"Device {line},S{line},," for line in range(2, 602)]
    rows[10] = ",S12,,"  # line 12: no title
    rows[300] = f"Device 302,S302,Assigned,{stranger.id}"  # another company's employee
    rows[450] = "Device 452,TAKEN,,"
    rows[500] = "Device 502,S2,,"  # the serial of line 2
    rows[598] = "Device 600,S600,Lost,"  # deep in the file
    content = "title,serial_number,status,assignee_id\n" + "\n".join(rows) + "\n"
    body = assert_error(post_csv(api, content), 422)
    assert list(body["errors"]) == [
        "rows.12.title",
        "rows.302.assignee_id",
        "rows.452.serial_number",
        "rows.502.serial_number",
        "rows.600.status",
    ]
    assert body["errors"]["rows.302.assignee_id"] == [
        "Unknown employee: give the id of one of your employees."
    ]
    assert "rows.2" in body["errors"]["rows.502.serial_number"][0]
    assert device_count(db) == 1
    dry = assert_error(post_csv(api, content, dry_run="true"), 422)
    assert dry["errors"] == body["errors"]


def test_a_dry_run_checks_and_writes_nothing(api: Api, db: Session) -> None:
    content = "title,serial_number\nA,1\nB,2\n"
    response = post_csv(api, content, dry_run="true")
    assert response.status_code == 200, response.text
    assert response.json()["data"] == {"dry_run": True, "count": 2, "ids": []}
    assert "nothing was written" in response.json()["message"]
    assert device_count(db) == 0


def test_the_file_itself_is_checked(api: Api, db: Session) -> None:
    unknown = assert_error(post_csv(api, "title,colour,specs.ram\nA,red,8GB\n"), 422)
    assert list(unknown["errors"]) == ["rows.1.colour", "rows.1.specs.ram"]
    assert "specs.memory" in unknown["errors"]["rows.1.colour"][0]
    assert list(assert_error(post_csv(api, ""), 422)["errors"]) == ["rows.1"]
    assert list(assert_error(post_csv(api, "title,serial_number\n"), 422)["errors"]) == ["rows"]
    assert list(assert_error(post_csv(api, "title,title\nA,B\n"), 422)["errors"]) == ["rows.1.title"]
    assert list(assert_error(post_csv(api, "title\nA\nB,extra\n"), 422)["errors"]) == ["rows.3"]
    assert list(assert_error(post_csv(api, "title\nA\x00\n"), 422)["errors"]) == ["rows.2"]
    too_many = "title\n" + "A\n" * 10_001
    assert list(assert_error(post_csv(api, too_many), 422, "10,000")["errors"]) == ["rows"]
    assert device_count(db) == 0


def test_only_csv_up_to_10_mib_is_taken_here_and_json_elsewhere(api: Api, db: Session) -> None:
    as_json = api.post("/client/equipment/import", {"title": "A"})
    assert_error(as_json, 415, "text/csv")
    assert_error(
        api.request("POST", "/client/equipment", content=b"title\nA\n", headers={"Content-Type": "text/csv"}),
        415,
        "JSON",
    )
    big = b"title,description\n" + b"A," + b"x" * (10 * 1024 * 1024) + b"\n"
    assert_error(post_csv(api, big), 413, str(10 * 1024 * 1024))
    # Over the JSON limit (1 MiB) but within the CSV one: read, and refused row by row.
    long_rows = "title,description\n" + ("A," + "x" * 5000 + "\n") * 300
    body = assert_error(post_csv(api, long_rows), 422)
    assert "rows.2.description" in body["errors"]
    assert device_count(db) == 0


def test_unreadable_lines_and_nameless_columns_are_422(api: Api, db: Session) -> None:
    stray_quote = 'title,description\nA,"quoted"tail\n'
    assert list(assert_error(post_csv(api, stray_quote), 422, "cannot be read as CSV")["errors"]) == [
        "rows.2"
    ]
    # A cell longer than the csv module's default limit (128 KiB) is read; its field judges it.
    huge_cell = "title,description\nA," + '"' + "x" * 200_000 + '"\n'
    too_long = assert_error(post_csv(api, huge_cell), 422)["errors"]
    assert too_long == {"rows.2.description": ["String should have at most 4000 characters"]}
    nameless = assert_error(post_csv(api, "title,,serial_number\nA,,S\n"), 422, "Column 2 has no name")
    assert list(nameless["errors"]) == ["rows.1"]
    assert device_count(db) == 0


def test_many_columns_are_refused_in_one_short_answer(api: Api, db: Session) -> None:
    # A header repeating a column thousands of times is refused by its size, not checked pairwise.
    repeated = assert_error(post_csv(api, "title," * 5_000 + "title\nA\n"), 422, "columns")
    assert list(repeated["errors"]) == ["rows.1"]
    assert "at most 200 columns" in repeated["errors"]["rows.1"][0].lower()
    assert "5,001" in repeated["errors"]["rows.1"][0]
    # 100,000 unknown columns: the same short answer, not a problem per column.
    response = post_csv(api, ",".join(f"c{n}" for n in range(100_000)) + "\nA\n")
    assert_error(response, 422, "columns")
    assert len(response.content) < 2_000
    assert device_count(db) == 0


def test_header_problems_are_listed_up_to_a_bound_with_a_count_of_the_rest(api: Api, db: Session) -> None:
    header = ",".join(["title", *(f"colour{n}" for n in range(150))])
    body = assert_error(post_csv(api, header + "\nA\n"), 422)
    listed = [path for path in body["errors"] if path.startswith("rows.1.")]
    assert listed == [f"rows.1.colour{n}" for n in range(20)]
    assert body["errors"]["rows.1"] == ["And 130 more problems in the header like these."]
    assert device_count(db) == 0


def test_other_details_nested_too_deep_is_422_on_its_cell(api: Api, db: Session) -> None:
    deep = "[" * 1_000 + "]" * 1_000
    very_deep = "[" * 60_000 + "]" * 60_000  # within the csv module's cell limit
    content = f'title,other_details\nA,"[""fine""]"\nB,{deep}\nC,{very_deep}\n'
    body = assert_error(post_csv(api, content), 422)
    assert list(body["errors"]) == ["rows.3.other_details", "rows.4.other_details"]
    assert "nested" in body["errors"]["rows.3.other_details"][0]
    assert device_count(db) == 0


def test_an_item_of_a_list_cell_refused_is_named_in_its_message(api: Api, db: Session) -> None:
    content = 'title,other_details\nA,"[1, ""fine"", null]"\n'
    body = assert_error(post_csv(api, content), 422)
    assert body["errors"] == {
        "rows.2.other_details": [
            "other_details.0: Input should be a valid string",
            "other_details.2: Input should be a valid string",
        ]
    }
    assert device_count(db) == 0


def test_an_unterminated_quote_is_named_with_its_row(api: Api, db: Session) -> None:
    content = 'title,serial_number\nA,1\n"B,2\nC,3\n'
    body = assert_error(post_csv(api, content), 422, "quote")
    assert list(body["errors"]) == ["rows.3"]
    assert "never closed" in body["errors"]["rows.3"][0]
    assert device_count(db) == 0


def test_cells_are_read_as_written_apart_from_the_export_escape(api: Api) -> None:
    content = "title,description,specs.color,specs.memory\nA,'=x,\tblue,''=\nB,'abc,  grey,'\t8GB\n"
    response = post_csv(api, content)
    assert response.status_code == 200, response.text
    records = [api.get(f"/client/equipment/{each}").json()["data"] for each in response.json()["data"]["ids"]]
    assert [record["description"] for record in records] == ["=x", "'abc"]
    # A leading tab or space is the cell's own (the JSON body would keep it too).
    assert [record["specs"]["color"] for record in records] == ["\tblue", "  grey"]
    assert [record["specs"]["memory"] for record in records] == ["'=", "\t8GB"]


def test_the_file_can_be_uploaded_as_a_form(api: Api, db: Session) -> None:
    path = "/client/equipment/import"
    content = b"title,serial_number\nMacBook,F1\nThinkPad,F2\n"
    dry = api.request(
        "POST", path, params={"dry_run": "true"}, files={"file": ("d.csv", content, "text/csv")}
    )
    assert dry.status_code == 200 and dry.json()["data"] == {"dry_run": True, "count": 2, "ids": []}
    response = api.request("POST", path, files={"file": ("devices.csv", content, "text/csv")})
    assert response.status_code == 200, response.text
    ids = response.json()["data"]["ids"]
    assert [api.get(f"/client/equipment/{each}").json()["data"]["title"] for each in ids] == [
        "MacBook",
        "ThinkPad",
    ]
    # the rows are checked as ever: both serial numbers are now taken
    taken = assert_error(api.request("POST", path, files={"file": ("d.csv", content, "text/csv")}), 422)
    assert list(taken["errors"]) == ["rows.2.serial_number", "rows.3.serial_number"]
    wrong_field = api.request("POST", path, files={"upload": ("d.csv", content, "text/csv")})
    assert list(assert_error(wrong_field, 422, "file")["errors"]) == ["file"]
    as_text = api.request(
        "POST", path, data={"file": "title\nA\n"}, files={"other": ("x", b"", "text/plain")}
    )
    assert list(assert_error(as_text, 422, "file")["errors"]) == ["file"]
    assert device_count(db) == 2
