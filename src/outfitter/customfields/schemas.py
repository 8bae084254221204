"""Custom field request and response shapes (docs/custom-fields.md)."""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Annotated, Any

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field

from outfitter.core.schemas import Schema, Timestamp
from outfitter.models import CustomFieldEntity, CustomFieldType, EquipmentType

KEY_PATTERN = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$"  # no "__": a filter's range suffix (`cf_price__gte`)
MAX_KEY = 40
MAX_CHOICES = 200
# A bound as a JSON integer or a decimal string ("12.5"); the service checks it and keeps its text.
Bound = int | str | None


class ValueMigration(StrEnum):
    """What a definition change does to values that would no longer fit it."""

    REFUSE = "refuse"  # answer 409 saying what would break, change nothing (the default)
    CONVERT = "convert"  # convert each value to the new definition; clear those that cannot be
    CLEAR = "clear"  # clear every value that does not fit


class CustomFieldOut(Schema):
    id: uuid.UUID
    entity: CustomFieldEntity
    key: str
    label: str
    type: CustomFieldType
    required: bool
    default: Any
    pattern: str | None
    minimum: str | None
    maximum: str | None
    choices: list[str]
    sensitive: bool
    device_types: list[str]
    created_at: Timestamp
    updated_at: Timestamp


class _DefinitionFields(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    label: str | None = Field(default=None, min_length=1, max_length=200)
    required: bool | None = None
    default: Any = Field(
        default=None, description="A value of the field's type, given when a record has none"
    )
    pattern: str | None = Field(
        default=None,
        max_length=200,
        description="text and long_text: a regular expression the whole value matches",
    )
    minimum: Bound = Field(default=None, description="number and decimal: the smallest value allowed")
    maximum: Bound = Field(default=None, description="number and decimal: the largest value allowed")
    choices: list[str] | None = Field(
        default=None, max_length=MAX_CHOICES, description="choice and multi_choice: the values allowed"
    )
    sensitive: bool | None = Field(
        default=None,
        description="Kept out of answers, filters, exports and webhooks; "
        "read with the custom_fields:sensitive scope",
    )
    device_types: list[EquipmentType] | None = Field(
        default=None,
        max_length=10,
        description="device fields: the device types it applies to (empty: every device)",
    )


class CustomFieldCreate(_DefinitionFields):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "entity": "device",
                    "key": "imei",
                    "label": "IMEI",
                    "type": "text",
                    "pattern": "[0-9]{15}",
                    "device_types": ["Phones"],
                }
            ]
        }
    )

    entity: CustomFieldEntity
    key: str = Field(pattern=KEY_PATTERN, min_length=1, max_length=MAX_KEY)
    label: str = Field(min_length=1, max_length=200)
    type: CustomFieldType


class CustomFieldPatch(_DefinitionFields):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"choices": ["Lisbon", "Lagos"], "migrate": "clear"}]}
    )

    type: CustomFieldType | None = None
    migrate: ValueMigration = Field(
        default=ValueMigration.REFUSE,
        description="Values that would no longer fit: refuse (409), convert them, or clear them",
    )


IncludeSensitive = Annotated[
    bool,
    Query(description="Add the sensitive custom fields' columns (needs the custom_fields:sensitive scope)"),
]


class SensitiveValuesOut(Schema):
    """A record's sensitive fields, for a token with the custom_fields:sensitive scope."""

    id: uuid.UUID
    sensitive_fields: dict[str, Any]
