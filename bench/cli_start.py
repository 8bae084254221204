"""How long `outfitter` commands take from start to exit, each run in a fresh process.

Runs every command's `--help`, then a few real, cheap commands against a scratch SQLite
database (migrated and given a company and a token first, outside the timing): `token list`,
`company list`, `fees show`, `orders list`, `wallet show`. Each is run RUNS times, alternated
(every command once, then again) so a burst of load on the machine falls on all of them; it
prints the median and p95 wall time per command, and the machine's load average before and after.

    .venv/bin/python bench/cli_start.py [--runs 11] [--only help|real] [--commands N]
        [--baseline OTHER_CHECKOUT/src]

`--baseline` runs every command a second time from another checkout's sources (a `git worktree` of
an earlier commit: its `src` put first on PYTHONPATH), alternated with this one, so that both
columns meet the same load; commands that release lacks are left out. `--commands N` keeps the
first N `--help` commands.

The figures are in the notes of issue 42.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUTFITTER = str(Path(sys.executable).with_name("outfitter"))

HELP_COMMANDS = [
    [],
    ["db"],
    ["db", "upgrade"],
    ["serve"],
    ["demo"],
    ["worker"],
    ["company", "create"],
    ["company", "list"],
    ["token", "list"],
    ["token", "create"],
    ["catalog", "import"],
    ["import", "employees"],
    ["wallet", "credit"],
    ["wallet", "show"],
    ["fees", "show"],
    ["payments", "anomalies"],
    ["orders", "list"],
    ["orders", "advance"],
    ["user", "invite"],
]


def run(arguments: list[str], env: dict[str, str], check: bool = True) -> tuple[float, str]:
    """Wall time of one `outfitter ARGUMENTS` in a fresh process, and its output."""
    started = time.perf_counter()
    done = subprocess.run([OUTFITTER, *arguments], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if check and done.returncode != 0:
        raise SystemExit(f"outfitter {' '.join(arguments)} failed: {done.stderr.strip()}")
    return elapsed, done.stdout


def exists(arguments: list[str], env: dict[str, str]) -> bool:
    """Whether this release has the command (the script also measures releases before it)."""
    done = subprocess.run([OUTFITTER, *arguments, "--help"], env=env, capture_output=True)
    return done.returncode == 0


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--only", choices=["help", "real"])
    parser.add_argument("--commands", type=int, default=len(HELP_COMMANDS))
    parser.add_argument("--baseline", help="another checkout's src folder, timed alternately")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "OUTFITTER_DATABASE_URL": f"sqlite:///{scratch}/bench.db"}
        env.pop("OUTFITTER_LOG_FORMAT", None)
        sides = {"this": env}
        if options.baseline:
            sides["baseline"] = {**env, "PYTHONPATH": options.baseline}
        run(["db", "upgrade"], env)
        _, out = run(["company", "create", "Bench Ltd", "--json"], env)
        company = json.loads(out)["id"]
        run(["token", "create", company, "--name", "bench", "--scope", "read"], env)

        commands: list[list[str]] = []
        if options.only != "real":
            commands += [
                [*command, "--help"]
                for command in HELP_COMMANDS[: options.commands]
                if all(exists(command, side) for side in sides.values())
            ]
        if options.only != "help":
            real = [
                ["token", "list"],
                ["company", "list"],
                ["fees", "show"],
                ["orders", "list"],
                ["wallet", "show", company],
            ]
            commands += [command for command in real if all(exists(command, side) for side in sides.values())]

        times: dict[tuple[str, str], list[float]] = {
            (side, " ".join(command)): [] for side in sides for command in commands
        }
        load_before = os.getloadavg()[0]
        for _ in range(options.runs):
            for command in commands:
                for side, side_env in sides.items():
                    elapsed, _ = run(command, side_env)
                    times[side, " ".join(command)].append(elapsed)
        load_after = os.getloadavg()[0]

    width = max(len(" ".join(command)) for command in commands) + len("outfitter ")
    print(f"{options.runs} runs each; load average {load_before:.1f} before, {load_after:.1f} after")
    print(f"{'command':<{width}}" + "".join(f"  {side + ' median s':>18}  {'p95 s':>6}" for side in sides))
    for command in commands:
        name = " ".join(command)
        row = f"{'outfitter ' + name:<{width}}"
        for side in sides:
            values = times[side, name]
            row += f"  {statistics.median(values):18.3f}  {percentile(values, 0.95):6.3f}"
        print(row)


if __name__ == "__main__":
    main()
