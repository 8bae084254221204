"""Payment endpoints. HTTP only: parse, call the service, wrap the answer."""

from __future__ import annotations

from fastapi import APIRouter

# Under /api/v2: the client endpoints and the gateways' webhooks.
router = APIRouter(tags=["payments"])
# At the root, outside the API: the sandbox gateway's checkout pages.
sandbox_router = APIRouter(tags=["sandbox gateway"], include_in_schema=False)
