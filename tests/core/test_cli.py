"""The operator CLI, run as an operator would, against the test database."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import DataError
from sqlalchemy.orm import Session

from outfitter.cli import main
from outfitter.config import get_settings
from outfitter.models import ApiToken, Asset, AssetPricing, AssetStatus, Currency
from tests.cli import cli_database, run  # noqa: F401  (the fixture)
from tests.factories import DEMO_CATALOG, assert_error

pytestmark = pytest.mark.usefixtures("cli_database")


def test_company_and_token_create_print_json_and_the_token_works(client: TestClient) -> None:
    code, out, _ = run("company", "create", "Initech", "--json")
    assert code == 0
    company = json.loads(out)
    assert company["name"] == "Initech"
    code, out, _ = run(
        "token", "create", company["id"], "--scope", "read", "--expires-in-days", "7", "--json"
    )
    assert code == 0
    token = json.loads(out)
    assert set(token) == {"id", "name", "token", "scopes", "expires_at"}
    assert token["name"] == "Initech API"  # the default: the company's name
    assert token["scopes"] == ["read"] and token["token"].startswith("otf_") and token["expires_at"]
    headers = {"Authorization": f"Bearer {token['token']}"}
    assert client.get("/api/v2/client/currencies", headers=headers).status_code == 200

    code, out, _ = run("token", "revoke", token["id"])
    assert code == 0 and out == f"token {token['id']} revoked\n"
    assert_error(client.get("/api/v2/client/currencies", headers=headers), 401, "revoked")
    code, again, _ = run("token", "revoke", token["id"])  # a script may run it twice: exit 0, and say so
    listed = json.loads(run("token", "list", company["id"], "--json")[1])
    revoked_at = next(item["revoked_at"] for item in listed["tokens"] if item["id"] == token["id"])
    assert revoked_at.endswith("Z")  # the API's form of a time
    assert code == 0 and again == f"token {token['id']} was already revoked, at {revoked_at}\n"
    code, out, _ = run("token", "revoke", token["id"], "--json")  # as every printing command takes it
    assert code == 0 and json.loads(out) == {"id": token["id"], "revoked": True, "revoked_before": revoked_at}


def test_default_token_has_both_scopes_and_no_expiry() -> None:
    company = json.loads(run("company", "create", "Hooli", "--json")[1])
    token = json.loads(run("token", "create", company["id"], "--json")[1])
    assert token["scopes"] == ["read", "write"] and token["expires_at"] is None


@pytest.mark.one_database
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("token", "create", "not-a-uuid"), "COMPANY_ID must be a UUID"),
        (("token", "create", "00000000-0000-0000-0000-000000000000"), "no company with id"),
        (("token", "revoke", "00000000-0000-0000-0000-000000000000"), "no token with id"),
        (("company", "create", "   "), "the company name is empty"),
        (("token", "list", "not-a-uuid"), "COMPANY_ID must be a UUID"),
        (("wallet", "credit", "00000000-0000-0000-0000-000000000000", "NGN", "-5"), "greater than zero"),
        (("wallet", "credit", "00000000-0000-0000-0000-000000000000", "NGN", "9" * 23), "must be below"),
        (("wallet", "credit", "00000000-0000-0000-0000-000000000000", "NGN", "1_000"), "digits 0-9"),
        (("wallet", "credit", "00000000-0000-0000-0000-000000000000", "NGN", "\u0665"), "digits 0-9"),
        (("wallet", "credit", "00000000-0000-0000-0000-000000000000", "NGN", "1e3"), "digits 0-9"),
        (("company", "create", "b" * 201), "201 characters; at most 200"),
        (("company", "create", "Line\nBreak"), "the company name: Give it on one line"),
        (("company", "create", "Nul\x01Ctl"), "the company name: Give it on one line"),
        (("company", "create", "\u200b\u200d"), "the company name: Give at least one visible character"),
        (("token", "list", "00000000-0000-0000-0000-000000000000"), "no company with id"),
        (("fees", "set", "USD", "--onboarding-fee", "0.001"), "more decimals than USD has (2)"),
        (("fees", "set", "USD", "--onboarding-fee", "1e30"), "digits 0-9"),
        (("fees", "set", "USD", "--onboarding-fee", "9" * 20), "below 1,000,000,000,000"),
        (("fees", "set", "USD", "--storage-fee", "-1"), "must be 0 or more"),
        (("fees", "set", "USD", "--insurance-percent", "1e-30"), "digits 0-9"),
        (("fees", "set", "USD", "--gateway-percent", "0.0000001"), "more than six decimal places"),
        (("fees", "set", "USD", "--gateway-percent", "101"), "between 0 and 100"),
        (
            ("import", "equipment", "00000000-0000-0000-0000-000000000000", "/dev/zero"),
            "larger than the limit",
        ),
        (("catalog", "import", "/dev/zero"), "larger than the limit"),
    ],
)
def test_bad_input_exits_non_zero_with_one_line_error(args: tuple[str, ...], message: str) -> None:
    code, _, err = run(*args)
    assert code == 1
    assert err.strip().startswith("error:") and message in err and len(err.strip().splitlines()) == 1


def test_a_second_company_of_the_same_name_needs_to_be_asked_for() -> None:
    first = json.loads(run("company", "create", "Acme Ltd", "--json")[1])
    code, out, err = run("company", "create", "  acme ltd ")
    assert (code, out) == (1, "")
    assert err.strip() == (
        f"error: a company named 'Acme Ltd' exists already (id {first['id']}): use it, or give "
        "--allow-same-name to create another"
    )
    code, out, _ = run("company", "create", "Acme Ltd", "--allow-same-name", "--json")
    assert code == 0 and json.loads(out)["id"] != first["id"]
    listed = json.loads(run("company", "list", "--json")[1])["companies"]
    assert [company["name"] for company in listed].count("Acme Ltd") == 2


@pytest.mark.one_database
def test_scope_must_be_known() -> None:
    company = json.loads(run("company", "create", "Scoped", "--json")[1])
    code, _, err = run("token", "create", company["id"], "--scope", "admin")
    assert code == 1 and "unknown scope 'admin'" in err


@pytest.mark.one_database
def test_a_scim_token_cannot_also_read_or_write(engine: Engine) -> None:
    """scim.md: a scim token opens /scim/v2 and nothing else; the CLI refuses to mix it."""
    company = json.loads(run("company", "create", "Provisioned", "--json")[1])
    code, out, err = run("token", "create", company["id"], "--scope", "scim", "--scope", "read")
    assert code == 1 and out == ""
    assert err.strip() == (
        "error: a scim token opens the SCIM API only: create it with --scope scim alone, and another "
        "token for read or write"
    )
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(ApiToken)) == 0


def test_catalog_import_is_idempotent(demo_catalog_path: Path, engine: Engine) -> None:
    code, out, err = run("catalog", "import", str(demo_catalog_path), "--json")
    assert code == 0, out
    assert err == ""  # no progress bar, nor the empty line one left, when stderr is no terminal
    first = json.loads(out)
    assert first["assets_created"] == 14 and first["specifications_created"] == 21
    with Session(engine) as session:
        counts = (
            session.scalar(select(func.count()).select_from(Asset)),
            session.scalar(select(func.count()).select_from(AssetPricing)),
        )
    second = json.loads(run("catalog", "import", str(demo_catalog_path), "--json")[1])
    assert second == {
        "assets_created": 0,
        "assets_updated": 0,
        "specifications_created": 0,
        "prices_created": 0,
        "prices_updated": 0,
        "currencies_without_fees": [],  # the demo's every currency has its default fees
        "prices_beyond_one_charge": [],
    }
    with Session(engine) as session:
        assert (
            session.scalar(select(func.count()).select_from(Asset)),
            session.scalar(select(func.count()).select_from(AssetPricing)),
        ) == counts


@pytest.mark.one_database
def test_a_token_expiring_past_any_date_is_refused_in_one_line() -> None:
    company = json.loads(run("company", "create", "Far Future", "--json")[1])
    code, _, err = run("token", "create", company["id"], "--expires-in-days", "3000000")
    assert code == 1 and err.strip() == "error: --expires-in-days must be between 1 and 36,525 (100 years)"


def test_arguments_that_are_not_utf8_and_values_the_database_refuses_are_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`outfitter` as the shell runs it (`main`): bytes that are not UTF-8 reach Python as
    surrogates, and a value no command bounded is refused by the database; neither is a traceback."""
    monkeypatch.setattr(sys, "argv", ["outfitter", "company", "create", "bad\udcffname"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 1
    assert capsys.readouterr().err == "error: argument 3 is not UTF-8 text: give names and codes as UTF-8\n"

    def refused(*_: object) -> None:
        raise DataError("INSERT ...", {}, Exception("value too long for type character varying(200)\nDETAIL"))

    monkeypatch.setattr("outfitter.tenants.tokens.create_company", refused)
    monkeypatch.setattr(sys, "argv", ["outfitter", "company", "create", "Acme"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 1
    assert capsys.readouterr().err == (
        "error: the database refused a value, nothing was changed: "
        "value too long for type character varying(200)\n"
    )


@pytest.mark.one_database
def test_catalog_import_refuses_bad_files_with_a_readable_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{nope")
    code, _, err = run("catalog", "import", str(broken))
    assert code == 1 and "not valid JSON" in err
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps({"assets": [{"name": "X"}]}))
    code, _, err = run("catalog", "import", str(invalid))
    assert code == 1 and "assets.0" in err
    # Every problem of the file's shape, a line each: one round of fixes is enough.
    shapeless = tmp_path / "shapeless.json"
    assets = [{**asset, "colour": "red"} for asset in json.loads(DEMO_CATALOG.read_text())["assets"][:2]]
    assets[1]["year"] = "20x"
    shapeless.write_text(json.dumps({"assets": assets}))
    code, _, err = run("catalog", "import", str(shapeless))
    assert code == 1
    assert err.splitlines() == [
        f"error: {shapeless}: assets.0.colour: not a field of a catalog file (docs/catalog.md lists them)",
        f"{shapeless}: assets.1.year: String should match pattern '^[0-9]{{4}}$'",
        f"{shapeless}: assets.1.colour: not a field of a catalog file (docs/catalog.md lists them)",
    ]
    code, _, err = run("catalog", "import", str(tmp_path / "missing.json"))
    assert code == 1 and "cannot read" in err
    utf16 = tmp_path / "utf16.json"
    utf16.write_bytes(b"\xff\xfe[\x00]\x00")
    code, _, err = run("catalog", "import", str(utf16))
    assert code == 1 and "is not UTF-8 text (byte 0 cannot be read)" in err
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    code, _, err = run("catalog", "import", str(deep))
    assert code == 1 and "nests arrays or objects too deeply" in err


def test_catalog_import_refuses_what_a_file_gives_twice_and_writes_nothing(
    demo_catalog_path: Path, tmp_path: Path, engine: Engine
) -> None:
    """A second price for the same country and currency (by name or code alike), a spec or an asset
    given twice: the second silently replaced the first (the demo's MacBook then sold at 1.00 NGN)."""
    demo = json.loads(demo_catalog_path.read_text())
    asset = demo["assets"][0]
    prices = asset["specifications"][0]["prices"]
    country = prices[0]["country"]
    repriced = {"country": country, "currency": prices[0]["currency"], "amount": "1"}
    twice = {
        "price": {
            "assets": [
                {**asset, "specifications": [{**asset["specifications"][0], "prices": [*prices, repriced]}]}
            ]
        },
        "spec": {"assets": [{**asset, "specifications": [asset["specifications"][0]] * 2}]},
        "asset": {"assets": [asset, {**asset, "name": "Renamed"}]},
        "list": [asset],
    }
    where = {
        "price": f"assets.0.specifications.0.prices.{len(prices)}: a second price for ",
        "spec": "assets.0.specifications.1: the same spec as assets.0.specifications.0: give each "
        "specification once",
        "asset": "assets.1: the same ",
        "list": 'a catalog file is a JSON object with one key, "assets"',
    }
    for name, content in twice.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(content))
        code, out, err = run("catalog", "import", str(path))
        assert code == 1, out
        assert err.strip().startswith(f"error: {path}: {where[name]}"), err
        assert len(err.strip().splitlines()) == 1
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(AssetPricing)) == 0


def test_catalog_import_withdraws_unavailable_assets_and_refuses_unknown_statuses(
    demo_catalog_path: Path, tmp_path: Path, client: TestClient
) -> None:
    catalog = json.loads(demo_catalog_path.read_text())
    withdrawn = catalog["assets"][0]
    withdrawn["status"] = AssetStatus.UNAVAILABLE.value
    edited = tmp_path / "catalog.json"
    edited.write_text(json.dumps(catalog))
    assert run("catalog", "import", str(edited))[0] == 0
    company = json.loads(run("company", "create", "Withdrawn", "--json")[1])
    token = json.loads(run("token", "create", company["id"], "--json")[1])["token"]
    listed = client.get(
        "/api/v2/client/assets",
        params={"country_id": "NG", "currency_code": "NGN", "per_page": 100},
        headers={"Authorization": f"Bearer {token}"},
    ).json()["data"]
    assert listed["total"] == 21 - len(withdrawn["specifications"])
    assert withdrawn["name"] not in {record["name"] for record in listed["data"]}

    withdrawn["status"] = "Discontinued"
    edited.write_text(json.dumps(catalog))
    code, _, err = run("catalog", "import", str(edited))
    assert code == 1 and "assets.0.status" in err and "'Available' or 'Unavailable'" in err


@pytest.fixture
def data_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A data directory of the test's own (the demo keeps its token there)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    return tmp_path / "outfitter"


def test_demo_prints_a_working_token(client: TestClient, data_home: Path) -> None:
    code, out, _ = run("demo")
    assert code == 0, out
    token_line = next(line for line in out.splitlines() if line.startswith("Token:"))
    token = token_line.split()[1]
    listed = json.loads(run("token", "list", "--json")[1])["tokens"]
    assert f"(id {listed[-1]['id']};" in token_line  # the id to revoke it by
    response = client.get(
        "/api/v2/client/assets",
        params={"country_id": "NG", "currency_code": "NGN"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200
    assert response.json()["data"]["total"] == 21
    assert "curl -H 'Authorization: Bearer " in out


def test_company_and_token_lists_show_everything_but_the_token(engine: Engine) -> None:
    """Neither a revoked nor an expired token counts as live (the API refuses both)."""
    import uuid
    from datetime import timedelta

    from sqlalchemy import update

    from outfitter.db.base import utcnow

    company = json.loads(run("company", "create", "Listed Ltd", "--json")[1])
    token = json.loads(run("token", "create", company["id"], "--scope", "read", "--json")[1])
    run("token", "revoke", json.loads(run("token", "create", company["id"], "--json")[1])["id"])
    expired = json.loads(run("token", "create", company["id"], "--expires-in-days", "1", "--json")[1])
    with Session(engine) as session, session.begin():
        session.execute(
            update(ApiToken)
            .where(ApiToken.id == uuid.UUID(expired["id"]))
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )

    code, out, _ = run("company", "list", "--json")
    assert code == 0
    listed = next(entry for entry in json.loads(out)["companies"] if entry["id"] == company["id"])
    assert listed["name"] == "Listed Ltd" and listed["live_tokens"] == 1

    code, out, _ = run("token", "list", company["id"], "--json")
    assert code == 0 and token["token"] not in out
    tokens = json.loads(out)["tokens"]
    first = tokens[0]
    assert (first["id"], first["scopes"], first["revoked_at"], first["live"]) == (
        token["id"],
        ["read"],
        None,
        True,
    )
    assert len(tokens) == 3 and tokens[1]["revoked_at"] is not None and not tokens[1]["live"]
    assert (tokens[2]["id"], tokens[2]["revoked_at"], tokens[2]["live"]) == (expired["id"], None, False)
    assert set(tokens[0]) == {
        "live",
        "id",
        "company_id",
        "name",
        "scopes",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    }
    code, out, _ = run("token", "list", company["id"])
    assert code == 0 and token["token"] not in out
    assert [line.split("  ")[-1] for line in out.splitlines()[1:]] == ["REVOKED", "EXPIRED"]


def test_a_wallet_credit_that_would_overflow_the_balance_is_refused() -> None:
    company = json.loads(run("company", "create", "Rich Ltd", "--json")[1])
    assert run("wallet", "credit", company["id"], "NGN", "999999999999")[0] == 0
    code, _, err = run("wallet", "credit", company["id"], "NGN", "1")
    assert code == 1 and "would take the NGN balance to 1,000,000,000,000 or more" in err


def test_a_wallet_credit_in_what_is_not_money_is_refused(engine: Engine) -> None:
    """A database seeded before such codes were left out of the currencies holds them: an
    operator's typo (XXX for XAF) must not make a wallet of "Unknown Currency"."""
    with Session(engine) as session, session.begin():
        session.add(Currency(code="XXX", name="Unknown Currency", symbol="XXX", minor_units=2))
    company = json.loads(run("company", "create", "Typo Ltd", "--json")[1])
    code, _, err = run("wallet", "credit", company["id"], "XXX", "5")
    assert code == 1 and "XXX is not money a wallet holds: ISO 4217 gives it no minor unit" in err
    assert run("wallet", "credit", company["id"], "XAF", "5")[0] == 0


@pytest.mark.parametrize("url", ["", "mysql://somewhere/db"])
def test_a_bad_database_url_is_one_line_for_every_command(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("OUTFITTER_DATABASE_URL", url)
    get_settings.cache_clear()
    for command in (["company", "list"], ["db", "upgrade"], ["demo"]):
        code, _, err = run(*command)
        assert code == 1 and err.startswith("error: invalid configuration: OUTFITTER_DATABASE_URL")
        assert len(err.strip().splitlines()) == 1


def test_a_data_directory_that_cannot_be_made_is_one_line_for_every_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No OUTFITTER_DATABASE_URL: the default SQLite file's directory is made under XDG_DATA_HOME,
    here below a file, as for a service account whose home cannot be written."""
    not_a_directory = tmp_path / "a-file"
    not_a_directory.write_text("")
    monkeypatch.delenv("OUTFITTER_DATABASE_URL")
    monkeypatch.setenv("XDG_DATA_HOME", str(not_a_directory))
    get_settings.cache_clear()
    for command in (["company", "list"], ["db", "upgrade"], ["demo"], ["serve"]):
        code, _, err = run(*command)
        assert code == 1, (command, err)
        assert err.strip() == (
            f"error: cannot create the data directory {not_a_directory / 'outfitter'} for the default "
            "SQLite database (Not a directory): set OUTFITTER_DATABASE_URL, or XDG_DATA_HOME to a "
            "directory this user can write"
        )
    assert not_a_directory.read_text() == ""


@pytest.mark.parametrize("url", ["postgresql://127.0.0.1:1/nothing", "postgresql://[no-such-host/db"])
def test_a_database_out_of_reach_is_one_line(url: str) -> None:
    """Through the installed `outfitter` command, as an operator meets it."""
    command = Path(sys.executable).parent / "outfitter"
    for args in (["company", "list"], ["db", "upgrade"]):
        done = subprocess.run(
            [str(command), *args],
            env={**os.environ, "OUTFITTER_DATABASE_URL": url},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("error: the database cannot be reached: ")
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


# `outfitter token create --name`: what a token is for, shown by `token list` with its last use.


def test_a_named_token_is_listed_with_its_last_use(client: TestClient) -> None:
    company = json.loads(run("company", "create", "Named Ltd", "--json")[1])
    code, out, _ = run("token", "create", company["id"], "--name", "  HR sync  ", "--json")
    assert code == 0
    token = json.loads(out)
    assert token["name"] == "HR sync"
    code, text, _ = run("token", "create", company["id"], "--name", "Laptop script")
    assert code == 0 and "'Laptop script' (read write): otf_" in text

    listed = json.loads(run("token", "list", company["id"], "--json")[1])["tokens"]
    assert [entry["name"] for entry in listed] == ["HR sync", "Laptop script"]
    assert listed[0]["last_used_at"] is None
    headers = {"Authorization": f"Bearer {token['token']}"}
    created = client.post("/api/v2/client/departments", json={"name": "Finance"}, headers=headers)
    assert created.status_code == 201, created.text
    code, text, _ = run("token", "list", company["id"])
    first, second = text.splitlines()
    assert first.startswith(f"{token['id']}  'HR sync'  company {company['id']}  read write")
    assert "last used never" not in first and "last used 20" in first
    assert "'Laptop script'" in second and "last used never" in second


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("   ", "--name: Give at least one visible character"),
        ("two\nlines", "--name: Give it on one line"),
        ("n" * 201, "--name has 201 characters; at most 200"),
    ],
)
def test_a_name_no_one_could_read_is_refused_in_one_line(name: str, message: str) -> None:
    company = json.loads(run("company", "create", "Careful Ltd", "--json")[1])
    code, out, err = run("token", "create", company["id"], "--name", name)
    assert code == 1 and out == ""
    assert err.strip().startswith("error: ") and message in err
    assert json.loads(run("token", "list", company["id"], "--json")[1])["tokens"] == []


def test_demo_reuses_its_token_and_mints_none_when_the_port_is_taken(
    client: TestClient, data_home: Path, engine: Engine
) -> None:
    def demo_tokens() -> list[dict[str, Any]]:
        tokens: list[dict[str, Any]] = json.loads(run("token", "list", "--json")[1])["tokens"]
        return tokens

    first = run("demo")[1]
    again = run("demo")[1]
    token = next(line for line in first.splitlines() if line.startswith("Token:")).split()[1]
    assert f"Token: {token} (id " in again and "the same as last time" in again
    [kept] = demo_tokens()
    assert kept["name"] == "Demo token" and kept["live"]
    assert (data_home / "demo-tokens.json").stat().st_mode & 0o777 == 0o600
    assert "Data:  " in first  # where the data lives

    run("token", "revoke", kept["id"])  # a revoked one is not printed again: a new one is made
    renewed = run("demo")[1]
    assert token not in renewed and len(demo_tokens()) == 2

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        code, _, err = run("demo", "--port", str(taken.getsockname()[1]))
    assert code == 1 and "is taken" in err and "No token was made" in err
    assert len(demo_tokens()) == 2


@pytest.mark.one_database
def test_demo_reset_starts_the_embedded_database_afresh(
    monkeypatch: pytest.MonkeyPatch, data_home: Path, tmp_path: Path
) -> None:
    database = tmp_path / "demo.db"
    monkeypatch.setenv("OUTFITTER_DATABASE_URL", f"sqlite:///{database}")
    get_settings.cache_clear()
    before = run("demo")[1]
    company = json.loads(run("company", "create", "Leftover Ltd", "--json")[1])
    code, out, err = run("demo", "--reset")
    assert code == 0, err
    assert out.startswith(f"deleted {database}\n") and "the same as last time" not in out
    names = [each["name"] for each in json.loads(run("company", "list", "--json")[1])["companies"]]
    assert names == ["Demo Company"] and company["name"] not in names
    assert before.split("Token: ")[1].split()[0] not in out
    monkeypatch.setenv("OUTFITTER_DATABASE_URL", "postgresql://127.0.0.1:1/nothing")
    get_settings.cache_clear()
    code, _, err = run("demo", "--reset")
    assert code == 1 and "deletes a SQLite file only" in err
