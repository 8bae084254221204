"""A real HTTP receiver for webhook tests: a threaded http.server on 127.0.0.1, answering each
request with the next status of a script (then 200), optionally holding requests until released."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    received: list[Received] = field(default_factory=list)
    script: list[int] = field(default_factory=list)  # statuses to answer, in order; then 200
    hold: threading.Event | None = None  # when set, requests wait for it before answering
    arrived: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ids(self) -> list[str]:
        with self.lock:
            return [request.headers["webhook-id"] for request in self.received]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            with receiver.lock:
                receiver.received.append(
                    Received(self.path, {key.lower(): value for key, value in self.headers.items()}, body)
                )
                status = receiver.script.pop(0) if receiver.script else 200
            receiver.arrived.set()
            if receiver.hold is not None:
                receiver.hold.wait(timeout=60)
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *_args: Any) -> None:
            pass

    return Handler


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # socketserver's 5 refuses connections when many workers send at once


@contextmanager
def running_receiver() -> Iterator[Receiver]:
    receiver = Receiver(url="")
    server = _Server(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        if receiver.hold is not None:
            receiver.hold.set()
        server.shutdown()
        server.server_close()
