"""The rules of custom field definitions: what a definition may say, and what a change does to the
values records already hold (refused with what would break, or migrated as asked)."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.core.errors import Conflict, Forbidden, NotFound, ValidationFailed
from outfitter.customfields.records import NOUNS, field_set
from outfitter.customfields.repository import DefinitionRepository, RecordValues
from outfitter.customfields.schemas import (
    CustomFieldCreate,
    CustomFieldOut,
    CustomFieldPatch,
    SensitiveValuesOut,
    ValueMigration,
)
from outfitter.customfields.values import MULTI_SEPARATOR, canonical_decimal, check_value, parse_decimal
from outfitter.db.base import utcnow
from outfitter.db.keyset import PageParams, PageResult, paginate
from outfitter.db.tenancy import company_of, parse_uuid
from outfitter.models import CustomFieldDefinition, CustomFieldEntity, CustomFieldType
from outfitter.models.events import EventType
from outfitter.outbox import as_event_data, record_event
from outfitter.tenants.actor import Actor

SENSITIVE_SCOPE = "custom_fields:sensitive"
MAX_FIELDS_PER_KIND = 100
LISTS = (CustomFieldType.CHOICE, CustomFieldType.MULTI_CHOICE)
TEXTS = (CustomFieldType.TEXT, CustomFieldType.LONG_TEXT)
NUMBERS = (CustomFieldType.NUMBER, CustomFieldType.DECIMAL)
RULES = (
    "label",
    "type",
    "required",
    "default",
    "pattern",
    "minimum",
    "maximum",
    "choices",
    "sensitive",
    "device_types",
)
EXAMPLES = 3  # records named in a refusal


def present(definition: CustomFieldDefinition) -> CustomFieldOut:
    return CustomFieldOut.model_validate(definition)


def list_definitions(
    session: Session, entity: CustomFieldEntity | None, params: PageParams
) -> tuple[list[CustomFieldOut], PageResult[Any]]:
    page = paginate(session, DefinitionRepository(session).newest_first(entity), params)
    return [present(definition) for definition in page.items], page


def all_definitions(session: Session) -> list[CustomFieldOut]:
    """Every field of the company (at most 100 of each kind), newest first: the console's list."""
    statement = DefinitionRepository(session).newest_first(None)
    return [present(definition) for definition in session.scalars(statement)]


def get_definition(session: Session, definition_id: str) -> CustomFieldOut:
    return present(DefinitionRepository(session).get(definition_id))


def create_definition(session: Session, actor: Actor, body: CustomFieldCreate) -> CustomFieldOut:
    repository = DefinitionRepository(session)
    rules = SimpleNamespace(
        entity=body.entity,
        key=body.key,
        required=bool(body.required),
        sensitive=bool(body.sensitive),
        **{name: getattr(body, name) for name in RULES if name not in ("required", "sensitive")},
    )
    _check_rules(rules)
    if repository.key_taken(body.entity, body.key):
        raise Conflict(f"A {body.entity} field with the key {body.key!r} already exists.")
    if repository.count_of(body.entity) >= MAX_FIELDS_PER_KIND:
        raise Conflict(f"A company may define at most {MAX_FIELDS_PER_KIND} {body.entity} fields.")
    definition = repository.add(CustomFieldDefinition(company_id=company_of(session), **vars(rules)))
    session.flush()
    answer = present(definition)
    record_event(
        session,
        EventType.CUSTOM_FIELD_CREATED,
        definition.id,
        as_event_data(CustomFieldOut, answer),
        actor=actor.name,
    )
    return answer


@dataclass
class Impact:
    """What a definition change does to the records holding values (or lacking a required one)."""

    unchanged: int = 0
    converted: dict[uuid.UUID, Any] = field(default_factory=dict)
    cleared: dict[uuid.UUID, str] = field(default_factory=dict)  # record -> why its value does not fit
    filled: list[uuid.UUID] = field(default_factory=list)  # lacking a now-required value: the default
    moved: list[uuid.UUID] = field(default_factory=list)  # sensitive turned on or off

    def summary(self) -> str:
        parts = []
        if self.converted:
            parts.append(f"{len(self.converted)} converted")
        if self.cleared:
            parts.append(f"{len(self.cleared)} cleared")
        if self.filled:
            parts.append(f"{len(self.filled)} given the default")
        return ", ".join(parts) or "no value changed"


def update_definition(
    session: Session, actor: Actor, definition_id: str, body: CustomFieldPatch
) -> tuple[CustomFieldOut, str]:
    """Change a definition; the answer and a sentence saying what happened to the values."""
    definition = DefinitionRepository(session).get(definition_id, for_update=True)
    given = body.model_fields_set - {"migrate"}
    nulls: dict[str, list[str]] = {
        name: ["May not be null."]
        for name in ("label", "type", "required", "sensitive")
        if name in given and getattr(body, name) is None
    }
    if nulls:
        raise ValidationFailed.fields(nulls)
    rules = SimpleNamespace(
        entity=definition.entity, key=definition.key, **{name: getattr(definition, name) for name in RULES}
    )
    for name in given:
        value = getattr(body, name)
        rules.__dict__[name] = (
            ([] if value is None else list(value)) if name in ("choices", "device_types") else value
        )
    if "type" in given and rules.type != definition.type:
        # A new type starts from its own rules: the old type's pattern, bounds or choices go unless given.
        for name, kinds in (
            ("pattern", TEXTS),
            ("minimum", NUMBERS),
            ("maximum", NUMBERS),
            ("choices", LISTS),
        ):
            if name not in given and rules.type not in kinds:
                rules.__dict__[name] = [] if name == "choices" else None
        if "default" not in given:
            rules.default = None
    _check_rules(rules)
    impact = _impact(session, definition, rules, body.migrate)
    if body.migrate == ValueMigration.REFUSE and (impact.converted or impact.cleared or impact.filled):
        raise Conflict(_refusal(definition, impact))
    _apply(session, definition, rules, impact)
    for name in RULES:
        setattr(definition, name, getattr(rules, name))
    definition.updated_at = utcnow()
    session.flush()
    answer = present(definition)
    record_event(
        session,
        EventType.CUSTOM_FIELD_UPDATED,
        definition.id,
        as_event_data(CustomFieldOut, answer),
        actor=actor.name,
    )
    return answer, impact.summary()


def delete_definition(session: Session, actor: Actor, definition_id: str) -> tuple[CustomFieldOut, int]:
    """Delete a field and clear its values from every record; its events stay in the activity log
    (`custom_field.deleted` carries the definition as it was). Answers it and how many values went."""
    definition = DefinitionRepository(session).get(definition_id, for_update=True)
    answer = present(definition)
    records = RecordValues(session, definition.entity)
    cleared = 0
    for row in list(records.holding(definition.key)):
        public, sensitive = dict(row.custom_fields or {}), dict(row.sensitive_fields or {})
        public.pop(definition.key, None)
        sensitive.pop(definition.key, None)
        records.rewrite(row.id, public, sensitive)
        cleared += 1
    data = as_event_data(CustomFieldOut, answer)  # as it was: the activity log keeps it
    session.delete(definition)
    session.flush()
    record_event(session, EventType.CUSTOM_FIELD_DELETED, answer.id, data, actor=actor.name)
    return answer, cleared


def sensitive_values(
    session: Session, actor: Actor, entity: CustomFieldEntity, record_id: str
) -> SensitiveValuesOut:
    """A record's sensitive values, for a token holding the custom_fields:sensitive scope."""
    values = RecordValues(session, entity).sensitive_of(parse_uuid(record_id))
    if values is None:  # first: another company's record is a 404, whatever the token's scopes
        raise NotFound.record("Equipment" if entity == CustomFieldEntity.DEVICE else "Employee")
    require_sensitive_scope(actor)
    return SensitiveValuesOut(id=uuid.UUID(str(parse_uuid(record_id))), sensitive_fields=values)


def export_fields(
    session: Session, actor: Actor, entity: CustomFieldEntity, include_sensitive: bool
) -> tuple[list[str], list[str]]:
    """The keys of an export's custom field columns: the public ones, and the sensitive ones when
    asked for (403 without the scope)."""
    if include_sensitive:
        require_sensitive_scope(actor)
    fields = field_set(session, entity)
    return fields.keys(sensitive=False), fields.keys(sensitive=True) if include_sensitive else []


def require_sensitive_scope(actor: Actor) -> None:
    if SENSITIVE_SCOPE not in actor.scopes:
        raise Forbidden(f"Sensitive custom fields need a token with the {SENSITIVE_SCOPE!r} scope.")


# --- the rules of a definition -----------------------------------------------------------------


def _check_rules(rules: SimpleNamespace) -> None:
    """422 naming each field of the definition that cannot be (all of them at once)."""
    errors: dict[str, str] = {}
    kind = rules.type
    if kind in LISTS:
        choices = [choice.strip() for choice in rules.choices or []]
        if not choices:
            errors["choices"] = f"A {kind} field needs its list of choices."
        elif any(not choice or len(choice) > 200 or MULTI_SEPARATOR in choice for choice in choices):
            errors["choices"] = f"Each choice is 1 to 200 characters, without '{MULTI_SEPARATOR}'."
        elif len(set(choices)) != len(choices):
            errors["choices"] = "A choice is listed twice."
        rules.choices = choices
    elif rules.choices:
        errors["choices"] = "Only choice and multi_choice fields have choices."
    else:
        rules.choices = []
    if rules.pattern is not None and kind not in TEXTS:
        errors["pattern"] = "Only text and long_text fields have a pattern."
    elif rules.pattern is not None:
        try:
            re.compile(rules.pattern)
        except re.error as error:
            errors["pattern"] = f"Not a regular expression: {error}."
    for name in ("minimum", "maximum"):
        bound = getattr(rules, name)
        if bound is None:
            continue
        if kind not in NUMBERS:
            errors[name] = "Only number and decimal fields have a minimum and a maximum."
            continue
        try:
            number = parse_decimal(bound, from_text=True)
        except ValueError as error:
            errors[name] = str(error)
            continue
        if kind == CustomFieldType.NUMBER and number != number.to_integral_value():
            errors[name] = "A number field's bounds are whole numbers."
        setattr(rules, name, canonical_decimal(number))
    checked = "minimum" not in errors and "maximum" not in errors
    if (
        checked
        and None not in (rules.minimum, rules.maximum)
        and Decimal(rules.minimum) > Decimal(rules.maximum)
    ):
        errors["maximum"] = "The maximum is below the minimum."
    if rules.device_types and rules.entity != CustomFieldEntity.DEVICE:
        errors["device_types"] = "Only device fields apply to device types."
    rules.device_types = [str(kind_) for kind_ in dict.fromkeys(rules.device_types or [])]
    if rules.default is not None and not errors:
        try:
            rules.default = check_value(rules, rules.default)
        except ValueError as error:
            errors["default"] = str(error)
    if errors:
        raise ValidationFailed.fields({name: [message] for name, message in errors.items()})


# --- what a change does to the values ------------------------------------------------------------


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return MULTI_SEPARATOR.join(str(item) for item in value)
    return str(value)


def _impact(
    session: Session, definition: CustomFieldDefinition, rules: SimpleNamespace, migrate: ValueMigration
) -> Impact:
    impact = Impact()
    key = definition.key
    records = RecordValues(session, definition.entity)
    for row in records.holding(key):
        value = {**(row.custom_fields or {}), **(row.sensitive_fields or {})}[key]
        if rules.device_types and getattr(row, "type", None) not in rules.device_types:
            impact.cleared[row.id] = f"its type is not one of {', '.join(rules.device_types)}"
            continue
        try:
            new = check_value(rules, value)
        except ValueError as error:
            if migrate == ValueMigration.CLEAR:  # refuse: say which ones convert would keep
                impact.cleared[row.id] = f"{_as_text(value)[:50]!r}: {error}"
                continue
            try:
                new = check_value(rules, _as_text(value), from_text=True)
            except ValueError as second:
                impact.cleared[row.id] = f"{_as_text(value)[:50]!r}: {second}"
                continue
        if new != value or type(new) is not type(value):
            impact.converted[row.id] = new
        else:
            impact.unchanged += 1
        if rules.sensitive != definition.sensitive:
            impact.moved.append(row.id)
    if rules.required:
        lacking = records.lacking(key, rules.device_types)
        impact.filled = [record for record in lacking] + list(impact.cleared)
        if impact.filled and rules.default is None:
            noun = NOUNS[definition.entity]
            raise Conflict(
                f"{rules.label} would be required, but {len(impact.filled)} {noun} have no value of it "
                f"(e.g. {', '.join(str(record) for record in impact.filled[:EXAMPLES])}): give a default "
                "for them, or fill them first."
            )
    return impact


def _refusal(definition: CustomFieldDefinition, impact: Impact) -> str:
    noun = NOUNS[definition.entity]
    parts = []
    if impact.converted:
        parts.append(f"{len(impact.converted)} values would change form (migrate: convert does it)")
    if impact.cleared:
        examples = "; ".join(f"{record}: {why}" for record, why in list(impact.cleared.items())[:EXAMPLES])
        parts.append(f"{len(impact.cleared)} values would no longer fit ({examples})")
    if impact.filled:
        parts.append(
            f"{len(impact.filled)} {noun} would lack the now-required value (the default fills them)"
        )
    return (
        f"Changing {definition.key!r} would break {noun}' values: {'; '.join(parts)}. Nothing was changed: "
        "send migrate: convert to convert the values that can be and clear the others, or migrate: clear."
    )


def _apply(
    session: Session, definition: CustomFieldDefinition, rules: SimpleNamespace, impact: Impact
) -> None:
    """Write the migrated values: converted, cleared, defaulted, moved between the public and the
    sensitive column. Records' `updated_at` moves; the change is announced by custom_field.updated."""
    key = definition.key
    records = RecordValues(session, definition.entity)
    touched = set(impact.converted) | set(impact.cleared) | set(impact.moved) | set(impact.filled)
    if not touched:
        return
    rows = {row.id: row for row in records.holding(key)}
    for record_id in touched:
        row = rows.get(record_id)
        public = dict(row.custom_fields or {}) if row is not None else None
        sensitive = dict(row.sensitive_fields or {}) if row is not None else None
        if public is None or sensitive is None:  # a record lacking the value: read it whole
            public, sensitive = _values_of(session, records, record_id)
        value = {**public, **sensitive}.get(key)
        public.pop(key, None)
        sensitive.pop(key, None)
        if record_id in impact.converted:
            value = impact.converted[record_id]
        if record_id in impact.cleared:
            value = None
        if value is None and rules.required and rules.default is not None:
            value = rules.default
        if value is not None:
            (sensitive if rules.sensitive else public)[key] = value
        records.rewrite(record_id, public, sensitive)


def _values_of(
    session: Session, records: RecordValues, record_id: uuid.UUID
) -> tuple[dict[str, Any], dict[str, Any]]:
    row = session.execute(
        select(records.model.custom_fields, records.model.sensitive_fields).where(
            records.model.id == record_id
        )
    ).one()
    return dict(row.custom_fields or {}), dict(row.sensitive_fields or {})
