"""What a server process does about its own life: freeze the heap once started, refuse a database
at another schema, and end when its master dies."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from anyio import to_thread

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.types import Receive, Scope, Send


logger = logging.getLogger("uvicorn.error")
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WATCHDOG_INTERVAL_SECONDS = 0.5


SWITCH_INTERVAL = 0.0005  # seconds


def frozen_after_startup(app: FastAPI) -> FastAPI:
    """Once `app` has started (its lifespan's startup done), move every object then alive into
    the cyclic garbage collector's permanent generation (`gc.freeze`).

    What a started process holds (modules, routes, pydantic schemas, SQLAlchemy's tables, the
    pools) lives as long as the process, yet every full collection walked it all and held the
    event loop meanwhile, which every request in flight waited out (docs/architecture.md has the
    figures). Frozen, a full collection walks only what came after. Also tunes the serving
    process once, at its start: anyio's thread limiter to the pool's size (in its event loop), and
    the switch interval; and at its end marks its metrics' live gauges dead. Only a serving
    process does this: frozen objects are never collected, and a process that builds many apps
    (the tests) would keep them all."""
    startup = app.router.lifespan_context
    settings = app.state.settings

    @contextlib.asynccontextmanager
    async def lifespan(started: Any) -> AsyncIterator[Any]:
        # One worker thread per pooled connection: a request waits for a thread in the event loop,
        # cheaply, instead of holding a thread while it waits for a connection. Set here, once per
        # serving process (in its event loop, which holds the limiter), not by every app built.
        to_thread.current_default_thread_limiter().total_tokens = (
            settings.db_pool_size + settings.db_pool_max_overflow
        )
        # The GIL handed over more often than Python's 5 ms: a thread streaming rows to or from
        # the database (a batch's COPY, an export's read-ahead) needs it for every chunk, and
        # waited for it while another thread worked in Python (docs/equipment-performance.md).
        sys.setswitchinterval(SWITCH_INTERVAL)
        async with startup(started) as state:
            gc.collect()  # what start-up left as garbage is freed, not kept for good
            gc.freeze()
            try:
                yield state
            finally:
                from outfitter.core import metrics

                if metrics.active is not None:  # its pool's gauges go; its counts stay in the sums
                    metrics.active.process_ended()

    app.router.lifespan_context = lifespan
    return app


class CurrentSchemaRequired:
    """The app for servers that load it by name (`uvicorn outfitter.asgi:app`): on a database whose
    schema is not this release's, or that cannot be reached, the lifespan's startup fails with the
    one line `outfitter serve` prints, which uvicorn logs before it exits with status 3. Started on
    an empty database, it used to listen and answer every request with a 500. (`outfitter serve`
    checks before it binds; its workers need no check of their own.)"""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        from outfitter.http.middleware import replaying_message

        first = await receive()
        if first["type"] == "lifespan.startup":
            problem = await asyncio.to_thread(_database_problem, self.app.state.engine)
            if problem is not None:
                await send({"type": "lifespan.startup.failed", "message": problem})
                return
        await self.app(scope, replaying_message(first, receive), send)


def _database_problem(engine: Any) -> str | None:
    from sqlalchemy.exc import SQLAlchemyError

    from outfitter.migrations import schema_problem

    try:
        return schema_problem(engine)
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        return f"the database cannot be reached: {reason}"


def die_with_master(master_pid: int) -> None:
    """End this worker (SIGTERM: uvicorn's graceful shutdown) when the master process dies.

    When the master is SIGKILLed (OOM killer, `kill -9`, a crashed supervisor) it cannot stop its
    workers, which would go on serving, and holding database connections, as orphans.

    On Linux we use PR_SET_PDEATHSIG, the robust choice: the kernel itself sends the signal the
    moment the parent dies, however it died, with no polling delay and without needing a thread of
    this worker to be scheduled to notice. Its one trap is that "parent" means the parent *thread*:
    a child forked from a short-lived thread is signalled when that thread ends. Uvicorn's
    Multiprocess starts and restarts every worker from the master's main thread, which lives as
    long as the master does, so here it means the master process. The signal is armed only from
    prctl() on; a master that died before that is caught by comparing getppid() with its pid.

    Where prctl is unavailable (macOS, the BSDs) a watchdog thread polls os.getppid(), which changes
    when the parent dies and the worker is re-parented: portable, but it notices only at its next
    poll, and only while the interpreter gets to run the thread.
    """
    if not _set_parent_death_signal(signal.SIGTERM):
        threading.Thread(
            target=_watch_master, args=(master_pid,), name="outfitter-master-watchdog", daemon=True
        ).start()
    if os.getppid() != master_pid:
        logger.warning("master process %d is gone: worker %d stops", master_pid, os.getpid())
        os.kill(os.getpid(), signal.SIGTERM)


def _set_parent_death_signal(sig: signal.Signals) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the process's own symbols include libc's prctl
        result: int = libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        return False
    return result == 0


def _watch_master(master_pid: int) -> None:
    while os.getppid() == master_pid:
        time.sleep(WATCHDOG_INTERVAL_SECONDS)
    logger.warning("master process %d is gone: worker %d stops", master_pid, os.getpid())
    os.kill(os.getpid(), signal.SIGTERM)
