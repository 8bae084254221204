"""ASGI entry point for servers: `uvicorn outfitter.asgi:app`."""

from outfitter.app import create_app

app = create_app()
