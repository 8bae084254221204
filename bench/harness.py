"""What the benchmark scripts share: a scratch PostgreSQL database and the app under uvicorn."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from outfitter.config import Settings
from outfitter.server import frozen_after_startup


@contextmanager
def scratch_postgres(admin_url: str) -> Iterator[str]:
    """Create a database of its own on the server at `admin_url`; drop it afterwards."""
    admin_url = Settings(database_url=admin_url).database_url
    name = f"outfitter_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def serving(app: FastAPI, port: int) -> Iterator[str]:
    """Serve `app` with uvicorn on 127.0.0.1:`port` in a thread; yields its base URL. The heap is
    frozen once the app has started, as `outfitter serve` freezes it (outfitter.server): without
    that, full collections of this process's heap (~120 ms each) fell on a few timed requests."""
    server = uvicorn.Server(
        uvicorn.Config(frozen_after_startup(app), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
