"""csvio.writer.stream_chunks: the next chunk is read in a thread of its own while this one is
rendered, each read in a session of its own that is closed before the rows are rendered; at most
one chunk is read ahead, and a client that stops reading stops the reads without waiting for them."""

from __future__ import annotations

import threading
from collections.abc import Generator, Sequence
from typing import Any

import pytest

from outfitter.csvio.writer import stream_chunks


class Sessions:
    """Stands in for the export's session factory: counts what is opened and closed."""

    def __init__(self) -> None:
        self.opened = 0
        self.closed = 0

    def __call__(self) -> Sessions:
        self.opened += 1
        return self

    def __enter__(self) -> Sessions:
        return self

    def __exit__(self, *_: Any) -> None:
        self.closed += 1


def numbered(last_chunk: int, reads: list[tuple[int | None, str]], sessions: Sessions) -> Any:
    def read(session: Any, after: int | None) -> tuple[list[int], int | None]:
        assert session.opened == session.closed + 1  # read inside its own open session
        reads.append((after, threading.current_thread().name))
        number = 0 if after is None else after + 1
        return [number * 10, number * 10 + 1], (number if number < last_chunk else None)

    return read


def render(rows: Sequence[int]) -> str:
    return "".join(f"{row}\n" for row in rows)


def test_every_chunk_in_order_each_read_ahead_in_a_session_of_its_own() -> None:
    sessions, reads = Sessions(), list[tuple[int | None, str]]()
    chunks = list(stream_chunks(sessions, numbered(3, reads, sessions), render))  # type: ignore[arg-type]
    assert chunks == ["0\n1\n", "10\n11\n", "20\n21\n", "30\n31\n"]
    assert [after for after, _ in reads] == [None, 0, 1, 2]
    assert all(name.startswith("outfitter-export") for _, name in reads)
    assert sessions.opened == sessions.closed == 4


def test_a_client_that_stops_reading_stops_the_reads() -> None:
    sessions, reads = Sessions(), list[tuple[int | None, str]]()
    chunks = stream_chunks(sessions, numbered(1000, reads, sessions), render)  # type: ignore[arg-type]
    assert isinstance(chunks, Generator)
    assert next(chunks) == "0\n1\n"
    assert next(chunks) == "10\n11\n"
    chunks.close()  # the response stopped: the read ahead is dropped or ends on its own
    for thread in threading.enumerate():
        if thread.name.startswith("outfitter-export"):
            thread.join(timeout=10)
    # the two chunks taken, and at most the one read ahead; every session closed
    assert [after for after, _ in reads][:2] == [None, 0] and len(reads) <= 3
    assert sessions.opened == sessions.closed == len(reads)


def test_a_failing_read_is_raised_where_the_chunks_are_taken() -> None:
    def read(_session: Any, after: int | None) -> tuple[list[int], int | None]:
        if after is not None:
            raise RuntimeError("the database went away")
        return [1], 0

    chunks = stream_chunks(Sessions(), read, render)  # type: ignore[arg-type]
    assert next(chunks) == "1\n"
    with pytest.raises(RuntimeError, match="went away"):
        next(chunks)
