"""`outfitter import`: a company's employees or equipment from a CSV file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from outfitter.cli.common import JsonFlag, app, emit, fail, parse_id, progress_bar, read_limited, unit_of_work

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from outfitter.tenants.actor import Actor

import_app = typer.Typer(
    help="Create a company's employees or equipment from a CSV file.", no_args_is_help=True
)
app.add_typer(import_app, name="import")
DryRunFlag = Annotated[bool, typer.Option("--dry-run", help="Check every row and write nothing.")]


def _rows_in(data: bytes) -> int:
    """The rows a CSV file holds, estimated from its lines: every line but the header, the last
    one counted whether or not a line break ends it."""
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    return max(lines - 1, 0)


def _import_csv(company_id: str, file: Path, what: str, run: Any, dry_run: bool, as_json: bool) -> None:
    """Read FILE, import it for the company in one transaction (all or nothing), print the result;
    each row error on a line of its own, `rows.<line>.<column>: message`, then exit 1."""
    from outfitter.core.errors import DomainError
    from outfitter.core.schemas import counted
    from outfitter.csvio.reader import MAX_IMPORT_BYTES
    from outfitter.db.tenancy import bind_company
    from outfitter.models import Company
    from outfitter.outbox import SYSTEM_ACTOR
    from outfitter.tenants.actor import Actor

    company = parse_id(company_id, "COMPANY_ID")
    data = read_limited(file, MAX_IMPORT_BYTES)
    try:
        with unit_of_work() as session, progress_bar() as bar:
            found = session.get(Company, company)
            if found is None:
                fail(f"no company with id {company}")
            bind_company(session, company)
            actor = Actor(found.id, found.name, frozenset({"read", "write"}), SYSTEM_ACTOR)
            task = bar.add_task(f"Checking {file.name}", total=_rows_in(data) or None)
            result = run(session, actor, data, lambda rows: bar.advance(task, rows))
            # Ends at its total: the rows read (blank lines or a line break in a cell skew the estimate).
            done = result["count"]
            bar.update(task, description=f"Writing {done} {what}", total=done, completed=done)
    except DomainError as exc:
        if not exc.errors:
            fail(exc.message)
        problems = counted(sum(len(messages) for messages in exc.errors.values()), "problem", "problems")
        typer.echo(f"error: nothing was imported: {problems} in {file.name}:", err=True)
        for path, messages in exc.errors.items():
            for message in messages:
                typer.echo(f"{path}: {message}", err=True)
        raise typer.Exit(code=1) from None
    verb = "would create" if dry_run else "created"
    payload = {**result, "ids": [str(each) for each in result["ids"]]}
    emit(
        as_json,
        payload,
        f"{verb} {result['count']} {what}" + (" (dry run: nothing written)" if dry_run else ""),
    )


@import_app.command("employees")
def import_employees(
    company_id: str, file: Path, dry_run: DryRunFlag = False, as_json: JsonFlag = False
) -> None:
    """Create employees from a CSV file (the columns of POST /client/employees), all or nothing."""
    from outfitter.people.imports import import_employees as run_import

    def run(session: Session, actor: Actor, data: bytes, progress: Any) -> dict[str, Any]:
        return run_import(session, actor, data, dry_run=dry_run, progress=progress)

    _import_csv(company_id, file, "employees", run, dry_run, as_json)


@import_app.command("equipment")
def import_equipment(
    company_id: str, file: Path, dry_run: DryRunFlag = False, as_json: JsonFlag = False
) -> None:
    """Register equipment from a CSV file (the columns of POST /client/equipment), all or nothing."""
    from outfitter.equipment.imports import import_equipment as run_import

    def run(session: Session, actor: Actor, data: bytes, progress: Any) -> dict[str, Any]:
        return run_import(session, actor, data, dry_run=dry_run, progress=progress)

    _import_csv(company_id, file, "equipment", run, dry_run, as_json)
