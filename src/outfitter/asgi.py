"""ASGI entry point for servers: `uvicorn outfitter.asgi:app` (a process that serves only it).

It starts only on a database at this release's schema (one line in uvicorn's log otherwise), and
freezes its start-up heap out of the garbage collector's walks, as `outfitter serve` does."""

from outfitter.app import create_app
from outfitter.config import get_settings
from outfitter.core.logs import log_as_json
from outfitter.server.lifetime import CurrentSchemaRequired, frozen_after_startup

if get_settings().log_format == "json":  # uvicorn's own lines keep its format (its --log-config)
    log_as_json("outfitter")

app = CurrentSchemaRequired(frozen_after_startup(create_app()))
