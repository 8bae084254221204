"""`outfitter serve`: TCP_NODELAY on every accepted connection, workers that end with the master,
and one-line errors for bad input.

The unit tests serve through uvicorn in this process and read TCP_NODELAY off the server's end
of a connection. The integration tests run `outfitter serve` (1 and 2 workers) as an operator would,
on SQLite, and read the workers' side of the connection and their pids from /proc.
"""

from __future__ import annotations

import ctypes
import gc
import importlib.util
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from fastapi.testclient import TestClient
from uvicorn import Config, Server

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.server import ServeError, bind_socket
from outfitter.server.lifetime import frozen_after_startup

OUTFITTER = Path(sys.executable).parent / "outfitter"
LOOPS = ["asyncio"] + (["uvloop"] if importlib.util.find_spec("uvloop") else [])
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n"


# --- unit: the socket serve() binds gives every accepted connection TCP_NODELAY ---------------


async def _tiny_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def _server_side_nodelay(listener: socket.socket, loop: str) -> int:
    """Serve `listener` with uvicorn as a worker does (Server.run(sockets=[...])), make one request
    on a kept-alive connection, and read TCP_NODELAY off the server's end of it."""
    config = Config(_tiny_app, loop=loop, http="h11", lifespan="off", log_config=None, access_log=False)
    with (
        _serving(config, listener) as server,
        socket.create_connection(listener.getsockname()[:2], timeout=10) as client,
    ):
        client.sendall(HEALTHZ)
        assert client.recv(4096).startswith(b"HTTP/1.1 200")
        connections = list(server.server_state.connections)
        assert len(connections) == 1
        server_end = connections[0].transport.get_extra_info("socket")
        return int(server_end.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


@contextmanager
def _serving(config: Config, listener: socket.socket) -> Iterator[Server]:
    """uvicorn serving `listener` in a thread, as a worker does (Server.run(sockets=[...])), until
    the block ends; then stopped and the socket closed."""
    server = Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.01)
        yield server
    finally:
        server.should_exit = True
        thread.join(10)
        listener.close()


@pytest.mark.parametrize("loop", LOOPS)
def test_connections_accepted_from_the_bound_socket_have_tcp_nodelay(loop: str) -> None:
    listener = bind_socket("127.0.0.1", 0)
    assert listener.proto == socket.IPPROTO_TCP
    assert _server_side_nodelay(listener, loop) == 1


def test_bind_socket_refuses_a_port_in_use_with_one_line() -> None:
    with closing(bind_socket("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(ServeError, match=r"^cannot listen on 127\.0\.0\.1:\d+: ") as caught:
            bind_socket("127.0.0.1", port)
    assert "\n" not in str(caught.value)


# --- unit: a serving process freezes its started heap ---------------------------------------


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """The test process's heap, as it was, afterwards: frozen objects would never be collected."""
    assert gc.get_freeze_count() == 0
    yield
    gc.unfreeze()


def _collected(thing: object) -> bool:
    """Whether the cyclic collector walks `thing` (frozen objects are in none of its generations)."""
    return any(tracked is thing for tracked in gc.get_objects())


def test_a_served_app_freezes_the_heap_once_started_and_a_built_one_does_not(
    settings: Settings, unfrozen: None
) -> None:
    with TestClient(create_app(settings)) as plain:
        assert plain.get("/healthz").status_code == 200
        assert gc.get_freeze_count() == 0  # tests build many apps: none of them is kept for good
    app = frozen_after_startup(create_app(settings))
    assert gc.get_freeze_count() == 0  # not before start-up: the pools and routes come then
    with TestClient(app) as served:
        assert gc.get_freeze_count() > 50_000  # the modules, schemas, tables and the app itself
        assert gc.is_tracked(app) and not _collected(app) and not _collected(app.router.routes)
        answer = served.get("/healthz")
        assert answer.status_code == 200 and answer.json()["data"] == {"status": "ok"}
        garbage = [object()]  # what comes after start-up is collected as always
        assert _collected(garbage)


# --- integration: `outfitter serve --workers 2` ------------------------------------------------


def _free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def serve_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("serve")
    env = {key: value for key, value in os.environ.items() if not key.startswith("OUTFITTER_")}
    env.update(
        OUTFITTER_DATABASE_URL=f"sqlite:///{directory / 'x.db'}",
        OUTFITTER_EMBEDDED_WORKER="false",
        OUTFITTER_RATE_LIMIT="off",
    )
    done = subprocess.run(
        [str(OUTFITTER), "db", "upgrade"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return env


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    workers: int

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None when it does not exist."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
    return fields[0], int(fields[1])


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[1] == pid and stat[0] != "Z":
                found.append(int(entry.name))
    return found


def _worker_pids(master: int) -> list[int]:
    workers = []
    for pid in _children(master):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"multiprocessing.spawn" in command:  # not the resource tracker
            workers.append(pid)
    return workers


def _gone(pid: int) -> bool:
    stat = _stat(pid)
    return stat is None or stat[0] in {"Z", "X"}  # a zombie has stopped; only its reaping is left


@contextmanager
def _serve(count: int, serve_env: dict[str, str], log: Path) -> Iterator[Served]:
    """`outfitter serve --workers N`, once it answers /healthz; stopped when the block ends."""
    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc")
    port = _free_port()
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [str(OUTFITTER), "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(count)],
            env=serve_env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    result = Served(process, port, log, count)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, f"serve exited {process.returncode}:\n{result.log_text()}"
            assert time.monotonic() < deadline, f"no answer on /healthz:\n{result.log_text()}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    workers = _worker_pids(process.pid)
                    if len(workers) == (count if count > 1 else 0):
                        break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        yield result
    finally:
        workers = workers or _worker_pids(process.pid)
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for pid in workers:  # only ours, and only if a test left them behind
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def servers(
    serve_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[int], Served]]:
    """One `outfitter serve --workers N` per N for the module: the tests that use it only send
    requests and read the lines of their own requests, so they share it (each start costs seconds)."""
    started: dict[int, Served] = {}
    with ExitStack() as stack:

        def serving(count: int) -> Served:
            if count not in started:
                log = tmp_path_factory.mktemp("serve") / "serve.log"
                started[count] = stack.enter_context(_serve(count, serve_env, log))
            found = started[count]
            assert found.process.poll() is None, (
                f"serve exited {found.process.returncode}:\n{found.log_text()}"
            )
            return found

        yield serving


@pytest.fixture
def served(request: pytest.FixtureRequest, servers: Callable[[int], Served]) -> Served:
    """The module's `outfitter serve --workers N` (N = 2 unless parametrized)."""
    return servers(int(getattr(request, "param", 2)))


@pytest.fixture
def own_server(serve_env: dict[str, str], tmp_path: Path) -> Iterator[Served]:
    """`outfitter serve --workers 2` of the test's own, for a test that kills it."""
    with _serve(2, serve_env, tmp_path / "serve.log") as result:
        yield result


def _read_response(client: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = client.recv(4096)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = client.recv(4096)
        assert chunk, "connection closed mid-body"
        body += chunk
    return head + b"\r\n\r\n" + body


def _worker_side_nodelay(served: Served, client: socket.socket) -> int:
    """TCP_NODELAY of the worker's end of `client`'s connection: find the socket's inode in
    /proc/net/tcp, the worker fd that holds it, and copy that fd here with pidfd_getfd(2)."""
    client_port = client.getsockname()[1]
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port, remote_port = (int(address.rsplit(":", 1)[1], 16) for address in fields[1:3])
        if local_port == served.port and remote_port == client_port:
            inode = fields[9]
    assert inode is not None, "the server's end of the connection is not in /proc/net/tcp"
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd_open, pidfd_getfd = 434, 438  # the same number on every architecture
    # With one worker the process started is the server; with more, its children are.
    servers = _worker_pids(served.process.pid) if served.workers > 1 else [served.process.pid]
    for worker in servers:
        for fd in os.listdir(f"/proc/{worker}/fd"):
            try:
                target = os.readlink(f"/proc/{worker}/fd/{fd}")
            except OSError:
                continue
            if target != f"socket:[{inode}]":
                continue
            pidfd = libc.syscall(pidfd_open, worker, 0)
            if pidfd < 0:
                pytest.skip(f"pidfd_open is not available here: {os.strerror(ctypes.get_errno())}")
            try:
                copied = libc.syscall(pidfd_getfd, pidfd, int(fd), 0)
                if copied < 0:
                    pytest.skip(f"pidfd_getfd is not available here: {os.strerror(ctypes.get_errno())}")
            finally:
                os.close(pidfd)
            with socket.socket(fileno=copied) as server_end:
                return int(server_end.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    raise AssertionError("no worker holds the server's end of the connection")


@pytest.mark.parametrize("served", [1, 2], indirect=True, ids=["1-worker", "2-workers"])
def test_a_kept_alive_connection_gets_both_answers_with_tcp_nodelay(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as client:
        for _ in range(2):  # the second request rides the same connection
            client.sendall(HEALTHZ)
            response = _read_response(client)
            assert response.startswith(b"HTTP/1.1 200"), response
            assert b'"success":true' in response
        assert _worker_side_nodelay(served, client) == 1


def test_the_access_log_has_the_time_the_request_id_and_no_query_string(served: Served) -> None:
    """A search names a person (`search=ada@example.com`): the access log keeps the path, its
    query string replaced by `?...`, and each line starts with its time and ends with the request's
    id, the one answered in `X-Request-ID`."""
    url = f"http://127.0.0.1:{served.port}/api/v2/client/employees"
    answer = httpx.get(url, params={"search": "ada.obi@example.com"}, timeout=10)
    assert answer.status_code == 401  # no token: the line is written all the same
    request_id = answer.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", request_id)
    deadline = time.monotonic() + 10  # the line is flushed by another process: a bound, not a timing
    while request_id not in served.log_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    # The server is the module's: this request's lines are those that carry its id.
    (line,) = [line for line in served.log_text().splitlines() if request_id in line]
    assert "/api/v2/client/employees" in line, line
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO: ", line), line
    assert line.endswith(f'"GET /api/v2/client/employees?... HTTP/1.1" 401 Unauthorized {request_id}'), line
    assert "ada.obi" not in served.log_text()


@pytest.mark.parametrize("served", [1], indirect=True, ids=["1-worker"])
def test_the_apps_own_lines_have_the_time_the_level_and_the_logger(
    served: Served, serve_env: dict[str, str]
) -> None:
    """The app's warnings (a 503, readiness) are what an operator reads in an outage: each carries
    its time and level as uvicorn's lines do, not only its message."""
    database = serve_env["OUTFITTER_DATABASE_URL"].removeprefix("sqlite:///")
    with closing(sqlite3.connect(database)) as connection:
        (revision,) = connection.execute("SELECT version_num FROM alembic_version").fetchone()
        connection.execute("UPDATE alembic_version SET version_num = '0001'")  # the schema behind
        connection.commit()
        try:
            answer = httpx.get(f"http://127.0.0.1:{served.port}/readyz", timeout=10)
        finally:
            connection.execute("UPDATE alembic_version SET version_num = ?", (revision,))
            connection.commit()
    assert answer.status_code == 503
    deadline = time.monotonic() + 10  # the line is flushed by another process: a bound, not a timing
    while "readiness:" not in served.log_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    (line,) = [line for line in served.log_text().splitlines() if "readiness:" in line]
    assert re.match(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING: +outfitter: readiness: the database schema in sqlite:///",
        line,
    ), line


def test_workers_end_when_the_master_is_killed(own_server: Served) -> None:
    served = own_server
    workers = _worker_pids(served.process.pid)
    assert len(workers) == 2
    served.process.send_signal(signal.SIGKILL)
    served.process.wait(10)
    deadline = time.monotonic() + 10
    while not all(_gone(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = [pid for pid in workers if not _gone(pid)]
    assert not alive, f"workers {alive} outlived the master:\n{served.log_text()}"


# --- bad input: one `error:` line, exit 1, no traceback ---------------------------------------


@pytest.fixture
def port_in_use() -> Iterator[int]:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "99999"], "--port must be between 1 and 65535, got 99999"),
        (["--port", "0"], "--port must be between 1 and 65535"),
        (["--workers", "0"], "--workers must be at least 1, got 0"),
        # TEST-NET-1 (RFC 5737): never an address of this machine, so it cannot be bound.
        (["--host", "192.0.2.1"], "cannot listen on 192.0.2.1:"),
        (["--port", "IN_USE"], "Address already in use"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_1(
    args: list[str], message: str, serve_env: dict[str, str], port_in_use: int
) -> None:
    args = [str(port_in_use) if arg == "IN_USE" else arg for arg in args]
    if "--port" not in args:
        args += ["--port", str(_free_port())]
    done = subprocess.run(
        [str(OUTFITTER), "serve", *args], env=serve_env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert message in lines[0]
    assert "Traceback" not in done.stderr + done.stdout


# --- a request uvicorn cannot parse still gets the JSON envelope (issue 16 item 21) -------------


def _raw_exchange(port: int, request: bytes) -> tuple[str, dict[str, str], bytes]:
    """Send raw bytes, read until the server closes: (status line, headers, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(request)
        data = b""
        while chunk := client.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return status, headers, body


BAD_REQUEST_MESSAGE = (
    "The request could not be read: its request line and headers must be valid HTTP/1.1 "
    "and at most 65536 bytes together."
)


@pytest.mark.parametrize("served", [1, 2], indirect=True, ids=["1-worker", "2-workers"])
@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /api/v2/client/employees?search=" + b"a" * 120_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
        + b"".join(b"X-%d: %s\r\n" % (n, b"a" * 20) for n in range(3000))
        + b"\r\n",
        b"NOT HTTP AT ALL\r\n\r\n",
    ],
    ids=["120KB-query", "100KB-header", "3000-headers", "garbage"],
)
def test_a_request_too_large_or_malformed_to_parse_gets_the_json_envelope(
    served: Served, request_bytes: bytes
) -> None:
    status, headers, body = _raw_exchange(served.port, request_bytes)
    assert status == "HTTP/1.1 400 Bad Request", (status, body)
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body)
    assert json.loads(body) == {"success": False, "message": BAD_REQUEST_MESSAGE, "data": None}
    assert body == orjson.dumps(json.loads(body))  # compact, as every other answer


@pytest.mark.parametrize("served", [1], indirect=True, ids=["1-worker"])
def test_a_long_query_under_the_limit_is_served(served: Served) -> None:
    response = httpx.get(f"http://127.0.0.1:{served.port}/healthz", params={"q": "a" * 60_000}, timeout=10)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("protocol", ["httptools", "h11"])
def test_both_http_protocols_answer_what_they_cannot_parse_with_the_envelope(protocol: str) -> None:
    """`serve` picks httptools (a dependency) when installed, else h11: both answer the envelope.
    The head limit is exact with httptools; h11 applies its own only while a head is incomplete,
    so it is shown a malformed request instead."""
    from outfitter.server.protocols import MAX_HEAD_BYTES, EnvelopeH11Protocol, EnvelopeHttpToolsProtocol

    http = EnvelopeHttpToolsProtocol if protocol == "httptools" else EnvelopeH11Protocol
    listener = bind_socket("127.0.0.1", 0)
    config = Config(
        _tiny_app,
        http=http,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        lifespan="off",
        log_config=None,
        access_log=False,
    )
    with _serving(config, listener):
        port = listener.getsockname()[1]
        fits = (
            b"GET /?q="
            + b"a" * (MAX_HEAD_BYTES - 1000)
            + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        assert _raw_exchange(port, fits)[0] == "HTTP/1.1 200 OK"
        over = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n"
        if protocol == "h11":
            over = b"NOT HTTP AT ALL\r\n\r\n"
        status, headers, body = _raw_exchange(port, over)
        assert status == "HTTP/1.1 400 Bad Request" and headers["content-type"] == "application/json"
        assert json.loads(body) == {"success": False, "message": BAD_REQUEST_MESSAGE, "data": None}
