"""Typed domain errors. Each carries its HTTP status and a sentence a person can act on;
one handler (http.handlers) renders them all as the error envelope."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar


class DomainError(Exception):
    status_code: ClassVar[int] = 400

    def __init__(
        self,
        message: str,
        *,
        errors: Mapping[str, Sequence[str]] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.errors = {key: list(value) for key, value in errors.items()} if errors else None
        self.headers = dict(headers) if headers else None


# 503 for a database that cannot be reached and for a pool with no free connection: both pass, so
# the client is told to come back. Retry-After is in seconds.
RETRY_AFTER_SECONDS = 2
DATABASE_UNAVAILABLE = "The database is unavailable right now; retry in a few seconds."
POOL_EXHAUSTED = "Every database connection is busy right now; retry in a few seconds."
WRITES_CROSSED = (
    "This request and a concurrent one each waited on the other; this one was undone and nothing "
    "was written: send it again."
)


class BadRequest(DomainError):
    status_code = 400


class Unauthorized(DomainError):
    status_code = 401

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"WWW-Authenticate": 'Bearer realm="outfitter"'})


class InsufficientCredit(DomainError):
    status_code = 402


class Forbidden(DomainError):
    status_code = 403


class NotFound(DomainError):
    status_code = 404

    @classmethod
    def record(cls, what: str) -> NotFound:
        # The same words whether the record never existed or belongs to another company.
        return cls(f"{what} not found.")


class Conflict(DomainError):
    status_code = 409


class PayloadTooLarge(DomainError):
    status_code = 413


class UnsupportedMediaType(DomainError):
    status_code = 415


class ValidationFailed(DomainError):
    status_code = 422

    @classmethod
    def field(cls, path: str, message: str) -> ValidationFailed:
        return cls(f"{path}: {message}", errors={path: [message]})

    @classmethod
    def fields(cls, errors: Mapping[str, Sequence[str]]) -> ValidationFailed:
        first_path, first_messages = next(iter(errors.items()))
        more = len(errors) - 1
        summary = f"{first_path}: {first_messages[0]}"
        if more:
            summary += f" (and {more} more field{'s' if more > 1 else ''})"
        return cls(summary, errors=errors)


class RateLimited(DomainError):
    status_code = 429


class ServiceUnavailable(DomainError):
    """The database is out of reach, or every connection is busy: the client should come back."""

    status_code = 503

    def __init__(self, message: str = DATABASE_UNAVAILABLE) -> None:
        super().__init__(message, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def outage_detail(error: BaseException) -> str:
    """What a log line says of a database failure: its class and the first line of the driver's
    message, never the SQL, its parameters or a stack trace (an outage would flood the log)."""
    return f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:300]}"


def error_body(message: str, errors: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"success": False, "message": message, "data": None}
    if errors is not None:
        body["errors"] = {key: list(value) for key, value in errors.items()}
    return body


# Pydantic's messages that name a Python class ("a valid dictionary or instance of EmployeeCreate").
_OBJECT_EXPECTED = {"model_type", "model_attributes_type", "dataclass_type", "dict_type"}


UNKNOWN_FIELD = (
    "Not a field of this request: leave it out (the fields each request takes are in /api/v2/docs)."
)
EMPTY_TEXT = "Must not be empty or only spaces."


def validation_message(error: Mapping[str, Any]) -> str:
    """One of pydantic's errors as a person reads it: without the prefix of a custom validator's
    message ("Value error, "), and without the name of any Python class."""
    kind = error.get("type")
    if kind in _OBJECT_EXPECTED:
        return "Input should be a JSON object."
    if kind == "extra_forbidden":  # pydantic says "Extra inputs are not permitted"
        return UNKNOWN_FIELD
    if kind == "string_too_short" and (error.get("ctx") or {}).get("min_length") == 1:
        return EMPTY_TEXT  # the value was stripped first: "   " is not "at least 1 character" short
    if kind in ("uuid_parsing", "uuid_type"):  # pydantic says "invalid length: found 3" and the like
        return "Give an id as the API gives them: a UUID such as 0192f4e6-7c1a-7d3e-9b2a-5e8f1c3d4a6b."
    if kind == "too_short":  # pydantic says "Dictionary should have at least 1 item after validation"
        context = error.get("ctx") or {}
        least, given = context.get("min_length"), context.get("actual_length")
        return f"Give at least {least} {'entry' if least == 1 else 'entries'} here; {given} given."
    message = str(error.get("msg", "Invalid value"))
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    return message
