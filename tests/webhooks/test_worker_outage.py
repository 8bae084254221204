"""The worker's log while its database is out of reach: a line a minute, not a stack trace a poll."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy import Engine

from outfitter.config import Settings
from outfitter.db.session import make_engine
from outfitter.worker import deliveries, outages
from tests.webhooks.conftest import make_worker

CLAIM_FAILED = "claiming deliveries failed; retrying shortly: the database is unavailable: OperationalError: "


def test_an_outage_is_a_warning_a_minute_without_a_stack_trace(
    webhook_settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(outages.time, "monotonic", lambda: clock[0])
    unreachable = make_engine(f"sqlite:///{tmp_path / 'no such directory' / 'outfitter.db'}")
    worker = make_worker(unreachable, webhook_settings)
    try:
        with caplog.at_level(logging.INFO, logger="outfitter.worker"):
            for _ in range(3):  # three polls, each failing to claim
                assert worker.run_once(jobs=False) == 0
            clock[0] += outages.WARN_EVERY_SECONDS
            worker.run_once(jobs=False)
    finally:
        worker.close()
        unreachable.dispose()
    lines = [(record.levelname, record.getMessage(), record.exc_info) for record in caplog.records]
    assert len(lines) == 2, lines
    (first_level, first, first_trace), (second_level, second, second_trace) = lines
    assert first_level == second_level == "WARNING" and first_trace is None and second_trace is None
    assert first == CLAIM_FAILED + "(sqlite3.OperationalError) unable to open database file"
    assert second == first + " (2 more such failures since the last line)"


def test_a_failure_no_outage_explains_keeps_its_stack_trace(
    webhook_settings: Settings,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def claim_with_a_bug(*_args: object) -> None:
        raise RuntimeError("a bug in the claim")

    monkeypatch.setattr(deliveries, "claim_deliveries", claim_with_a_bug)
    worker = make_worker(engine, webhook_settings)
    try:
        with caplog.at_level(logging.INFO, logger="outfitter.worker"):
            for _ in range(2):  # each time, however often
                worker.run_once(jobs=False)
    finally:
        worker.close()
    assert [(record.levelname, record.getMessage()) for record in caplog.records] == [
        ("ERROR", "claiming deliveries failed; retrying shortly")
    ] * 2
    assert all(
        record.exc_info and str(record.exc_info[1]) == "a bug in the claim" for record in caplog.records
    )
