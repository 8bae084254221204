"""A device's or employee's custom field values in the console: the panel the record's page shows
(sensitive values masked, never sent to the browser) and its form read as a PATCH's `custom_fields`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from outfitter.console.web import MOUNT_PATH
from outfitter.customfields.records import field_set
from outfitter.customfields.repository import RecordValues
from outfitter.customfields.values import MULTI_SEPARATOR, check_value
from outfitter.models import CustomFieldDefinition, CustomFieldEntity, CustomFieldType

MASK = "••••••"  # a sensitive value that is set: never shown in the console
INPUT_TYPES = {
    CustomFieldType.NUMBER: "number",
    CustomFieldType.DATE: "date",
    CustomFieldType.URL: "url",
    CustomFieldType.EMAIL: "email",
}


@dataclass(frozen=True)
class FieldRow:
    key: str
    label: str
    type: str
    input_type: str
    required: bool
    sensitive: bool
    choices: list[str]
    shown: str  # what the facts list shows (masked when sensitive)
    value: str  # what the form's input holds (never a sensitive value)


@dataclass(frozen=True)
class Panel:
    action: str
    rows: list[FieldRow]
    errors: dict[str, str] = field(default_factory=dict)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return MULTI_SEPARATOR.join(value)
    return str(value)


def _applies(definition: CustomFieldDefinition, device_type: str | None, entity: CustomFieldEntity) -> bool:
    if entity != CustomFieldEntity.DEVICE or not definition.device_types:
        return True
    return device_type in definition.device_types


def panel(
    session: Session,
    entity: CustomFieldEntity,
    record_id: uuid.UUID | str,
    public: dict[str, Any],
    device_type: str | None = None,
    errors: dict[str, str] | None = None,
) -> Panel:
    """The record's fields that apply to it, with their values; sensitive ones only as set or not."""
    sensitive = RecordValues(session, entity).sensitive_of(uuid.UUID(str(record_id))) or {}
    rows = []
    for definition in field_set(session, entity).definitions.values():
        if not _applies(definition, device_type, entity):
            continue
        key = definition.key
        if definition.sensitive:
            shown, value = (MASK if key in sensitive else "not set"), ""
        else:
            value = _text(public.get(key))
            shown = value or "not set"
        rows.append(
            FieldRow(
                key=key,
                label=definition.label,
                type=str(definition.type),
                input_type=INPUT_TYPES.get(definition.type, "text"),
                required=definition.required,
                sensitive=definition.sensitive,
                choices=list(definition.choices or []),
                shown=shown,
                value=value,
            )
        )
    noun = "devices" if entity == CustomFieldEntity.DEVICE else "employees"
    return Panel(f"{MOUNT_PATH}/{noun}/{record_id}/custom-fields", rows, errors or {})


def submitted_values(
    session: Session, entity: CustomFieldEntity, values: dict[str, str], public: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The panel's form as `custom_fields` of a PATCH, read as CSV cells are, and its errors by key.
    An empty sensitive input keeps the value (it is never shown); `clear.<key>` clears it."""
    given: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for key, definition in field_set(session, entity).definitions.items():
        name = f"cf.{key}"
        if name not in values and f"clear.{key}" not in values:
            continue
        text = values.get(name, "").strip()
        if definition.sensitive and not text:
            if values.get(f"clear.{key}") == "yes":
                given[key] = None
            continue
        if not text:
            if key in public:
                given[key] = None
            continue
        try:
            given[key] = check_value(definition, text, from_text=True)
        except ValueError as error:
            errors[key] = str(error)
    return given, errors
