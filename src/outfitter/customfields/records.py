"""A company's fields of one kind of record, and what the record services ask of them: the values
a write gives, checked, defaulted and split into the public and the sensitive ones.

The equipment and people services call `FieldSet.check` before any write, so that a bad value is a
422 naming `custom_fields.<key>` (at the item's or row's path in a batch) and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from outfitter.customfields.values import check_value, filled
from outfitter.models import CustomFieldDefinition, CustomFieldEntity, CustomFieldType

NOUNS = {CustomFieldEntity.DEVICE: "devices", CustomFieldEntity.EMPLOYEE: "employees"}


@dataclass(frozen=True)
class CheckedValues:
    """A record's values once a write's are applied: the public and the sensitive ones apart."""

    public: dict[str, Any]
    sensitive: dict[str, Any]
    errors: dict[str, str] = field(default_factory=dict)  # by key


@dataclass(frozen=True)
class FieldSet:
    entity: CustomFieldEntity
    definitions: dict[str, CustomFieldDefinition]

    def applies(self, definition: CustomFieldDefinition, device_type: str | None) -> bool:
        """A device field with device types applies to devices of those types only."""
        return not definition.device_types or device_type in definition.device_types

    def check(
        self,
        given: Mapping[str, Any] | None,
        *,
        current: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None,
        device_type: str | None = None,
        from_text: bool = False,
    ) -> CheckedValues:
        """The record's values after `given` (a null, or an empty CSV cell, clears a value). A new
        record (`current` None) takes the defaults of the fields it is not given, and must have
        every required one; an existing one must keep the required ones `given` would clear."""
        values: dict[str, Any] = {**current[0], **current[1]} if current is not None else {}
        errors: dict[str, str] = {}
        for key, raw in (given or {}).items():
            definition = self.definitions.get(key)
            if definition is None:
                errors[key] = f"No custom field {key!r} is defined for {NOUNS[self.entity]}."
                continue
            if not self.applies(definition, device_type):
                types = ", ".join(definition.device_types)
                errors[key] = f"{definition.label} applies only to devices of type {types}."
                continue
            if raw is None or (from_text and raw == ""):
                values.pop(key, None)
                continue
            try:
                values[key] = check_value(definition, raw, from_text=from_text)
            except ValueError as error:
                errors[key] = str(error)
        for key, definition in self.definitions.items():
            if key in errors or not self.applies(definition, device_type):
                continue
            if current is None and not filled(values, key) and definition.default is not None:
                values[key] = definition.default
            touched = current is None or key in (given or {})
            if definition.required and touched and not filled(values, key):
                errors[key] = f"{definition.label} is required."
        public = {key: value for key, value in values.items() if not self._sensitive(key)}
        sensitive = {key: value for key, value in values.items() if self._sensitive(key)}
        return CheckedValues(public, sensitive, errors)

    def _sensitive(self, key: str) -> bool:
        definition = self.definitions.get(key)
        return definition is not None and definition.sensitive

    def keys(self, *, sensitive: bool) -> list[str]:
        return [key for key, definition in self.definitions.items() if definition.sensitive == sensitive]


def field_set(session: Session, entity: CustomFieldEntity) -> FieldSet:
    """The company's fields of `entity` (the bound session scopes the read), in creation order."""
    definitions = session.scalars(
        select(CustomFieldDefinition)
        .where(CustomFieldDefinition.entity == entity)
        .order_by(CustomFieldDefinition.created_at, CustomFieldDefinition.id)
    ).all()
    return FieldSet(entity, {definition.key: definition for definition in definitions})


def value_errors(path: str, errors: Mapping[str, str]) -> dict[str, list[str]]:
    """`errors` by key as a 422's `errors`, at `path` (`custom_fields`, `equipment.3.custom_fields`)."""
    return {f"{path}.{key}": [message] for key, message in errors.items()}


# The columns a list's filters read of the definitions (a read plan's statement: rows, not objects).
DEFINITION_ROWS = (
    select(
        CustomFieldDefinition.key,
        CustomFieldDefinition.label,
        CustomFieldDefinition.type,
        CustomFieldDefinition.choices,
        CustomFieldDefinition.sensitive,
    )
    .where(CustomFieldDefinition.entity == bindparam("entity"))
    .order_by(CustomFieldDefinition.key)
)


def field_set_of_rows(entity: CustomFieldEntity, rows: Iterable[Any]) -> FieldSet:
    """A FieldSet from DEFINITION_ROWS' rows (definitions not attached to any session)."""
    definitions = {
        row.key: CustomFieldDefinition(
            key=row.key,
            label=row.label,
            type=CustomFieldType(row.type),
            choices=list(row.choices or []),
            sensitive=bool(row.sensitive),
            device_types=[],
        )
        for row in rows
    }
    return FieldSet(entity, definitions)
