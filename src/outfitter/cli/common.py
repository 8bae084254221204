"""What every command of the operator CLI uses: the `app` they register on, their output and
error helpers, and the unit of work a command runs in."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

if TYPE_CHECKING:  # imported by the commands that use them, when they run
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session

app = typer.Typer(
    help="Operate Outfitter: database, companies, tokens, catalog, wallets.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals can hold tokens
)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=1)


def emit(as_json: bool, payload: dict[str, Any], text: str) -> None:
    typer.echo(json.dumps(payload, default=str) if as_json else text)


def read_limited(file: Path, limit: int) -> bytes:
    """FILE's bytes, at most `limit` of them (else a one-line error): counted as they are read,
    so a device or a pipe (/dev/zero, a FIFO that never ends) cannot fill the memory."""
    try:
        with file.open("rb") as stream:
            data = stream.read(limit + 1)
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror}")
    if len(data) > limit:
        fail(f"{file} is larger than the limit of {limit:,} bytes")
    return data


def parse_id(value: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        fail(f"{what} must be a UUID, got {value!r}")


def iso_or_none(value: datetime | None) -> str | None:
    """A time as the API writes it (ISO 8601 UTC, microseconds, `Z`), or None."""
    from outfitter.core.timestamps import format_timestamp

    return format_timestamp(value) if value else None


@contextmanager
def unit_of_work() -> Iterator[Session]:
    """One committed transaction against the configured database, which must be migrated."""
    from outfitter.config import get_settings
    from outfitter.db.session import make_engine
    from outfitter.db.tenancy import TenantSession, across_companies

    engine = make_engine(get_settings().database_url)
    try:
        require_current_schema(engine)
        # Operators act for any company; a command working for one binds the session to it.
        with across_companies(TenantSession(engine, expire_on_commit=False)) as session, session.begin():
            yield session
    finally:
        engine.dispose()


def progress_bar() -> Any:
    """A progress bar on stderr (stdout stays for the answer, `--json` included), gone when done;
    none when stderr is no terminal (a script's log kept an empty line of it)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return Progress(*columns, console=console, transient=True, disable=not console.is_terminal)


@app.callback()
def check_settings() -> None:
    """Every OUTFITTER_* setting is checked before any command runs: one line per bad setting, not
    a traceback (and not one in every worker of `serve`). Not for a command's `--help`, which
    reads no setting."""
    if "--help" in sys.argv[1:]:  # the group's arguments are not parsed yet when this runs
        return
    from pydantic import ValidationError

    from outfitter.config import get_settings, setting_errors
    from outfitter.config.database_url import DataDirectoryUnusable

    try:
        get_settings()
    except ValidationError as exc:
        for line in setting_errors(exc):
            typer.echo(f"error: invalid configuration: {line}", err=True)
        raise typer.Exit(code=1) from None
    except DataDirectoryUnusable as exc:
        fail(str(exc))


def require_current_schema(engine: Engine) -> None:
    """Exit with one line naming the database unless its schema is at this release's revision."""
    from outfitter.db.schema_version import at_head

    if at_head(engine):
        return
    from outfitter.migrations import schema_problem

    problem = schema_problem(engine)
    if problem is not None:
        fail(problem)


def upgrade_schema(engine: Engine) -> frozenset[str]:
    """Migrate to this release's newest revision and answer the revisions it was at; one line if a
    newer release migrated it, or if it holds our tables without a revision."""
    from outfitter.migrations import (
        SchemaAhead,
        SchemaUnversioned,
        named_database,
        schema_ahead_message,
        upgrade,
    )

    try:
        return upgrade(engine)
    except SchemaAhead as exc:
        fail(schema_ahead_message(engine, exc.revisions))
    except SchemaUnversioned as exc:
        named = ", ".join(exc.tables[:3]) + (", ..." if len(exc.tables) > 3 else "")
        fail(
            f"the database {named_database(engine)} holds {len(exc.tables)} of Outfitter's tables ({named}) "
            "but no schema revision (its alembic_version table is missing or empty), so it cannot be "
            "migrated: restore the backup with its alembic_version table, or start from an empty database"
        )
