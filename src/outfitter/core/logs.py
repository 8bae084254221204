"""Logs as JSON lines (`OUTFITTER_LOG_FORMAT=json`): one object per record, for a log collector.

Every record has `time` (ISO 8601 UTC, milliseconds), `level`, `logger` and `message`, the request
id and trace id of the request it was written for (if any), the fields passed in `extra=` by the
request log (`outfitter.access`: `method`, `route`, `status`, `duration_ms`, `company_id`,
`token_id`) and, for an error, its stack trace in `exception`. Never a body, a query string or a
secret: the request log names the route template, not the path.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

# Fields of the request log, copied from a record when present.
REQUEST_FIELDS = ("method", "route", "status", "duration_ms", "company_id", "token_id")
ACCESS_LOGGER = "outfitter.access"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        from outfitter.core.tracing import current_request_id, current_trace_id

        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None) or current_request_id.get()
        if request_id and request_id != "-":
            line["request_id"] = request_id
        trace_id = getattr(record, "trace_id", None) or current_trace_id.get()
        if trace_id:
            line["trace_id"] = trace_id
        for name in REQUEST_FIELDS:
            if hasattr(record, name):
                line[name] = getattr(record, name)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def json_handler(stream: Any = None) -> logging.Handler:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    return handler


def log_as_json(*names: str) -> None:
    """Give the loggers `names` one JSON handler on stderr (once) in place of their own, for a
    process whose logging `outfitter serve` does not configure (`uvicorn outfitter.asgi:app`,
    `outfitter worker`)."""
    for name in names:
        logger = logging.getLogger(name)
        if any(isinstance(handler.formatter, JsonFormatter) for handler in logger.handlers):
            continue
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.addHandler(json_handler())
        logger.setLevel(logging.INFO)
        logger.propagate = False
