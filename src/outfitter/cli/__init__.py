"""The operator CLI. Every command exits non-zero with a one-line error on bad input;
`--json` prints one JSON object.

`cli.common` holds the `app` and the helpers every command uses; the command modules, one per
group, register their commands on `app` as they are imported here. Only typer is imported at
the top of these modules: a command imports what it needs (SQLAlchemy, the settings, the domains)
when it runs, so that `--help` and a cheap command start fast (`tests/test_cli_start.py`)."""

from __future__ import annotations

import sys

import typer

# Not sorted: `outfitter --help` lists commands, then groups, in the order they were registered.
from outfitter.cli import (  # noqa: F401
    catalog,
    imports,
    operators,
    orders,
    payments,
    secrets,
    setup,
    status,
    tenants,
    users,
)
from outfitter.cli.common import app

__all__ = ["app", "main"]


def main() -> None:
    """The `outfitter` command: an argument that is not UTF-8, a database out of reach or a value it
    refuses is one line too, whatever the command."""

    for position, argument in enumerate(sys.argv[1:], start=1):
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:  # bytes the shell passed that are not UTF-8 (kept as surrogates)
            typer.echo(
                f"error: argument {position} is not UTF-8 text: give names and codes as UTF-8", err=True
            )
            raise SystemExit(1) from None
    try:
        app()
    except Exception as exc:
        if "sqlalchemy" not in sys.modules:  # no command got as far as the database
            raise
        from sqlalchemy.exc import DataError, InterfaceError, OperationalError

        if isinstance(exc, OperationalError | InterfaceError):
            typer.echo(f"error: the database cannot be reached: {str(exc.orig).splitlines()[0]}", err=True)
            raise SystemExit(1) from None
        if isinstance(exc, DataError):  # a value a command did not bound itself: nothing was written
            typer.echo(
                f"error: the database refused a value, nothing was changed: {str(exc.orig).splitlines()[0]}",
                err=True,
            )
            raise SystemExit(1) from None
        raise
