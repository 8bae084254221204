"""`outfitter token create --name`: what a token is for, shown by `token list` with its last use."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from typer.testing import CliRunner

from outfitter.cli import app
from outfitter.config import get_settings

runner = CliRunner()


@pytest.fixture(autouse=True)
def _database(monkeypatch: pytest.MonkeyPatch, database_url: str, engine: Engine) -> Iterator[None]:
    monkeypatch.setenv("OUTFITTER_DATABASE_URL", database_url)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


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
