"""How long `outfitter` commands take from start to exit, each run in a fresh process.

Runs every command's `--help`, then a few real, cheap commands against a scratch SQLite
database (migrated and given a company and a token first, outside the timing): `token list`,
`company list`, `fees show`, `orders list`, `wallet show`. Each is run RUNS times, alternated
(every command once, then again) so a burst of load on the machine falls on all of them; it
prints the median and p95 wall time per command, and the machine's load average before and after.

    .venv/bin/python bench/cli_start.py [--runs 11] [--only help|real]

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
    options = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "OUTFITTER_DATABASE_URL": f"sqlite:///{scratch}/bench.db"}
        env.pop("OUTFITTER_LOG_FORMAT", None)
        run(["db", "upgrade"], env)
        _, out = run(["company", "create", "Bench Ltd", "--json"], env)
        company = json.loads(out)["id"]
        run(["token", "create", company, "--name", "bench", "--scope", "read"], env)

        commands: list[list[str]] = []
        if options.only != "real":
            commands += [[*command, "--help"] for command in HELP_COMMANDS if exists(command, env)]
        if options.only != "help":
            real = [
                ["token", "list"],
                ["company", "list"],
                ["fees", "show"],
                ["orders", "list"],
                ["wallet", "show", company],
            ]
            commands += [command for command in real if exists(command, env)]

        times: dict[str, list[float]] = {" ".join(command): [] for command in commands}
        load_before = os.getloadavg()[0]
        for _ in range(options.runs):
            for command in commands:
                elapsed, _ = run(command, env)
                times[" ".join(command)].append(elapsed)
        load_after = os.getloadavg()[0]

    width = max(len(name) for name in times) + len("outfitter ")
    print(f"{options.runs} runs each; load average {load_before:.1f} before, {load_after:.1f} after")
    print(f"{'command':<{width}}  median s   p95 s")
    for name, values in times.items():
        label = f"outfitter {name}".strip()
        print(f"{label:<{width}}  {statistics.median(values):8.3f}  {percentile(values, 0.95):6.3f}")


if __name__ == "__main__":
    main()
