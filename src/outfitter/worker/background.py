"""The worker embedded in `outfitter serve`: a thread of the server's process."""

from __future__ import annotations

import logging
import threading

from outfitter.config import Settings
from outfitter.db.session import make_engine, make_sessionmaker
from outfitter.db.tenancy import TenantSession
from outfitter.worker.loop import DATABASE_THREADS, Worker

logger = logging.getLogger("outfitter.worker")


class BackgroundWorker:
    """A worker in a thread of this process, with its own engine (`outfitter serve`'s embedded one)."""

    def __init__(self, settings: Settings) -> None:
        # The database threads and the jobs' thread: the sends themselves hold no connection.
        self.engine = make_engine(settings.database_url, pool_size=DATABASE_THREADS + 2, max_overflow=0)
        self.worker = Worker(make_sessionmaker(self.engine, TenantSession), settings)
        self.thread = threading.Thread(target=self._run, name="outfitter-worker", daemon=True)

    def _run(self) -> None:
        try:
            self.worker.run_forever()
        except Exception:
            logger.exception("the embedded worker stopped")

    def stop(self) -> None:
        """Idempotent: the server calls it on its way out, whichever way that is."""
        self.worker.stop()
        if self.thread.is_alive():
            self.thread.join(timeout=self.worker.shutdown_grace + 5)
        self.engine.dispose()


def start_in_background(settings: Settings) -> BackgroundWorker:
    background = BackgroundWorker(settings)
    background.thread.start()
    return background
