"""`outfitter import employees|equipment COMPANY_ID FILE`: all or nothing, row errors one a line,
dry runs; and the catalog import's progress."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from outfitter.catalog.importer import import_catalog, load_catalog_file
from tests.cli import cli_database, run  # noqa: F401  (the fixture)
from tests.factories import Api

EMPLOYEES = (
    "first_name,last_name,email,country_id,phone,address\n"
    "Ada,Obi,ada@acme.io,NG,+234 801 234 5678,1 Marina\n"
    "Bola,Ade,bola@acme.io,Kenya,+254 700 000000,2 Moi Avenue\n"
)

pytestmark = pytest.mark.usefixtures("cli_database")


def test_import_employees_creates_them_for_the_company(api: Api, tmp_path: Path) -> None:
    file = tmp_path / "people.csv"
    file.write_text(EMPLOYEES, encoding="utf-8-sig")
    code, out, _ = run("import", "employees", str(api.company_id), str(file), "--dry-run", "--json")
    assert code == 0, out
    assert json.loads(out) == {"dry_run": True, "count": 2, "ids": []}
    assert api.get("/client/employees").json()["data"]["total"] == 0
    code, out, _ = run("import", "employees", str(api.company_id), str(file))
    assert code == 0 and out.strip() == "created 2 employees"
    listed = api.get("/client/employees").json()["data"]["data"]
    assert sorted(record["email"] for record in listed) == ["ada@acme.io", "bola@acme.io"]


def test_row_errors_are_printed_one_a_line_and_nothing_is_written(api: Api, tmp_path: Path) -> None:
    file = tmp_path / "people.csv"
    file.write_text(EMPLOYEES + "Cy,Eze,ada@acme.io,Atlantis,+234 801 234 5678,3 Broad\n")
    code, out, err = run("import", "employees", str(api.company_id), str(file))
    assert code == 1 and out == ""
    lines = err.strip().splitlines()
    assert lines[0] == "error: nothing was imported: 2 problems in people.csv:"
    assert lines[1].startswith("rows.4.country_id: Unknown country 'Atlantis'")
    assert lines[2] == "rows.4.email: The email ada@acme.io is also given at rows.2."
    assert api.get("/client/employees").json()["data"]["total"] == 0


def test_import_equipment_registers_the_devices(api: Api, tmp_path: Path) -> None:
    file = tmp_path / "devices.csv"
    file.write_text("title;serial_number;specs.memory\nMacBook;S1;16GB\nThinkPad;S2;8GB\n")
    code, out, _ = run("import", "equipment", str(api.company_id), str(file), "--json")
    assert code == 0, out
    ids = json.loads(out)["ids"]
    record = api.get(f"/client/equipment/{ids[0]}").json()["data"]
    assert record["title"] == "MacBook" and record["specs"]["memory"] == "16GB"
    assert record["history"][0]["actor"] == "system"


def test_bad_arguments_are_one_line_errors(api: Api, tmp_path: Path) -> None:
    file = tmp_path / "people.csv"
    file.write_text(EMPLOYEES)
    for args, fragment in [
        (("not-a-uuid", str(file)), "COMPANY_ID must be a UUID"),
        ((str(uuid.uuid4()), str(file)), "no company with id"),
        ((str(api.company_id), str(tmp_path / "missing.csv")), "cannot read"),
    ]:
        code, _, err = run("import", "employees", *args)
        assert code == 1 and fragment in err and len(err.strip().splitlines()) == 1, err


def test_the_catalog_import_reports_progress_per_asset(engine: Engine, demo_catalog_path: Path) -> None:
    catalog = load_catalog_file(demo_catalog_path)
    steps: list[int] = []
    with Session(engine) as session, session.begin():
        import_catalog(session, catalog, progress=steps.append)
    assert steps == [1] * len(catalog.assets) and steps
    code, out, _ = run("catalog", "import", str(demo_catalog_path))
    assert code == 0 and "assets created: 0" in out


def test_a_catalog_price_finer_than_its_currency_is_refused_and_nothing_is_imported(
    engine: Engine, tmp_path: Path
) -> None:
    """A price listed rounded to its currency but charged at its exact figure would make the items
    shown disagree with the total: 0.5 JPY (no minor unit) is refused; 1999.000000 USD is 1999.00."""
    asset = {
        "name": "Odd Phone",
        "make": "Odd",
        "model": "One",
        "year": "2024",
        "category": "Phones",
        "asset_code": "ODD-1",
        "specifications": [
            {
                "spec": {"RAM": "8GB"},
                "prices": [
                    {"country": "NG", "currency": "USD", "amount": "1999.000000"},
                    {"country": "JP", "currency": "JPY", "amount": "0.5"},
                ],
            }
        ],
    }
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"assets": [asset]}))
    code, out, err = run("catalog", "import", str(path))
    assert code != 0, out
    assert "assets.0.specifications.0.prices.1: 0.5 has more decimal places than JPY amounts have (0)" in err
    with Session(engine) as session:
        assert session.scalar(text("SELECT count(*) FROM assets WHERE asset_code = 'ODD-1'")) == 0
    asset["specifications"][0]["prices"].pop()  # type: ignore[index]
    path.write_text(json.dumps({"assets": [asset]}))
    code, out, err = run("catalog", "import", str(path))
    assert code == 0, err


def test_a_catalog_file_is_checked_as_the_api_checks_what_it_becomes(
    engine: Engine, tmp_path: Path, api: Api
) -> None:
    """An image is copied to the devices bought from it (`image_url`, http(s) only), names to every
    assets list: a javascript: image, a NUL, a name longer than its column are each refused with
    their path, nothing imported. A file saved with a BOM (as Notepad writes) is read."""
    asset: dict[str, object] = {
        "name": "Tidy Phone",
        "make": "Tidy",
        "model": "One",
        "year": "2024",
        "category": "Phones",
        "asset_code": "TIDY-1",
        "images": ["javascript:alert(1)"],
        "specifications": [
            {"spec": {"RAM": "8\u0000GB"}, "prices": [{"country": "NG", "currency": "NGN", "amount": "1000"}]}
        ],
    }
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"assets": [asset, {**asset, "asset_code": "TIDY-2", "name": "n" * 201}]}))
    code, out, err = run("catalog", "import", str(path))
    assert code != 0, out
    assert f"{path}: assets.0.images.0: Give an http:// or https:// URL" in err
    assert f"{path}: assets.0.specifications.0.spec.RAM: must not contain a NUL character" in err
    assert f"{path}: assets.1.name: String should have at most 200 characters" in err
    with Session(engine) as session:
        assert session.scalar(text("SELECT count(*) FROM assets WHERE asset_code LIKE 'TIDY-%'")) == 0
    asset |= {"images": ["https://images.example.com/tidy.jpg"]}
    asset["specifications"][0]["spec"] = {"RAM": "8GB"}  # type: ignore[index]
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"assets": [asset]}).encode())
    code, out, err = run("catalog", "import", str(path))
    assert code == 0, err
    listed = api.get("/client/assets", country_id="NG", currency_code="NGN", per_page=100).json()["data"][
        "data"
    ]
    (tidy,) = [record for record in listed if record["name"] == "Tidy Phone"]
    assert tidy["images"] == ["https://images.example.com/tidy.jpg"] and tidy["spec"] == {"RAM": "8GB"}


def _priced(tmp_path: Path, *prices: dict[str, str]) -> Path:
    asset = {
        "name": "Yen Phone",
        "make": "Yen",
        "model": "One",
        "year": "2024",
        "category": "Phones",
        "asset_code": "YEN-1",
        "specifications": [{"spec": {"RAM": "8GB"}, "prices": list(prices)}],
    }
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"assets": [asset]}))
    return path


def test_a_price_no_order_can_pay_is_imported_with_a_warning(engine: Engine, tmp_path: Path) -> None:
    """A price under the catalog's own limit whose one device, with its fees, comes to what no
    transaction may charge: every order naming it would be a 422, which the operator is told now."""
    path = _priced(
        tmp_path,
        {"country": "GB", "currency": "GBP", "amount": "999999999999.99"},
        {"country": "NG", "currency": "NGN", "amount": "1500000"},
    )
    code, out, err = run("catalog", "import", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["prices_beyond_one_charge"] == ["GBP 999999999999.99"]
    assert json.loads(out)["prices_created"] == 2
    assert err.strip().splitlines() == [
        "warning: no order can pay for a device priced GBP 999,999,999,999.99: with its fees one device "
        "alone comes to 1,000,000,000,000 or more, and one transaction charges less"
    ]


@pytest.mark.parametrize("amount", ["\u0661\u0662", "1e3", "1_000", "NaN"])
def test_a_catalog_amount_written_otherwise_than_with_the_digits_0_9_is_refused(
    engine: Engine, tmp_path: Path, amount: str
) -> None:
    """Decimal alone reads Arabic-Indic digits as 12: a spreadsheet's slip would become a price."""
    path = _priced(tmp_path, {"country": "KW", "currency": "KWD", "amount": amount})
    code, out, err = run("catalog", "import", str(path))
    assert code == 1, out
    assert err.strip() == (
        f"error: {path}: assets.0.specifications.0.prices.0.amount: Give the amount as the "
        'digits 0-9 with at most one point, e.g. "1999.00".'
    )
    with Session(engine) as session:
        assert session.scalar(text("SELECT count(*) FROM assets WHERE asset_code = 'YEN-1'")) == 0


def test_prices_in_a_currency_without_a_fee_schedule_are_imported_with_a_warning(
    engine: Engine, tmp_path: Path
) -> None:
    """Listed but never payable until the operator sets the fees: said at once, to the operator."""
    path = _priced(
        tmp_path,
        {"country": "JP", "currency": "JPY", "amount": "15227"},
        {"country": "NG", "currency": "NGN", "amount": "1500000"},
    )
    code, out, err = run("catalog", "import", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["currencies_without_fees"] == ["JPY"]
    assert err.strip().splitlines()[-1] == (
        "warning: no fee schedule for JPY: prices in it are listed, but orders paid in it are refused "
        "until 'outfitter fees set CURRENCY ...' gives it one"
    )
    code, out, err = run("fees", "set", "JPY", "--onboarding-fee", "1000")
    assert code == 0, err
    code, out, err = run("catalog", "import", str(path), "--json")
    assert code == 0 and "warning" not in err, err
    assert json.loads(out)["currencies_without_fees"] == []


@pytest.mark.one_database
@pytest.mark.parametrize("ending", ["\n", ""])
def test_the_import_progress_bar_ends_at_its_total(
    api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ending: str
) -> None:
    """Its total is the rows, not the lines with the header (it stopped at 10000/10001)."""
    from io import StringIO

    from rich.console import Console
    from rich.progress import Progress

    shown: list[Progress] = []

    def progress_bar() -> Progress:
        shown.append(Progress(console=Console(file=StringIO(), force_terminal=True), transient=False))
        return shown[-1]

    monkeypatch.setattr("outfitter.cli.imports.progress_bar", progress_bar)
    file = tmp_path / "people.csv"
    file.write_text(EMPLOYEES.rstrip("\n") + ending, encoding="utf-8")
    code, out, _ = run("import", "employees", str(api.company_id), str(file), "--dry-run")
    assert code == 0, out
    [task] = shown[0].tasks
    assert (task.completed, task.total) == (2, 2) and task.finished
