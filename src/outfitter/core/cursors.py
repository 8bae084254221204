"""The lists' cursors on the wire (db.keyset, http.pagination): the keyset of the last row sent
and the fingerprint of the query the cursor was made for, as JSON, signed with an HMAC-SHA256 of
the key the caller gives (`OUTFITTER_CURSOR_SECRET`) and written in URL-safe base64:
`<payload>.<signature>`. A cursor only positions a client within its own company's list, so the
signature guards its integrity (an altered or foreign cursor is a clear 422), not a secret."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from outfitter.core.errors import ValidationFailed

TAMPERED = "This cursor was not made by this list or was altered: start again without a cursor."
OTHER_QUERY = (
    "This cursor was made for another list, other filters or another sort: send it with the query "
    "it came from, or start again without a cursor."
)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _plain(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def encode_cursor(key: bytes, query: str, values: tuple[Any, ...]) -> str:
    payload = json.dumps([query, *map(_plain, values)], separators=(",", ":")).encode()
    signature = hmac.new(key, payload, hashlib.sha256).digest()[:16]
    return f"{_b64(payload)}.{_b64(signature)}"


def decode_cursor(key: bytes, cursor: str, query: str) -> tuple[str, ...]:
    """The keyset a cursor carries, as strings (the list's `Keyset` types them)."""
    try:
        payload_text, signature_text = cursor.split(".")
        payload, signature = _unb64(payload_text), _unb64(signature_text)
    except ValueError:
        raise ValidationFailed.field("query.cursor", TAMPERED) from None
    expected = hmac.new(key, payload, hashlib.sha256).digest()[:16]
    if not hmac.compare_digest(signature, expected):
        raise ValidationFailed.field("query.cursor", TAMPERED)
    decoded = json.loads(payload)  # ours: signed, so it is the list of strings we wrote
    if decoded[0] != query:
        raise ValidationFailed.field("query.cursor", OTHER_QUERY)
    return tuple(decoded[1:])


def query_fingerprint(
    path: str, query: Iterable[tuple[str, str]], read_as: Mapping[str, str] | None = None
) -> str:
    """The path and every query parameter but the cursor's own: what a cursor is bound to. A
    parameter in `read_as` counts by the value it was read as, not as written (`updated_since`
    given with `Z` or `+00:00`, or in another offset, is one instant)."""
    read_as = read_as or {}
    items = sorted(
        (name, read_as.get(name, value)) for name, value in query if name not in {"cursor", "limit"}
    )
    digest = hashlib.sha256(json.dumps([path, items]).encode()).digest()
    return _b64(digest[:12])
