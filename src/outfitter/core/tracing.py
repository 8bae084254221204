"""W3C trace context (https://www.w3.org/TR/trace-context/): the trace a request belongs to, carried
to the events it records and the webhook deliveries they cause, so that an operator can follow one
change to its webhooks (docs/operations.md, "Tracing a change").

A request's trace is the one its `traceparent` header names when the header is well formed, else a
new one; the request-context middleware sets `current_trace_id` for the request's task (and so for
its worker thread, which runs in a copy of that context). The outbox stores it with each event and
delivery; the worker sends `traceparent` with the same trace id and a span id of the attempt's own.
"""

from __future__ import annotations

import contextvars
import os
import re

# version 00: "00-" 32 hex (trace id) "-" 16 hex (parent id) "-" 2 hex (flags); a later version may
# append fields after a dash, which a reader of version 00 ignores. Lower-case hex only.
_TRACEPARENT = re.compile(rb"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_ZERO_TRACE = "0" * 32
_ZERO_PARENT = b"0" * 16

# The request id of the request this task serves (`http.middleware` sets it): the access line
# (outfitter.server) is written from within the response's `send`, where only this tells it which
# request it is, and a JSON log line (core.logs) carries it.
current_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
current_trace_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("trace_id", default=None)


def trace_id_of(header: bytes | None) -> str | None:
    """The trace id of a `traceparent` header, or None when it is absent or malformed (version
    ff, an all-zero id, a version 00 header with more fields: the specification says to ignore it)."""
    if not header:
        return None
    found = _TRACEPARENT.match(header.strip())
    if found is None:
        return None
    version, trace, parent, _flags, rest = found.groups()
    if version == b"ff" or (version == b"00" and rest) or parent == _ZERO_PARENT:
        return None
    trace_id = trace.decode()
    return None if trace_id == _ZERO_TRACE else trace_id


def new_trace_id() -> str:
    return os.urandom(16).hex()


def traceparent(trace_id: str) -> str:
    """The header for a call made within `trace_id`: a new span id of its own, sampled."""
    return f"00-{trace_id}-{os.urandom(8).hex()}-01"
