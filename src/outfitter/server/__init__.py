"""`outfitter serve`: uvicorn, run on a listening socket this module binds, with workers tied to it.

What `uvicorn.run` does not do for us:

1. A listening socket bound in the master, with a one-line error when it cannot be, whose
   connections get TCP_NODELAY. Before 0.55, with more than one worker uvicorn bound it as
   `socket.socket(family)`, whose protocol number is 0. Accepted sockets inherit it, and asyncio
   sets TCP_NODELAY only on sockets whose protocol is IPPROTO_TCP, so every response sat in
   Nagle's buffer until the client's delayed ACK. `bind_socket` creates the socket as
   `socket(family, SOCK_STREAM, IPPROTO_TCP)` whatever uvicorn's release (pyproject admits older
   ones); every connection accepted from it, in any worker, then gets TCP_NODELAY from asyncio
   (uvloop sets it on every TCP connection anyway). The same socket serves the single-process
   path, so both behave alike.
2. Workers that die with the master: see `lifetime.die_with_master`.
3. A request it cannot parse (malformed, or a request line and headers over MAX_HEAD_BYTES) gets
   the JSON error envelope, not uvicorn's plain-text 400: see `protocols`.
4. A heap the cyclic garbage collector does not walk again and again: see
   `lifetime.frozen_after_startup`.
5. `uvicorn outfitter.asgi:app` starts only on a database at this release's schema, as `outfitter
   serve` does: see `lifetime.CurrentSchemaRequired`.
6. With OUTFITTER_METRICS_TOKEN, the directory every process writes its metrics to (prometheus-
   client's multiprocess mode), made before the workers start and emptied or removed at the end:
   see `metrics_directory`. With OUTFITTER_LOG_FORMAT=json, every line is a JSON object and the
   access line is the app's own (one per request, with its route, company and token).

Bad input (port, worker count, an address that cannot be bound) raises `ServeError`, one line
that the CLI prints as `error: ...`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import uvicorn.config
import uvicorn.logging
from uvicorn import Config, Server
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess

from outfitter.server.lifetime import die_with_master, frozen_after_startup
from outfitter.server.protocols import MAX_HEAD_BYTES, event_loop, http_protocol

if TYPE_CHECKING:
    from fastapi import FastAPI

    from outfitter.worker.background import BackgroundWorker

# Every server process builds the app through `worker_app`, which first ties a worker to the master
# (the master's pid travels in MASTER_PID_VARIABLE; the single-process server has none).
WORKER_APP_FACTORY = "outfitter.server:worker_app"
MASTER_PID_VARIABLE = "OUTFITTER_SERVE_MASTER_PID"
BACKLOG = 2048

logger = logging.getLogger("uvicorn.error")


class ServeError(Exception):
    """Why the server cannot start, in one line."""


def _display(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind_socket(host: str, port: int, backlog: int = BACKLOG) -> socket.socket:
    """A listening TCP socket whose accepted connections get TCP_NODELAY (see the module's doc).

    Listening here, in the master, lets connections queue while the workers start. Uvicorn's
    choice of family is kept: IPv6 when the host has a colon, IPv4 otherwise ("localhost" is
    127.0.0.1)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        found = socket.getaddrinfo(
            host or None, port, family, socket.SOCK_STREAM, socket.IPPROTO_TCP, socket.AI_PASSIVE
        )
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise ServeError(f"cannot listen on {_display(host, port)}: {reason}") from None
    address = found[0][4]
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {_display(host, port)}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)  # the workers receive it
    return sock


def serve(host: str, port: int, workers: int) -> None:
    """Serve the API until interrupted. Raises ServeError on bad input or a failed start."""
    if not 1 <= port <= 65535:
        raise ServeError(f"--port must be between 1 and 65535, got {port}")
    if workers < 1:
        raise ServeError(f"--workers must be at least 1, got {workers}")
    sock = bind_socket(host, port)
    _configure_logging()  # uvicorn does it again for each server: lines written before are alike
    warn_of_limits_per_process(workers)
    with metrics_directory():
        background = _start_embedded_worker()
        stop_worker = background.stop if background is not None else _nothing
        try:
            if workers == 1:
                _serve_one(sock, host, port, stop_worker)
            else:
                _serve_workers(sock, host, port, workers)
        finally:
            sock.close()
            stop_worker()


@contextlib.contextmanager
def metrics_directory() -> Iterator[str | None]:
    """With OUTFITTER_METRICS_TOKEN: the directory the server processes (which inherit it through
    PROMETHEUS_MULTIPROC_DIR) and the embedded worker write their metrics to. OUTFITTER_METRICS_DIR
    is emptied of a previous run's files first and kept; without it a temporary one is made, and
    removed when the server stops. Metrics are on in this process too (the embedded worker's)."""
    from outfitter.config import get_settings
    from outfitter.core import metrics

    settings = get_settings()
    if not settings.metrics_token:
        yield None
        return
    made = settings.metrics_dir is None
    directory = tempfile.mkdtemp(prefix="outfitter-metrics-") if made else str(settings.metrics_dir)
    try:
        os.makedirs(directory, exist_ok=True)
        metrics.clear_directory(directory)
    except OSError as exc:
        raise ServeError(f"cannot use OUTFITTER_METRICS_DIR {directory}: {exc.strerror or exc}") from None
    os.environ[metrics.DIRECTORY_VARIABLE] = directory
    metrics.enable(directory)
    try:
        yield directory
    finally:
        if made:
            shutil.rmtree(directory, ignore_errors=True)


def _nothing() -> None:
    pass


def warn_of_limits_per_process(workers: int) -> None:
    from outfitter.config import get_settings

    settings = get_settings()
    limited = "off" not in (settings.rate_limit.strip().lower(), settings.scim_rate_limit.strip().lower())
    if workers > 1 and settings.redis_url is None and limited:
        logger.warning(
            "rate limits are kept per server process (%d processes, no OUTFITTER_REDIS_URL): a token "
            "may make up to %d times its budget; set OUTFITTER_REDIS_URL to share them",
            workers,
            workers,
        )


def _start_embedded_worker() -> BackgroundWorker | None:
    """One worker thread in this (master) process, whatever --workers says: once per `serve`, not
    once per server process. OUTFITTER_EMBEDDED_WORKER=false leaves the work to `outfitter worker`."""
    from outfitter.config import get_settings
    from outfitter.worker import start_in_background

    settings = get_settings()
    if not settings.embedded_worker:
        return None
    logger.info("embedded worker started (OUTFITTER_EMBEDDED_WORKER=false to run it apart)")
    return start_in_background(settings)


class AccessFormatter(uvicorn.logging.AccessFormatter):
    """Uvicorn's access line, its path without the query string: searches and filters name people
    (`search=ada@example.com`), and a log outlives the request by far. It ends with the request's
    id (the `X-Request-ID` answered), which the line of an unexpected error quotes too."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        from outfitter.core.tracing import current_request_id

        record.request_id = current_request_id.get()
        if isinstance(record.args, tuple) and len(record.args) == 5:
            client, method, path, version, status = record.args
            path, query = str(path).partition("?")[::2]
            record.args = (client, method, path + ("?..." if query else ""), version, status)
        return super().formatMessage(record)


# uvicorn's logging, with the time on every line and the access line above; the app's own logger
# (the 503s and 500s, readiness, the embedded worker) beside it, in the same form with its name.
LOG_CONFIG: dict[str, Any] = {
    **uvicorn.config.LOGGING_CONFIG,
    "formatters": {
        "default": {
            "()": "uvicorn.logging.DefaultFormatter",
            "fmt": "%(asctime)s %(levelprefix)s %(message)s",
        },
        "access": {
            "()": "outfitter.server.AccessFormatter",
            "fmt": '%(asctime)s %(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'
            " %(request_id)s",
        },
        "outfitter": {
            "()": "uvicorn.logging.DefaultFormatter",
            "fmt": "%(asctime)s %(levelprefix)s %(name)s: %(message)s",
        },
    },
    "handlers": {
        **uvicorn.config.LOGGING_CONFIG["handlers"],
        "outfitter": {
            "formatter": "outfitter",
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr",
        },
    },
    "loggers": {
        **uvicorn.config.LOGGING_CONFIG["loggers"],
        "outfitter": {"handlers": ["outfitter"], "level": "INFO", "propagate": False},
    },
}


# The same, every line one JSON object (core.logs); the access line is the app's (`outfitter.access`).
JSON_LOG_CONFIG: dict[str, Any] = {
    **LOG_CONFIG,
    "formatters": {
        name: {"()": "outfitter.core.logs.JsonFormatter"} for name in ("default", "access", "outfitter")
    },
}


WORKER_HEALTHCHECK_SECONDS = 60


def _configure_logging() -> None:
    import logging.config

    from outfitter.config import get_settings

    logging.config.dictConfig(JSON_LOG_CONFIG if get_settings().log_format == "json" else LOG_CONFIG)


def _config(app: str, host: str, port: int, workers: int, factory: bool = False) -> Config:
    # Proxy headers as uvicorn's defaults; its logging with the time, and no query strings (above).
    from outfitter.config import get_settings

    as_json = get_settings().log_format == "json"
    return Config(
        app,
        host=host,
        port=port,
        workers=workers,
        factory=factory,
        loop=event_loop(),
        http=http_protocol(),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        proxy_headers=True,
        log_config=JSON_LOG_CONFIG if as_json else LOG_CONFIG,
        access_log=not as_json,  # the app writes its own, with what uvicorn does not know
        # uvicorn's 5 s default killed workers still importing the app on a busy host, in a loop.
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_SECONDS,
    )


def _log_listening(sock: socket.socket, host: str) -> None:
    port = sock.getsockname()[1]
    logger.info("Uvicorn running on http://%s (Press CTRL+C to quit)", _display(host, port))


class _Server(Server):
    """uvicorn's Server, running `before_exit` once it has shut down on a signal but before it
    re-raises the signal (which ends the process): the embedded worker finishes or releases its
    deliveries first."""

    def __init__(self, config: Config, before_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self.before_exit = before_exit

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            try:
                yield
            finally:
                self.before_exit()


def _serve_one(sock: socket.socket, host: str, port: int, before_exit: Callable[[], None]) -> None:
    config = _config(WORKER_APP_FACTORY, host, port, 1, factory=True)
    _log_listening(sock, host)
    server = _Server(config, before_exit)
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the SIGINT it shut down for
        server.run(sockets=[sock])
    if not server.started:
        raise ServeError("the server did not start; the log above says why")


def _serve_workers(sock: socket.socket, host: str, port: int, workers: int) -> None:
    config = _config(WORKER_APP_FACTORY, host, port, workers, factory=True)
    os.environ[MASTER_PID_VARIABLE] = str(os.getpid())  # inherited by the spawned workers
    _log_listening(sock, host)
    supervisor = Multiprocess(config, sockets=[sock])
    supervisor.run()
    if any(process.exitcode == STARTUP_FAILURE for process in supervisor.processes):
        raise ServeError("a worker failed to start; the log above says why")


def worker_app() -> FastAPI:
    """The app factory each server process loads (uvicorn `factory=True`)."""
    master = os.environ.get(MASTER_PID_VARIABLE)
    if master and master.isdigit():
        die_with_master(int(master))
    from outfitter.app import create_app

    return frozen_after_startup(create_app())
