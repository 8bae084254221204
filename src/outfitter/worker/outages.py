"""The worker's log while the database is out of reach: one line, not a stack trace per poll."""

from __future__ import annotations

import logging
import sys
import threading
import time

from outfitter.core.errors import outage_detail
from outfitter.http.handlers import outage_message

logger = logging.getLogger("outfitter.worker")

# An outage goes on being reported, but a line a minute says all there is to say.
WARN_EVERY_SECONDS = 60.0


class FailureLog:
    """Logs what the worker failed to do. A failure the database's outage explains (as the API's
    503s judge it: `http.handlers.outage_message`) is one warning line without a stack trace, at
    most one a minute: every poll of every loop fails alike, and a ten-second outage wrote 1,469
    lines. Any other failure is a bug worth its stack trace, every time. Shared by the delivery
    loop and the jobs' thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._warned_at = -WARN_EVERY_SECONDS
        self._unreported = 0

    def failed(self, what: str) -> None:
        """Call from an `except` block; `what` says what failed and what happens next."""
        error = sys.exception()
        if error is None or outage_message(error) is None:
            logger.exception(what)
            return
        now = time.monotonic()
        with self._lock:
            if now - self._warned_at < WARN_EVERY_SECONDS:
                self._unreported += 1
                return
            self._warned_at, unreported, self._unreported = now, self._unreported, 0
        since = f" ({unreported} more such failures since the last line)" if unreported else ""
        logger.warning("%s: the database is unavailable: %s%s", what, outage_detail(error), since)
