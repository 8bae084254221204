"""Custom field values as CSV cells: what the exports write and the imports read back (a boolean
`true`/`false`, many of a list `a|b`, everything else its JSON value's text)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from outfitter.csvio.writer import escaped
from outfitter.customfields.values import MULTI_SEPARATOR


def cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return MULTI_SEPARATOR.join(str(item) for item in value)
    return str(value)


def custom_cells(values: Mapping[str, Any] | str | None, keys: Sequence[str]) -> list[str]:
    """A record's cells of the columns `custom_fields.<key>`, from its values (a dict, or the JSON
    text a driver may hand over)."""
    found: Mapping[str, Any] = (json.loads(values) if isinstance(values, str) else values) or {}
    return [escaped(cell_text(found.get(key))) for key in keys]
