"""Benchmark: throughput of the equipment API's hot reads through a real `outfitter serve`, with wrk.

Starts `<root>/.venv/bin/outfitter serve --workers N` on a free port of 127.0.0.1 against the perf
database built by /work/shared/perf/load_data.py (its state file gives the database URL, the token of
the company with 100,000 devices and a sample device of it), waits for /healthz, checks that every
case answers 200, warms up, then runs `wrk -t1 -cC -dDs --latency` once per case and prints
requests/s, p50 and p99 latency and wrk's error count, one row per case:

    a  first page of GET /api/v2/client/equipment
    b  filtered page: ?type=Laptop/Workstation&status=Assigned
    c  last page
    d  single retrieve: GET /api/v2/client/equipment/{id}

The server runs with OUTFITTER_RATE_LIMIT=off; its whole process
group is stopped at the end, also on errors and Ctrl-C. Needs wrk (apt-get install wrk) and the data.

    .venv/bin/python bench/http_throughput.py [--root .] [--state /tmp/perf/state.json]
        [--workers 2] [--conc 8] [--duration 10] [--warmup 2] [--cases a,b,c,d]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NoReturn

import httpx
from harness import free_port

EQUIPMENT = "/api/v2/client/equipment"
CASES = {
    "a": "first page",
    "b": "type=Laptop/Workstation&status=Assigned",
    "c": "last page",
    "d": "single retrieve",
}
UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}


@dataclass
class WrkResult:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int  # non-2xx/3xx answers plus socket errors (connect, read, write, timeout)


def fail(message: str) -> NoReturn:
    print(message, file=sys.stderr)
    sys.exit(2)


def git_revision(root: Path) -> str:
    """Short commit of `root`, "+dirty" when its tracked files differ from it; "?" outside git."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "diff", "--quiet", "HEAD"], check=False).returncode
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return commit + ("+dirty" if dirty else "")


@contextmanager
def outfitter_serve(root: Path, database_url: str, workers: int) -> Iterator[str]:
    """Run `outfitter serve` from `root` on a free port until /healthz answers; yields its base URL.

    The server gets a session (process group) of its own, which is terminated on the way out."""
    port = free_port()
    env = {
        **os.environ,
        "OUTFITTER_DATABASE_URL": database_url,
        "OUTFITTER_RATE_LIMIT": "off",
    }
    argv = [str(root / ".venv" / "bin" / "outfitter"), "serve", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--workers", str(workers)]
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(
            argv, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            base_url = f"http://127.0.0.1:{port}"
            wait_healthy(server, base_url, log)
            yield base_url
        finally:
            stop(server)


def wait_healthy(server: subprocess.Popen[bytes], base_url: str, log: IO[bytes], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            break
        try:
            if httpx.get(f"{base_url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    log.seek(0)
    tail = log.read().decode(errors="replace")[-3000:]
    state = (
        f"exited with {server.returncode}" if server.poll() is not None else f"not healthy in {seconds:.0f} s"
    )
    raise RuntimeError(f"outfitter serve {state}; its output ends with:\n{tail}")


def stop(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group (supervisor and workers), SIGKILL whatever outlives 20 s."""
    with suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    with suppress(subprocess.TimeoutExpired):
        server.wait(timeout=20)
    with suppress(ProcessLookupError):  # workers left behind by their supervisor, if any
        os.killpg(server.pid, signal.SIGKILL)
    server.wait()


def case_paths(client: httpx.Client, equipment_id: str) -> dict[str, str]:
    """The path of every case; checks that each answers 200 (the token and the data are right)."""
    first = client.get(EQUIPMENT)
    if first.status_code != 200:
        raise RuntimeError(f"GET {EQUIPMENT} answered {first.status_code}: {first.text[:300]}")
    paths = {
        "a": EQUIPMENT,
        "b": f"{EQUIPMENT}?type=Laptop/Workstation&status=Assigned",
        "c": f"{EQUIPMENT}?page={first.json()['last_page']}",
        "d": f"{EQUIPMENT}/{equipment_id}",
    }
    for path in paths.values():
        response = client.get(path)
        if response.status_code != 200:
            raise RuntimeError(f"GET {path} answered {response.status_code}: {response.text[:300]}")
    return paths


def to_ms(value: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", value)
    if not match:
        raise ValueError(f"unexpected wrk latency {value!r}")
    return float(match[1]) * UNITS_MS[match[2]]


def parse_wrk(output: str) -> WrkResult:
    def number(pattern: str) -> str:
        match = re.search(pattern, output, re.MULTILINE)
        if not match:
            raise ValueError(f"no {pattern!r} in wrk's output:\n{output}")
        return match[1]

    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output)
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    return WrkResult(
        rps=float(number(r"^Requests/sec:\s+([\d.]+)")),
        p50_ms=to_ms(number(r"^\s+50%\s+(\S+)")),
        p99_ms=to_ms(number(r"^\s+99%\s+(\S+)")),
        requests=int(number(r"^\s+(\d+) requests in ")),
        errors=(sum(int(n) for n in socket_errors.groups()) if socket_errors else 0)
        + (int(non_2xx[1]) if non_2xx else 0),
    )


def wrk(url: str, token: str, conc: int, duration: int) -> WrkResult:
    argv = ["wrk", "-t1", f"-c{conc}", f"-d{duration}s", "--timeout", "10s", "--latency"]
    argv += ["-H", f"Authorization: Bearer {token}", url]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"wrk exited with {done.returncode}: {done.stderr.strip() or done.stdout.strip()}")
    return parse_wrk(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--state", type=Path, default=Path("/tmp/perf/state.json"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--conc", type=int, default=8)
    parser.add_argument("--duration", type=int, default=10, help="seconds of wrk per case")
    parser.add_argument("--warmup", type=int, default=2, help="seconds of wrk per case before measuring")
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()

    if shutil.which("wrk") is None:
        fail("wrk is not installed (apt-get install wrk); it generates the load here.")
    root = args.root.resolve()
    if not (root / ".venv" / "bin" / "outfitter").exists():
        fail(f"{root}/.venv/bin/outfitter not found: build the venv of --root first.")
    if not args.state.exists():
        fail(f"{args.state} not found: build the perf database with /work/shared/perf/load_data.py first.")
    cases = args.cases.split(",")
    if unknown := [case for case in cases if case not in CASES]:
        fail(f"unknown case(s) {unknown}; choose among {','.join(CASES)}")
    state = json.loads(args.state.read_text())
    token, equipment_id = state["big"]["token"], state["big"]["equipment_id"]
    # so that a `kill` of this script also stops the server (through the finally blocks)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    with outfitter_serve(root, state["database_url"], args.workers) as base_url:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base_url, headers=headers, timeout=60) as client:
            paths = case_paths(client, equipment_id)
        for case in cases:  # warm-up: connection pools, caches, PostgreSQL's buffers
            wrk(base_url + paths[case], token, args.conc, args.warmup)
        print(
            f"outfitter serve --workers {args.workers} from {root} ({git_revision(root)}), "
            f"database {state['database_url'].rsplit('/', 1)[-1]}, "
            f"company of {state['big']['rows']:,} devices; "
            f"wrk -t1 -c{args.conc} -d{args.duration}s",
            flush=True,
        )
        print(f"{'case':<46}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'requests':>10}{'errors':>8}")
        for case in cases:
            result = wrk(base_url + paths[case], token, args.conc, args.duration)
            print(
                f"{case + ' ' + CASES[case]:<46}{result.rps:>10.1f}{result.p50_ms:>10.1f}"
                f"{result.p99_ms:>10.1f}{result.requests:>10}{result.errors:>8}",
                flush=True,
            )


if __name__ == "__main__":
    main()
