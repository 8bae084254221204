"""ASGI entry point for servers: `uvicorn outfitter.asgi:app` (a process that serves only it)."""

from outfitter.app import create_app
from outfitter.server import frozen_after_startup

app = frozen_after_startup(create_app())
