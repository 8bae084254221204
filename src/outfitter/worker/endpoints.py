"""What a worker knows of the endpoints it sends to: which are slow (`SlowEndpoints`), and how many
sends each may have in flight (`Limit`). Pure, like the policy that uses them
(`worker.scheduling`, whose docstring has the rules): every `now` is the caller's monotonic time."""

from __future__ import annotations

import math
import uuid
from collections.abc import Collection
from dataclasses import dataclass

# A slow endpoint stays slow this long after its last slow send, however quickly it answers the
# others meanwhile: one slow one time in two is slow (its slow sends would take the places again).
SLOW_MEMORY = 30.0


class SlowEndpoints:
    """The endpoints this worker knows to be slow, each with its company: one is slow once a send
    to it has been in flight SLOW_AFTER, until a send to it ends sooner SLOW_MEMORY after its last
    slow one. A mark neither renewed (by another slow send) nor needed (nothing held for it) for a
    lease's time is forgotten, so the marks stay as few as the endpoints slow lately."""

    def __init__(self, now: float) -> None:
        self._marks: dict[uuid.UUID, tuple[uuid.UUID, float]] = {}  # endpoint -> company, when
        self._swept = now

    def __contains__(self, endpoint: uuid.UUID) -> bool:
        return endpoint in self._marks

    def mark(self, endpoint: uuid.UUID, company: uuid.UUID, now: float) -> None:
        self._marks[endpoint] = (company, now)

    def answered_quickly(self, endpoint: uuid.UUID, now: float) -> None:
        mark = self._marks.get(endpoint)
        if mark is not None and now - mark[1] >= SLOW_MEMORY:
            del self._marks[endpoint]

    def company_of(self, endpoint: uuid.UUID) -> uuid.UUID | None:
        mark = self._marks.get(endpoint)
        return mark[0] if mark else None

    def of_companies(self, companies: Collection[uuid.UUID]) -> list[uuid.UUID]:
        return [endpoint for endpoint, (company, _) in self._marks.items() if company in companies]

    def forget_idle(self, held: Collection[uuid.UUID], after: float, now: float) -> bool:
        """Answers whether it swept (once per `after`: the marks' size, not a claim's)."""
        if now - self._swept < after:
            return False
        self._swept = now
        self._marks = {
            endpoint: mark
            for endpoint, mark in self._marks.items()
            if endpoint in held or now - mark[1] < after
        }
        return True


@dataclass
class Limit:
    """An endpoint's own limit on its sends in flight: the concurrency its company set, and the
    window that its answers move (see the module's docstring)."""

    configured: int
    window: int
    decreased_at: float = -math.inf  # sends started before this do not halve the window again
    paused_until: float = -math.inf
    slow_downs: int = 0  # 429s and 503s without a 2xx between them
    quick: bool = False  # it answered a 2xx quickly since its window last halved: it may borrow

    @property
    def most(self) -> int:
        return max(1, min(self.configured, self.window))
