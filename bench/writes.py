"""Outfitter's two commonest writes beside the bare reference (bench/writes_reference.py).

    POST /api/v2/client/employees    employee + `employee.created` event + outbox rows
    POST /api/v2/client/equipment    External device, Unassigned + `equipment_added` history row +
                                     `equipment.added` event + outbox rows

Modelled on ../shared/perf/measure.py. It makes a scratch PostgreSQL database (dropped first if
it exists), migrates it with `outfitter db upgrade`, makes two companies with the CLI (one per
server, so each one's rows can be counted apart), a read+write token each, and a webhook endpoint
subscribed to every event for each (through Outfitter's own API), so every write also queues an
outbox row. It starts `outfitter serve --workers N` (embedded worker off: the outbox rows stay
pending; rate limit off) and the reference under uvicorn with N workers, checks that both answer
one request of each case with the same JSON fields, then drives each with wrk (a Lua script
makes every body unique: emails and serial numbers), `rounds` rounds of `duration` seconds per
case, the order alternating A B / B A. After every run it counts the rows each server wrote per
table (its company's) and prints them side by side with the rows per record: they must match.

    .venv/bin/python bench/writes.py [--rounds 3] [--duration 10] [--conc 8] [--workers 2]
                                     [--cases employees,equipment] [--profile /tmp/writes-profile]
                                     [--profile-case employees|equipment]

Needs wrk, and asyncpg, orjson, starlette and uvicorn in the venv (`pip install orjson`);
`--profile DIR` also needs py-spy: it records Outfitter's workers during one more run of
`--profile-case` (employees by default) and prints the functions where the time goes. Ports
8211 (Outfitter) and 8212 (reference), only 127.0.0.1; every run and wait is bounded.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import psycopg

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = ROOT / ".venv" / "bin"
OTF_PORT, REF_PORT = 8211, 8212
TICK = os.sysconf("SC_CLK_TCK")
TABLES = ("employees", "equipment", "equipment_history", "events", "webhook_deliveries")
CASES = {
    "employees": {
        "path": "/api/v2/client/employees",
        "record_table": "employees",
        "lua_body": '\'{"first_name":"Ada","last_name":"Bench","email":"\' .. key .. '
        '\'@bench.example.com","country_id":"NG","phone":"+234 801 234 5678","address":"1 Marina, Lagos",'
        '"job_title":"Engineer","employment_type":"Full-time"}\'',
    },
    "equipment": {
        "path": "/api/v2/client/equipment",
        "record_table": "equipment",
        "lua_body": '\'{"title":"MacBook Pro 14","make":"Apple","model":"MacBook Pro 14 M3","year":"2023",'
        '"type":"Laptop","state":"Brand_New","serial_number":"SN-\' .. key .. '
        '\'","specs":{"memory":"16GB","storage":"512GB"},"status":"Unassigned"}\'',
    },
}

# wrk: every request a unique body (prefix from the command line, then a counter); one JSON line
# with the run's figures at the end (latencies in microseconds), as ../shared/perf/report.lua.
LUA = """
local prefix = "x"
local n = 0
function init(args) prefix = args[1] end
request = function()
  n = n + 1
  local key = prefix .. "-" .. n
  return wrk.format("POST", nil, nil, BODY)
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"err_connect":%d,"err_read":%d,"err_write":%d,' ..
    '"err_status":%d,"err_timeout":%d,"lat_p50_us":%d,"lat_p99_us":%d}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


# --- set-up -------------------------------------------------------------------------------------


def cli(env: dict[str, str], *args: str) -> dict:
    out = subprocess.run(
        [str(BIN / "outfitter"), *args, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return json.loads(out)


def http(port: int, method: str, path: str, token: str, body: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def prepare_database(admin_url: str, name: str) -> str:
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    return admin_url.rsplit("/", 1)[0] + f"/{name}"


# --- processes (as ../shared/perf/measure.py) ---------------------------------------------------


def _stat(pid: int) -> tuple[int, int] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[11]) + int(fields[12])


def descendants(root: int) -> list[int]:
    parents = {int(e): s[0] for e in os.listdir("/proc") if e.isdigit() and (s := _stat(int(e)))}
    found, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, ppid in parents.items() if ppid in frontier]
        found += frontier
    return found


def cpu_ticks(pids: list[int]) -> dict[int, int]:
    return {pid: s[1] for pid in pids if (s := _stat(pid))}


def pg_backends(database: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if cmd.startswith(b"postgres: ") and f" {database} ".encode() in cmd:
                pids.append(int(entry))
    return pids


class Server:
    def __init__(self, name: str, argv: list[str], env: dict[str, str], port: int, log: Path) -> None:
        self.name, self.port = name, port
        self.log = log.open("ab")
        self.process = subprocess.Popen(
            argv,
            env={**os.environ, **env},
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, token: str) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.process.returncode} (log: {self.log.name})"
                )
            try:
                http(self.port, "POST", "/api/v2/client/employees", token, {})
                return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"{self.name} did not become ready")

    def pids(self) -> list[int]:
        return descendants(self.process.pid)

    def stop(self) -> None:
        children = self.pids()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for pid in children[1:]:  # our own workers, if any outlived their supervisor
            if _stat(pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        self.log.close()


# --- load and rows ------------------------------------------------------------------------------


def lua_script(case: str, directory: Path) -> Path:
    path = directory / f"{case}.lua"
    path.write_text(LUA.replace("BODY", CASES[case]["lua_body"]))
    return path


def wrk(port: int, case: str, token: str, conc: int, duration: int, prefix: str, scripts: Path) -> dict:
    argv = [
        "wrk",
        "-t1",
        f"-c{conc}",
        f"-d{duration}s",
        "--timeout",
        "10s",
        "-s",
        str(lua_script(case, scripts)),
        "-H",
        f"Authorization: Bearer {token}",
        "-H",
        "Content-Type: application/json",
        f"http://127.0.0.1:{port}{CASES[case]['path']}",
        "--",
        prefix,
    ]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60).stdout
    line = next(line for line in out.splitlines() if line.startswith("WRKJSON "))
    return json.loads(line[len("WRKJSON ") :])


def count_rows(database_url: str, company: str) -> dict[str, int]:
    """The company's rows per table, in one statement (one snapshot: a request's rows all or none)."""
    counts = ", ".join(f"(SELECT count(*) FROM {table} WHERE company_id = %(company)s)" for table in TABLES)
    with psycopg.connect(database_url) as conn:
        row = conn.execute(f"SELECT {counts}", {"company": company}).fetchone()
    assert row is not None
    return dict(zip(TABLES, row, strict=True))


def measure_one(
    server: Server, case: str, state: dict, conc: int, duration: int, prefix: str, scripts: Path
) -> dict:
    side = state[server.name]
    before = count_rows(state["database_url"], side["company"])
    app_pids = server.pids()
    pg_before, app_before = cpu_ticks(pg_backends(state["database"])), cpu_ticks(app_pids)
    result = wrk(server.port, case, side["token"], conc, duration, prefix, scripts)
    app_after, pg_after = cpu_ticks(app_pids), cpu_ticks(pg_backends(state["database"]))
    time.sleep(1)  # requests still in flight when wrk stopped commit before the count (their rows count)
    after = count_rows(state["database_url"], side["company"])
    n = max(1, result["requests"])
    seconds = result["duration_us"] / 1e6
    app_cpu = sum(ticks - app_before.get(pid, 0) for pid, ticks in app_after.items())
    pg_cpu = sum(ticks - pg_before.get(pid, 0) for pid, ticks in pg_after.items())
    return {
        **result,
        "rps": result["requests"] / seconds,
        "errors": sum(
            result[k] for k in ("err_connect", "err_read", "err_write", "err_status", "err_timeout")
        ),
        "app_cpu_ms": app_cpu / TICK * 1000 / n,
        "pg_cpu_ms": pg_cpu / TICK * 1000 / n,
        "rows": {table: after[table] - before[table] for table in TABLES},
    }


def rows_per_record(rows: dict[str, int], case: str) -> dict[str, float]:
    records = max(1, rows[CASES[case]["record_table"]])
    return {table: round(count / records, 3) for table, count in rows.items()}


# --- the profile --------------------------------------------------------------------------------


def profile(
    server: Server, state: dict, case: str, conc: int, duration: int, directory: Path, scripts: Path
) -> str:
    """py-spy on Outfitter's workers during a run of `case`, sampling the thread that holds the GIL:
    self time and inclusive time of the top frames (share of samples)."""
    raw = directory / f"outfitter-{case}.txt"
    spy = subprocess.Popen(
        [
            str(BIN / "py-spy"),
            "record",
            "--pid",
            str(server.process.pid),
            "--subprocesses",
            "-d",
            str(duration),
            "-r",
            "200",
            "--gil",  # only the thread holding the GIL: where the Python CPU goes, not the waits
            "-f",
            "raw",
            "-o",
            str(raw),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1)
    wrk(server.port, case, state["outfitter"]["token"], conc, duration, "profile", scripts)
    spy.wait(timeout=duration + 60)
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [f for f in stack.split(";") if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        samples = int(count)
        total += samples
        own[_frame(frames[-1])] += samples
        for frame in {_frame(f) for f in frames}:
            inclusive[frame] += samples
    lines = [f"py-spy, {total} samples of Outfitter's workers ({raw}):", "  self time:"]
    lines += [f"    {100 * n / total:5.1f}%  {frame}" for frame, n in own.most_common(15)]
    lines.append(
        "  inclusive (frames under outfitter/, sqlalchemy/, psycopg/, fastapi/, starlette/, anyio/):"
    )
    wanted = ("outfitter/", "sqlalchemy/", "psycopg/", "fastapi/", "starlette/", "anyio/", "pydantic")
    ranked = [(f, n) for f, n in inclusive.most_common() if any(w in f for w in wanted)]
    lines += [f"    {100 * n / total:5.1f}%  {frame}" for frame, n in ranked[:40]]
    return "\n".join(lines)


def _frame(frame: str) -> str:
    """'func (path/to/site-packages/pkg/mod.py:12)' -> 'func (pkg/mod.py)'."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "/src/", "/lib/python3"):
        if marker in where:
            where = where.split(marker, 1)[1]
    return f"{name} ({where})"


# --- report -------------------------------------------------------------------------------------


def summarise(rows: list[dict], cases: list[str]) -> str:
    out = [
        "| case | Outfitter rps | reference rps | ratio O/R (median) | per round "
        "| O p50 / p99 ms | R p50 / p99 ms "
        "| O CPU ms/req app+pg | R CPU ms/req app+pg | errors O/R |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case in cases:
        by = {
            app: [r for r in rows if r["case"] == case and r["app"] == app]
            for app in ("outfitter", "reference")
        }
        if not by["outfitter"] or not by["reference"]:
            continue
        ratios = [
            o["rps"] / r["rps"] for o in by["outfitter"] for r in by["reference"] if o["round"] == r["round"]
        ]

        def med(app: str, key: str, by: dict[str, list[dict]] = by) -> float:
            return statistics.median(r[key] for r in by[app])

        out.append(
            f"| {case} | {med('outfitter', 'rps'):.0f} | {med('reference', 'rps'):.0f} | "
            f"{statistics.median(ratios):.2f} | {' '.join(f'{x:.2f}' for x in ratios)} | "
            f"{med('outfitter', 'lat_p50_us') / 1000:.1f} / {med('outfitter', 'lat_p99_us') / 1000:.1f} | "
            f"{med('reference', 'lat_p50_us') / 1000:.1f} / {med('reference', 'lat_p99_us') / 1000:.1f} | "
            f"{med('outfitter', 'app_cpu_ms'):.2f}+{med('outfitter', 'pg_cpu_ms'):.2f} | "
            f"{med('reference', 'app_cpu_ms'):.2f}+{med('reference', 'pg_cpu_ms'):.2f} | "
            f"{sum(r['errors'] for r in by['outfitter'])}/{sum(r['errors'] for r in by['reference'])} |"
        )
    return "\n".join(out)


def same_fields(a: object, b: object) -> bool:
    """Same keys at every level (values differ: ids, timestamps)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_fields(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_fields(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) or a is None or b is None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--conc", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cases", default="employees,equipment")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--database", default="outfitter_writes_bench")
    parser.add_argument(
        "--profile", type=Path, help="directory: also profile Outfitter on --profile-case (py-spy)"
    )
    parser.add_argument("--profile-case", choices=sorted(CASES), default="employees")
    args = parser.parse_args()
    cases = args.cases.split(",")
    logs = Path(tempfile.mkdtemp(prefix="writes-bench-"))
    database_url = prepare_database(args.admin_url, args.database)
    env = {
        **os.environ,
        "OUTFITTER_DATABASE_URL": database_url,
        "OUTFITTER_EMBEDDED_WORKER": "false",
        "OUTFITTER_RATE_LIMIT": "off",
        "OUTFITTER_WEBHOOK_ALLOW_HTTP": "true",  # the endpoints below point at 127.0.0.1 (nothing sends)
        "OUTFITTER_WEBHOOK_ALLOW_PRIVATE": "true",
    }
    subprocess.run(
        [str(BIN / "outfitter"), "db", "upgrade"], env=env, check=True, timeout=300, capture_output=True
    )
    state: dict = {"database_url": database_url, "database": args.database}
    for side in ("outfitter", "reference"):
        company = cli(env, "company", "create", f"Writes bench {side}")["id"]
        token = cli(env, "token", "create", company, "--scope", "read", "--scope", "write")["token"]
        state[side] = {"company": company, "token": token}
    print(f"database {database_url}; logs in {logs}", flush=True)

    workers = str(args.workers)
    servers = {
        "outfitter": Server(
            "outfitter",
            [
                str(BIN / "outfitter"),
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(OTF_PORT),
                "--workers",
                workers,
            ],
            env,
            OTF_PORT,
            logs / "outfitter.log",
        ),
        "reference": Server(
            "reference",
            [
                str(BIN / "python"),
                str(HERE / "writes_reference.py"),
                "--port",
                str(REF_PORT),
                "--workers",
                workers,
            ],
            {"REF_DATABASE_URL": database_url},
            REF_PORT,
            logs / "reference.log",
        ),
    }
    rows: list[dict] = []
    try:
        for side, server in servers.items():
            server.wait_ready(state[side]["token"])
            # The company's endpoint, subscribed to every event: each write queues one delivery.
            status, body = http(
                OTF_PORT,
                "POST",
                "/api/v2/client/webhook-endpoints",
                state[side]["token"],
                {
                    "url": "http://127.0.0.1:9/hook",
                    "description": "writes bench (never sent: no worker runs)",
                },
            )
            assert status == 201, body
        for case in cases:  # the same answer's shape from both, and a taken email / serial is 409 on both
            sample = {
                "employees": {
                    "first_name": "Ada",
                    "last_name": "Check",
                    "email": "check@bench.example.com",
                    "country_id": "NG",
                    "phone": "+234 801 234 5678",
                    "address": "1 Marina, Lagos",
                },
                "equipment": {
                    "title": "Check",
                    "type": "Laptop",
                    "serial_number": "CHECK-1",
                    "specs": {"memory": "16 GB"},
                    "status": "Unassigned",
                },
            }[case]
            answers = {
                s: http(servers[s].port, "POST", CASES[case]["path"], state[s]["token"], sample)
                for s in servers
            }
            again = {
                s: http(servers[s].port, "POST", CASES[case]["path"], state[s]["token"], sample)[0]
                for s in servers
            }
            same = same_fields(answers["outfitter"][1], answers["reference"][1])
            print(
                f"verify {case}: status {answers['outfitter'][0]}/{answers['reference'][0]}, "
                f"again {again['outfitter']}/{again['reference']}, same fields={same}",
                flush=True,
            )
            if not same or {answers[s][0] for s in servers} != {201} or set(again.values()) != {409}:
                sys.exit(
                    f"the answers differ:\n  outfitter: {answers['outfitter']}"
                    f"\n  reference: {answers['reference']}"
                )
        for case in cases:  # warm-up: pools, prepared statements
            for side, server in servers.items():
                wrk(server.port, case, state[side]["token"], args.conc, args.warmup, f"warm-{side}", logs)
        pair = 0
        for rnd in range(1, args.rounds + 1):
            for case in cases:
                order = ["outfitter", "reference"] if pair % 2 == 0 else ["reference", "outfitter"]
                pair += 1
                for app in order:
                    prefix = f"{app[0]}{rnd}{case[:2]}"
                    result = measure_one(servers[app], case, state, args.conc, args.duration, prefix, logs)
                    rows.append({"app": app, "round": rnd, "case": case, **result})
                    print(
                        f"r={rnd} {case:9} {app:9} {result['rps']:7.1f} rps "
                        f"p50 {result['lat_p50_us'] / 1000:6.1f} ms "
                        f"p99 {result['lat_p99_us'] / 1000:6.1f} ms cpu app {result['app_cpu_ms']:.2f} "
                        f"pg {result['pg_cpu_ms']:.2f} ms/req err {result['errors']}",
                        flush=True,
                    )
                written = {r["app"]: r["rows"] for r in rows[-2:]}
                print(
                    f"      rows written  {'table':20} {'outfitter':>9} {'reference':>9}   per record O / R"
                )
                per = {app: rows_per_record(written[app], case) for app in written}
                for table in TABLES:
                    print(
                        f"      {'':13} {table:20} "
                        f"{written['outfitter'][table]:9} {written['reference'][table]:9}"
                        f"   {per['outfitter'][table]} / {per['reference'][table]}"
                    )
                if per["outfitter"] != per["reference"]:
                    sys.exit(f"rows per record differ for {case}: {per}")
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
            print(
                profile(
                    servers["outfitter"],
                    state,
                    args.profile_case,
                    args.conc,
                    args.duration,
                    args.profile,
                    logs,
                ),
                flush=True,
            )
    finally:
        for server in servers.values():
            server.stop()
    totals = {side: count_rows(database_url, state[side]["company"]) for side in ("outfitter", "reference")}
    print(
        "\nrows in the database per company: "
        + ", ".join(f"{t} {totals['outfitter'][t]}/{totals['reference'][t]}" for t in TABLES)
    )
    print(
        f"\nwrites, {args.workers} workers each, concurrency {args.conc}, "
        f"{args.rounds} rounds of {args.duration} s "
        "(medians; ratio per round)\n"
    )
    print(summarise(rows, cases))


if __name__ == "__main__":
    main()
