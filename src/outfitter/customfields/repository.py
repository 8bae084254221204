"""Every query of the custom fields domain. No company filter here: the bound session adds it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Select, func, not_, or_, select, update
from sqlalchemy.orm import Session

from outfitter.customfields.sql import has_value
from outfitter.db.tenancy import CompanyRepository
from outfitter.models import CustomFieldDefinition, CustomFieldEntity, Employee, Equipment, EquipmentStatus

RECORDS: dict[CustomFieldEntity, Any] = {
    CustomFieldEntity.DEVICE: Equipment,
    CustomFieldEntity.EMPLOYEE: Employee,
}
BATCH = 1_000


class DefinitionRepository(CompanyRepository[CustomFieldDefinition]):
    model = CustomFieldDefinition
    label = "Custom field"

    def newest_first(self, entity: CustomFieldEntity | None) -> Select[CustomFieldDefinition]:
        statement = self.select()
        if entity is not None:
            statement = statement.where(CustomFieldDefinition.entity == entity)
        return statement.order_by(CustomFieldDefinition.created_at.desc(), CustomFieldDefinition.id.desc())

    def count_of(self, entity: CustomFieldEntity) -> int:
        statement = select(func.count()).select_from(CustomFieldDefinition)
        return self.session.scalar(statement.where(CustomFieldDefinition.entity == entity)) or 0

    def key_taken(self, entity: CustomFieldEntity, key: str) -> bool:
        statement = select(CustomFieldDefinition.id).where(
            CustomFieldDefinition.entity == entity, CustomFieldDefinition.key == key
        )
        return self.session.scalar(statement) is not None


class RecordValues:
    """The records of one kind that hold a field's value, read and rewritten in batches."""

    def __init__(self, session: Session, entity: CustomFieldEntity) -> None:
        self.session = session
        self.model = RECORDS[entity]
        self.entity = entity

    def holding(self, key: str) -> Iterator[Any]:
        """(id, custom_fields, sensitive_fields, type) of each record holding a value of `key`, in
        id order, a batch at a time."""
        model = self.model
        kind = model.type if model is Equipment else None
        after: uuid.UUID | None = None
        while True:
            statement = (
                select(
                    model.id,
                    model.custom_fields,
                    model.sensitive_fields,
                    *([kind] if kind is not None else []),
                )
                .where(or_(has_value(model.custom_fields, key), has_value(model.sensitive_fields, key)))
                .order_by(model.id)
                .limit(BATCH)
            )
            if after is not None:
                statement = statement.where(model.id > after)
            rows = self.session.execute(statement).all()
            yield from rows
            if len(rows) < BATCH:
                return
            after = rows[-1].id

    def lacking(self, key: str, device_types: list[str]) -> list[uuid.UUID]:
        """The records a required `key` would apply to that have no value of it (devices not
        Archived, of `device_types` when given)."""
        model = self.model
        statement = select(model.id).where(
            not_(has_value(model.custom_fields, key)), not_(has_value(model.sensitive_fields, key))
        )
        if model is Equipment:
            statement = statement.where(Equipment.status != EquipmentStatus.ARCHIVED)
            if device_types:
                statement = statement.where(Equipment.type.in_(device_types))
        return list(self.session.scalars(statement.order_by(model.id)).all())

    def rewrite(self, record_id: uuid.UUID, public: dict[str, Any], sensitive: dict[str, Any]) -> None:
        self.session.execute(
            update(self.model)
            .where(self.model.id == record_id)
            .values(custom_fields=public, sensitive_fields=sensitive)
            .execution_options(synchronize_session=False)
        )

    def sensitive_of(self, record_id: uuid.UUID | None) -> dict[str, Any] | None:
        if record_id is None:
            return None
        row = self.session.execute(
            select(self.model.sensitive_fields).where(self.model.id == record_id)
        ).one_or_none()
        return None if row is None else dict(row.sensitive_fields or {})
