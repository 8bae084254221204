"""A real HTTP receiver for webhook tests: a threaded http.server on 127.0.0.1, answering each
request with the next status of a script (then 200), optionally holding requests until released.

Every body it receives is validated against its event type's schema in the `webhooks` section of
the served OpenAPI document; a test whose receiver got one that does not match fails."""

from __future__ import annotations

import functools
import json
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema_rs

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.http.openapi import example_of
from outfitter.webhooks.openapi import SUBJECT_SCHEMAS


@functools.cache
def served_document() -> dict[str, Any]:
    """The OpenAPI document the app serves at /api/v2/openapi.json."""
    # Built without a request: nothing connects to this database.
    unused = Path(tempfile.gettempdir()) / "outfitter-openapi-document.db"
    app = create_app(Settings(database_url=f"sqlite:///{unused}", rate_limit="off"))
    document: dict[str, Any] = app.openapi()
    app.state.engine.dispose()
    return document


@functools.cache
def _payload_validator(event_type: str) -> Any:
    document = served_document()
    body = document["webhooks"][event_type]["post"]["requestBody"]["content"]["application/json"]
    return jsonschema_rs.validator_for({**body["schema"], "components": document["components"]})


def payload_problems(body: bytes) -> list[str]:
    """Why a delivered body does not match the document's schema of its event type (none: it does)."""
    try:
        payload = json.loads(body)
        event_type = payload["type"]
    except (ValueError, KeyError, TypeError) as exc:
        return [f"not an event envelope: {exc!r}"]
    if event_type not in served_document()["webhooks"]:
        return [f"{event_type!r} is not an event type of the document's webhooks"]
    return [f"{event_type}: {error}"[:500] for error in _payload_validator(event_type).iter_errors(payload)]


def event_data(event_type: str) -> dict[str, Any]:
    """`data` of a stand-in event of `event_type` that the document's schema accepts: the example of
    its subject's answer, with an id of its own."""
    schema = {"$ref": f"#/components/schemas/{SUBJECT_SCHEMAS[event_type.partition('.')[0]].__name__}"}
    data: dict[str, Any] = example_of(schema, served_document()["components"]["schemas"])
    return {**data, "id": str(uuid.uuid4())} if "id" in data else data


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
    hold_every_other: bool = False  # then only the 2nd, 4th... request to each path waits
    requests_per_path: dict[str, int] = field(default_factory=dict)
    arrived: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    invalid: list[str] = field(default_factory=list)  # what payload_problems found, per body
    hold_after: int = 0  # with `hold`: the first this many requests answer at once
    retry_after: str | None = None  # sent with each 429 and 503 of the script
    in_flight: int = 0  # requests being answered now
    most_in_flight: int = 0  # the most at once, ever
    arrived_at: list[float] = field(default_factory=list)  # time.monotonic() of each request

    def held_count(self) -> int:
        """Requests that waited for `hold` (with `hold_every_other`, the even ones of each path)."""
        with self.lock:
            counts = self.requests_per_path.values()
            return sum(count // 2 for count in counts) if self.hold_every_other else sum(counts)

    def ids(self) -> list[str]:
        with self.lock:
            return [request.headers["webhook-id"] for request in self.received]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            problems = payload_problems(body)
            with receiver.lock:
                receiver.invalid.extend(problems)
                receiver.received.append(
                    Received(self.path, {key.lower(): value for key, value in self.headers.items()}, body)
                )
                receiver.arrived_at.append(time.monotonic())
                status = receiver.script.pop(0) if receiver.script else 200
                seen = receiver.requests_per_path[self.path] = (
                    receiver.requests_per_path.get(self.path, 0) + 1
                )
                receiver.in_flight += 1
                receiver.most_in_flight = max(receiver.most_in_flight, receiver.in_flight)
                quick = len(receiver.received) <= receiver.hold_after
            receiver.arrived.set()
            try:
                if receiver.hold is not None and not quick and not (receiver.hold_every_other and seen % 2):
                    receiver.hold.wait(timeout=60)
            finally:
                with receiver.lock:
                    receiver.in_flight -= 1
            self.send_response(status)
            if status in (429, 503) and receiver.retry_after is not None:
                self.send_header("retry-after", receiver.retry_after)
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
    assert not receiver.invalid, "bodies that do not match the document's webhooks:\n" + "\n".join(
        receiver.invalid[:10]
    )
