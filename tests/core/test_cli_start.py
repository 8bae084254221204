"""The CLI starts fast because a command imports what it needs when it runs: importing the CLI, and
every command's `--help`, load none of the heavy libraries (bench/cli_start.py times them)."""

from __future__ import annotations

import json
import subprocess
import sys

import typer.main

from outfitter.cli import app

HEAVY = ["alembic", "fastapi", "psycopg", "pydantic", "pydantic_settings", "redis", "sqlalchemy", "starlette"]
LOADED = f"print(json.dumps(sorted({{name.split('.')[0] for name in sys.modules}} & set({HEAVY!r}))))"


def heavy_loaded(code: str, *arguments: str) -> list[str]:
    """The heavy libraries a fresh interpreter holds after running `code` (which prints them)."""
    done = subprocess.run(
        [sys.executable, "-c", f"import json, sys\n{code}\n{LOADED}", *arguments],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


def every_command() -> list[list[str]]:
    group = typer.main.get_group(app)
    found: list[list[str]] = [[]]
    for name, command in group.commands.items():
        found.append([name])
        found.extend([name, sub] for sub in getattr(command, "commands", {}))
    return found


def test_importing_the_cli_loads_no_heavy_library() -> None:
    assert heavy_loaded("import outfitter.cli") == []


def test_no_command_help_loads_a_heavy_library() -> None:
    commands = every_command()
    assert ["orders", "list"] in commands and ["wallet", "show"] in commands and len(commands) > 20
    # Every `--help` in turn in one interpreter (one each would cost seconds on a busy machine):
    # stricter, as nothing one of them loads is unloaded for the next.
    code = (
        "from outfitter.cli import main\n"
        "for command in json.loads(sys.argv[1]):\n"
        "    sys.argv = ['outfitter', *command, '--help']\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit as exit:\n"
        "        assert exit.code in (0, None), command\n"
    )
    assert heavy_loaded(code, json.dumps(commands)) == []
