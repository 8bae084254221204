"""Per-token rate limits with the `limits` library: in memory, or shared through Redis."""

from __future__ import annotations

import math
import time
from typing import Any

from limits import RateLimitItem, parse
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

from outfitter.core.errors import RateLimited


class RateLimiter:
    def __init__(self, rule: str, redis_url: str | None) -> None:
        self.item: RateLimitItem | None = None if rule.strip().lower() == "off" else parse(rule)
        storage = storage_from_string(redis_url if redis_url else "memory://")
        self.strategy = MovingWindowRateLimiter(storage)

    def hit(self, request_state: dict[str, Any], key: str) -> None:
        if self.item is None:
            return
        allowed = self.strategy.hit(self.item, "token", key)
        stats = self.strategy.get_window_stats(self.item, "token", key)
        reset_in = max(0, math.ceil(stats.reset_time - time.time()))
        # Read by the request-context middleware, which puts them on whatever response goes out.
        request_state["rate_limit_headers"] = {
            "RateLimit-Limit": str(self.item.amount),
            "RateLimit-Remaining": str(stats.remaining),
            "RateLimit-Reset": str(reset_in),
        }
        if not allowed:
            raise RateLimited(
                f"Rate limit of {self.item.amount} requests per {self.item.get_expiry()} seconds "
                f"exceeded; retry in {max(1, reset_in)} seconds.",
                headers={"Retry-After": str(max(1, reset_in))},
            )
