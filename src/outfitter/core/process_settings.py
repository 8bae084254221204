"""Process-wide settings that batch work changes while it runs, and puts back when the last batch
under way in the process ends (several requests may run batches at once, in threads):

- `collection_paused`: the cyclic garbage collector off while a batch builds its rows;
- `switching_often`: the GIL handed over every 0.5 ms instead of Python's 5 ms, while one thread
  waits on the database's socket and another works in Python.
"""

from __future__ import annotations

import functools
import gc
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

# How often the GIL changes hands (seconds) while a thread streams to or from the database and
# another works in Python (Python's default is 5 ms). The streaming thread needs the GIL for every
# chunk it sends or receives, and waited up to 5 ms each time: a bulk registration's writer left
# the server idle (47 ms for 1,000 devices against 39), an export's reader made it slower than
# reading in turn (2.2-2.6 s for 100,000 rows against 1.6-2.0).
STREAMING_SWITCH_INTERVAL = 0.0005


class _WhileAnyBatch:
    """A process-wide setting changed by the first batch under way in the process (`hold` changes
    it and answers how to put it back) and put back when the last one ends."""

    def __init__(self, hold: Callable[[], Callable[[], None]]) -> None:
        self._hold = hold
        self._batches = 0
        self._put_back: Callable[[], None] = _nothing
        self._lock = threading.Lock()

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            if self._batches == 0:
                self._put_back = self._hold()
            self._batches += 1
        try:
            yield
        finally:
            with self._lock:
                self._batches -= 1
                if self._batches == 0:
                    self._put_back()


def _nothing() -> None:
    pass


def _collector_off() -> Callable[[], None]:
    was_enabled = gc.isenabled()
    gc.disable()
    return gc.enable if was_enabled else _nothing


def _switching_often() -> Callable[[], None]:
    interval = sys.getswitchinterval()
    sys.setswitchinterval(STREAMING_SWITCH_INTERVAL)
    return functools.partial(sys.setswitchinterval, interval)


_collection = _WhileAnyBatch(_collector_off)
_switching = _WhileAnyBatch(_switching_often)


def collection_paused() -> AbstractContextManager[None]:
    """Hold the cyclic garbage collector off while a batch builds its rows and answers. Those are
    hundreds of thousands of live objects, none of them cyclic garbage (reference counting frees
    them), and every full collection would walk them all again: a fifth of a 10,000-row import's
    CPU. The collector runs again once the last batch under way in the process has ended."""
    return _collection.held()


def switching_often() -> AbstractContextManager[None]:
    """Hand the GIL over every STREAMING_SWITCH_INTERVAL while a thread streams rows to or from
    the database beside one working in Python; Python's interval again once the last ends."""
    return _switching.held()
