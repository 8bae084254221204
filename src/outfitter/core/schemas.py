"""Response shapes and field types that every domain shares: the envelope, pages, timestamps, money."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, PlainSerializer

T = TypeVar("T")


def format_timestamp(value: datetime) -> str:
    """ISO 8601 UTC with microseconds, the form the interface shows: 2024-05-01T09:30:00.000000Z."""
    if value.utcoffset():
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


Timestamp = Annotated[datetime, PlainSerializer(format_timestamp, return_type=str)]
DecimalString = Annotated[Decimal, PlainSerializer(lambda value: format(value, "f"), return_type=str)]
DecimalNumber = Annotated[Decimal, PlainSerializer(float, return_type=float)]


class Schema(BaseModel):
    model_config = ConfigDict(from_attributes=True, populate_by_name=True)


class Envelope(Schema, Generic[T]):
    success: bool = True
    message: str
    data: T


class Page(Schema, Generic[T]):
    data: list[T]
    total: int
    per_page: int
    current_page: int
    last_page: int


class ErrorEnvelope(Schema):
    success: bool = False
    message: str
    data: None = None
    errors: dict[str, list[str]] | None = None


def ok(data: Any, message: str) -> dict[str, Any]:
    return {"success": True, "message": message, "data": data}


_ERROR_DESCRIPTIONS = {
    400: "Malformed JSON",
    401: "Missing, unknown, expired or revoked token",
    402: "Not enough wallet credit",
    403: "The token lacks the scope",
    404: "Not found (or another company's)",
    409: "Conflicts with the current state",
    413: "Body over the size limit",
    415: "Body is not JSON",
    422: "Validation failed; `errors` maps each field path to its messages",
    429: "Rate limited; see Retry-After",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI error responses for an endpoint; authentication and rate limiting apply to every one."""
    wanted = sorted({401, 403, 429, *codes})
    return {code: {"model": ErrorEnvelope, "description": _ERROR_DESCRIPTIONS[code]} for code in wanted}
