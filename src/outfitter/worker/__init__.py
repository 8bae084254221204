"""The worker: what runs outside requests (webhook deliveries and their retries, expiring Pending
transactions, reconciling card payments, folding the activity log's count deltas). `outfitter
worker` runs one; `outfitter serve` runs one in-process unless OUTFITTER_EMBEDDED_WORKER=false. Any
number share the work through the database."""

from outfitter.worker.background import start_in_background
from outfitter.worker.loop import Worker

__all__ = ["Worker", "start_in_background"]
