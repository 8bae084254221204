"""Prometheus metrics, with prometheus-client in its multiprocess mode: every process (each server
process of `serve --workers N`, the embedded worker, an `outfitter worker` given the same
directory) writes its counts to memory-mapped files in one directory, and a scrape of `/metrics`
on any server process sums them all (docs/operations.md, "Metrics").

Off until `enable` is called (`OUTFITTER_METRICS_TOKEN` set): until then `active` is None and every
recording site costs one global read. Once on, a request costs a dictionary lookup and three
writes to the mapped file (its count, its histogram bucket and sum): children of labelled metrics
are kept here by their labels, so `labels()` (a lock and a validation) runs once per combination.

What is a state rather than a count (the webhook queue's depth, the workers alive) is read from
the database at scrape time by a collector of the scraping process (`worker.status`), not
counted on the way.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, values
from prometheus_client import multiprocess as prometheus_multiprocess

DIRECTORY_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
# Seconds: from a hot read (a few ms) to a 10,000-row import.
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
UNMATCHED_ROUTE = "(unmatched)"
# The payment status each transaction event announces.
PAYMENT_STATUS_OF_EVENT = {
    "transaction.initiated": "Pending",
    "transaction.fulfilled": "Fulfilled",
    "transaction.failed": "Failed",
    "transaction.expired": "Expired",
}


class Metrics:
    """This process's metrics; `active` holds the one instance once enabled."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.requests = Counter(
            "outfitter_http_requests",
            "Requests answered, by method, route template and status",
            ["method", "route", "status"],
            registry=None,
        )
        self.request_seconds = Histogram(
            "outfitter_http_request_duration_seconds",
            "Time from a request's arrival to the end of its answer, by method and route template",
            ["method", "route"],
            buckets=REQUEST_BUCKETS,
            registry=None,
        )
        self.scim_requests = Counter(
            "outfitter_scim_requests",
            "Requests to /scim/v2, by method and status",
            ["method", "status"],
            registry=None,
        )
        self.rate_limited = Counter(
            "outfitter_rate_limit_refusals",
            "Requests refused with 429, by budget (api or scim)",
            ["budget"],
            registry=None,
        )
        self.pool_in_use = Gauge(
            "outfitter_db_pool_connections_in_use",
            "Database connections checked out of the server processes' and workers' pools",
            registry=None,
            multiprocess_mode="livesum",
        )
        self.pool_capacity = Gauge(
            "outfitter_db_pool_connections_capacity",
            "Connections the live processes' pools may hold (size plus overflow)",
            registry=None,
            multiprocess_mode="livesum",
        )
        self.pool_exhausted = Counter(
            "outfitter_db_pool_exhausted",
            "Checkouts that took a pool's last free connection: whoever asks next waits",
            registry=None,
        )
        self.pool_timeouts = Counter(
            "outfitter_db_pool_wait_timeouts",
            "Waits for a connection that ran out (OUTFITTER_DB_POOL_TIMEOUT) and were answered 503",
            registry=None,
        )
        self.events = Counter(
            "outfitter_events_written",
            "Activity-log events committed, by type",
            ["type"],
            registry=None,
        )
        self.payments = Counter(
            "outfitter_payments",
            "Payments (transactions) entering each status: Pending when initiated, then settled",
            ["status"],
            registry=None,
        )
        self.deliveries = Counter(
            "outfitter_webhook_deliveries",
            "Webhook delivery attempts by outcome: succeeded, failed (to be retried or given up), gone (410)",
            ["outcome"],
            registry=None,
        )
        self.endpoint_failures = Counter(
            "outfitter_webhook_endpoint_failures",
            "Failed webhook delivery attempts, by endpoint",
            ["endpoint"],
            registry=None,
        )
        self._request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}
        self._children: dict[tuple[Any, ...], Any] = {}

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, status)
        children = self._request_children.get(key)
        if children is None:
            children = (
                self.requests.labels(method, route, str(status)),
                self.request_seconds.labels(method, route),
            )
            self._request_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def count(self, metric: Counter, *labels: str, amount: float = 1) -> None:
        """`metric{labels}` += amount."""
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        child.inc(amount)

    def delivery(self, outcome: str, endpoint: str) -> None:
        """One delivery attempt's outcome ("succeeded", "failed", "gone"); a failure also counts
        against its endpoint."""
        self.count(self.deliveries, outcome)
        if outcome != "succeeded":
            self.count(self.endpoint_failures, endpoint)

    def events_written(self, types: Iterable[tuple[str, int]]) -> None:
        for type, amount in types:
            self.count(self.events, type, amount=amount)
            status = PAYMENT_STATUS_OF_EVENT.get(type)
            if status is not None:
                self.count(self.payments, status, amount=amount)

    def render(self, collectors: Iterable[Any] = ()) -> bytes:
        """The text exposition of every process's metrics (and `collectors`', read now)."""
        self.forget_dead_processes()
        registry = CollectorRegistry()
        prometheus_multiprocess.MultiProcessCollector(registry, path=self.directory)  # type: ignore[no-untyped-call]
        for collector in collectors:
            registry.register(collector)
        return generate_latest(registry)

    def forget_dead_processes(self) -> None:
        """Drop the live gauges of processes gone without `process_ended` (a killed server process,
        which its supervisor replaces): else the pool capacity would count them for ever."""
        for entry in os.scandir(self.directory):
            if not (entry.name.startswith("gauge_live") and entry.name.endswith(".db")):
                continue
            pid = entry.name.rpartition("_")[2].removesuffix(".db")
            if pid.isdigit() and not _alive(int(pid)):
                self.process_ended(int(pid))

    def process_ended(self, pid: int | None = None) -> None:
        """Drop a process's live gauges (its pool), its counts kept: at a server process's end."""
        prometheus_multiprocess.mark_process_dead(pid or os.getpid(), self.directory)  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # no signal sent: only whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


active: Metrics | None = None
_made_directory: str | None = None


def enable(directory: str | None = None) -> Metrics:
    """Turn metrics on in this process (idempotent: the first call's directory stays). The
    directory is, in order: `directory`, PROMETHEUS_MULTIPROC_DIR (set by `outfitter serve` for the
    processes it starts), or a new temporary one removed at exit."""
    global active, _made_directory
    if active is not None:
        return active
    chosen = directory or os.environ.get(DIRECTORY_VARIABLE)
    if not chosen:
        chosen = _made_directory = tempfile.mkdtemp(prefix="outfitter-metrics-")
        import atexit

        atexit.register(shutil.rmtree, chosen, True)
    os.makedirs(chosen, exist_ok=True)
    os.environ[DIRECTORY_VARIABLE] = chosen  # read by prometheus-client when it opens a file
    if not getattr(values.ValueClass, "_multiprocess", False):
        # Chosen by prometheus-client when it was imported, before the variable was set here.
        values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]
    active = Metrics(chosen)
    return active


def clear_directory(directory: str) -> None:
    """Remove a previous run's files (a directory kept between runs would add to its counts)."""
    for entry in os.scandir(directory):
        if entry.is_file() and entry.name.endswith(".db"):
            os.remove(entry.path)


def record(action: Callable[[Metrics], None]) -> None:
    """Run `action` on the metrics if they are on (for rare events; hot paths read `active`)."""
    if active is not None:
        action(active)
