"""People endpoints. HTTP only: parse, call the service, wrap the answer."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/client", tags=["people"])
