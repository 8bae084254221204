"""`outfitter status`: the webhook queue, the workers alive, how late they are, the failing endpoints."""

from __future__ import annotations

from typing import Any

from outfitter.cli.common import JsonFlag, app, emit, iso_or_none, unit_of_work


@app.command("status")
def status(as_json: JsonFlag = False) -> None:
    """The webhook queue (pending, due, oldest, lag), the workers alive (each beats every few
    seconds) and the endpoints failing now."""
    from outfitter.config import get_settings
    from outfitter.db.base import utcnow
    from outfitter.worker.status import ALIVE_SECONDS, failing_endpoints, queue_state, workers

    threshold = get_settings().worker_lag_threshold_seconds
    with unit_of_work() as session:
        now = utcnow()
        queue = queue_state(session, now)
        known = workers(session, now)
        failing = failing_endpoints(session)
    alive = [worker for worker in known if worker.alive]
    payload: dict[str, Any] = {
        "queue": {
            "pending": queue.depth,
            "due": queue.due,
            "oldest_age_seconds": _rounded(queue.oldest_age),
            "lag_seconds": _rounded(queue.lag),
            "behind": queue.behind(threshold),
        },
        "workers": [
            {
                "name": worker.name,
                "host": worker.host,
                "pid": worker.pid,
                "started_at": iso_or_none(worker.started_at),
                "beat_at": iso_or_none(worker.beat_at),
                "alive": worker.alive,
            }
            for worker in known
        ],
        "workers_alive": len(alive),
        "failing_endpoints": [
            {
                "id": str(endpoint.id),
                "company_id": str(endpoint.company_id),
                "url": endpoint.url,
                "failing_since": iso_or_none(endpoint.failing_since),
                "pending": endpoint.pending,
                "last_error": endpoint.last_error,
            }
            for endpoint in failing
        ],
    }
    lines = [
        f"queue: {queue.depth} pending, {queue.due} due, oldest {_age(queue.oldest_age)}, "
        f"lag {_age(queue.lag)}" + (f" (behind: over {threshold:g} s)" if queue.behind(threshold) else ""),
        f"workers alive: {len(alive)} (a beat within {ALIVE_SECONDS:g} s)",
    ]
    lines += [
        f"  {worker.name} pid {worker.pid} on {worker.host}, "
        f"{'alive' if worker.alive else 'silent'} (last beat {iso_or_none(worker.beat_at)})"
        for worker in known
    ]
    lines.append(f"failing endpoints: {len(failing)}")
    lines += [
        f"  {endpoint.id} {endpoint.url} (company {endpoint.company_id}): failing since "
        f"{iso_or_none(endpoint.failing_since)}, {endpoint.pending} pending; last error: "
        f"{endpoint.last_error or '-'}"
        for endpoint in failing
    ]
    emit(as_json, payload, "\n".join(lines))


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.0f} s"
