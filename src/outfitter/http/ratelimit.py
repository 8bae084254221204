"""Per-token rate limits with the `limits` library: in memory, or shared through Redis.

A budget is one or more windows (`100/second;3000/minute`): a burst up to the shortest window's
amount, and a sustained rate bounded by the longest one. A request must fit every window; the
headers describe the window closest to refusing it, and `RateLimit-Policy` names them all.

A token's limit is keyed by its digest (`tokens.hash_token`), known before the database is asked,
so the limit is applied before the request takes a connection or opens a transaction: a slow Redis
holds nothing of the database's. An unknown token is limited like any other, then refused (401).

Redis out of reach fails open: the request is served without a limit, a warning is logged at most
once a minute, and Redis is not asked again for a few seconds, so an outage costs no request more
than one short timeout."""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from limits import RateLimitItem, parse_many
from limits.errors import StorageError
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

from outfitter.core import metrics
from outfitter.core.errors import RateLimited

REDIS_TIMEOUT_SECONDS = 0.25
RETRY_REDIS_AFTER_SECONDS = 5.0
WARN_EVERY_SECONDS = 60.0

logger = logging.getLogger("outfitter")


class RateLimiter:
    def __init__(self, rule: str, redis_url: str | None, budget: str = "api") -> None:
        self.budget = budget  # the metrics' label of its refusals
        self.items: list[RateLimitItem] = [] if rule.strip().lower() == "off" else parse_many(rule)
        self.policy = ", ".join(f"{item.amount};w={item.get_expiry()}" for item in self.items)
        self.shared = redis_url is not None
        if redis_url:
            storage = storage_from_string(
                redis_url,
                wrap_exceptions=True,
                socket_timeout=REDIS_TIMEOUT_SECONDS,
                socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
            )
        else:
            storage = storage_from_string("memory://")
        self.storage = storage
        self.strategy = MovingWindowRateLimiter(storage)
        self._skip_until = 0.0
        self._warned_at = -WARN_EVERY_SECONDS

    @property
    def enabled(self) -> bool:
        return bool(self.items)

    def storage_state(self) -> str:
        """For /readyz: "ok", "unreachable", or "not configured" without Redis."""
        if not self.shared:
            return "not configured"
        try:
            return "ok" if self.storage.check() else "unreachable"
        except Exception:
            return "unreachable"

    def hit(self, request_state: dict[str, Any], key: str) -> None:
        if not self.items or time.monotonic() < self._skip_until:
            return
        try:
            windows = [(item, self.strategy.hit(item, "token", key)) for item in self.items]
            stats = [
                (item, allowed, self.strategy.get_window_stats(item, "token", key))
                for item, allowed in windows
            ]
        except StorageError as exc:
            self._fail_open(exc)
            return
        now = time.time()
        # The window that refused, else the one with the least room left.
        item, allowed, window = min(stats, key=lambda entry: (entry[1], entry[2].remaining / entry[0].amount))
        reset_in = max(0, math.ceil(window.reset_time - now))
        # Read by the request-context middleware, which puts them on whatever response goes out.
        request_state["rate_limit_headers"] = {
            "RateLimit-Limit": str(item.amount),
            "RateLimit-Remaining": str(window.remaining),
            "RateLimit-Reset": str(reset_in),
            "RateLimit-Policy": self.policy,
        }
        if not allowed:
            if metrics.active is not None:
                metrics.active.count(metrics.active.rate_limited, self.budget)
            retry_after = str(max(1, reset_in))
            raise RateLimited(
                f"Rate limit of {item.amount} requests per {_period(item)} exceeded; retry in "
                f'{retry_after} seconds (the Retry-After header). Budgets: docs/api.md, "Rate limits".',
                headers={"Retry-After": retry_after},
            )

    def _fail_open(self, exc: StorageError) -> None:
        now = time.monotonic()
        self._skip_until = now + RETRY_REDIS_AFTER_SECONDS
        if now - self._warned_at >= WARN_EVERY_SECONDS:
            self._warned_at = now
            logger.warning("rate limits are off while Redis is unreachable: %s", exc)


def _period(item: RateLimitItem) -> str:
    seconds = item.get_expiry()
    return "second" if seconds == 1 else f"{seconds} seconds"
