"""Running the operator CLI in-process against the suite's database, as the CLI tests do."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from outfitter.cli import app
from outfitter.config import get_settings

runner = CliRunner()


@pytest.fixture
def cli_database(monkeypatch: pytest.MonkeyPatch, database_url: str, engine: Engine) -> Iterator[None]:
    """The CLI reads its database from OUTFITTER_DATABASE_URL: point it at the suite's, migrated."""
    monkeypatch.setenv("OUTFITTER_DATABASE_URL", database_url)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def run(*args: str) -> tuple[int, str, str]:
    """`outfitter ARGS...`: its exit code, standard output and standard error."""
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr
