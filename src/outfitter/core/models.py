"""Kept only for `core.idempotency`, which still imports IdempotencyRecord from here: the tables
live in `outfitter.models`. Delete this file once that import names `outfitter.models`."""

from outfitter.models.tenants import IdempotencyRecord

__all__ = ["IdempotencyRecord"]
