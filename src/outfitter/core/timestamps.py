"""Times as the service writes and reads them: UTC, ISO 8601 with microseconds."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson


def format_timestamp(value: datetime) -> str:
    """ISO 8601 UTC with microseconds, the form every answer gives: 2024-05-01T09:30:00.000000Z."""
    if value.tzinfo is UTC:  # the service's own times: orjson writes them in a fifth of isoformat's
        # time, the same but for a whole second, whose microseconds it leaves out.
        text = orjson.dumps(value, option=orjson.OPT_UTC_Z)[1:-1].decode()
        return text if value.microsecond else text[:-1] + ".000000Z"
    offset = value.utcoffset()
    if offset is None:  # naive: UTC already
        return value.isoformat(timespec="microseconds") + "Z"
    if offset:
        value = value.astimezone(UTC)
    # "+00:00" becomes "Z": cheaper than replace(tzinfo=None) first, and answers have many of these.
    return value.isoformat(timespec="microseconds")[:-6] + "Z"


def as_utc(value: datetime) -> datetime:
    """Any time a client gives, in UTC (no offset means UTC): the one place that refuses a time
    that exists only with its offset (year 1 at +14:00, year 9999 at -14:00), which no column
    stores and no arithmetic survives."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("The time falls outside the years 1 to 9999 once converted to UTC.") from None
