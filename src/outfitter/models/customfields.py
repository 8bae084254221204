"""Custom fields: the fields a company defines for its devices and employees.

The values live on the records themselves, one JSON column per record table (`custom_fields`,
JSONB with a GIN `jsonb_path_ops` index on PostgreSQL), and the values of sensitive fields in a
second one (`sensitive_fields`, no index: they are never filtered on). A field is a row here, not a
column: a company adds one without a migration (docs/custom-fields.md).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Index, String, UniqueConstraint, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from outfitter.db.base import Base, CompanyOwned, IdMixin, TimestampMixin, company_key, str_enum

# JSONB on PostgreSQL (containment `@>` served by a GIN index); JSON text on SQLite.
CustomValues = JSON().with_variant(JSONB(), "postgresql")
EMPTY_VALUES = text("'{}'")  # the columns' server default: rows written by Core inserts and COPY


def custom_values_index(table: str) -> Index:
    """`cf_key=value` filters: a GIN index of the values (`jsonb_path_ops`: containment only, a
    third of the size of the default operator class), PostgreSQL only (bench/custom_fields.py)."""
    return Index(
        f"ix_{table}_custom_fields",
        "custom_fields",
        postgresql_using="gin",
        postgresql_ops={"custom_fields": "jsonb_path_ops"},
    ).ddl_if(dialect="postgresql")


class CustomFieldEntity(StrEnum):
    """The records a field belongs to."""

    DEVICE = "device"
    EMPLOYEE = "employee"


class CustomFieldType(StrEnum):
    TEXT = "text"
    LONG_TEXT = "long_text"
    NUMBER = "number"  # an integer, stored as a JSON number
    DECIMAL = "decimal"  # exact, stored as its canonical decimal string ("12.5")
    DATE = "date"  # YYYY-MM-DD
    BOOLEAN = "boolean"
    CHOICE = "choice"  # one of `choices`
    MULTI_CHOICE = "multi_choice"  # a list of distinct `choices`
    URL = "url"
    EMAIL = "email"


class CustomFieldDefinition(IdMixin, CompanyOwned, TimestampMixin, Base):
    __tablename__ = "custom_field_definitions"
    __table_args__ = (
        UniqueConstraint("company_id", "entity", "key"),
        company_key("custom_field_definitions"),
    )
    indexes_company_id = False  # led by the unique (company_id, entity, key)

    entity: Mapped[CustomFieldEntity] = mapped_column(str_enum(CustomFieldEntity, 20))
    key: Mapped[str] = mapped_column(String(50))
    label: Mapped[str] = mapped_column(String(200))
    type: Mapped[CustomFieldType] = mapped_column(str_enum(CustomFieldType, 20))
    required: Mapped[bool] = mapped_column(default=False)
    default: Mapped[Any | None] = mapped_column(JSON)
    pattern: Mapped[str | None] = mapped_column(String(500))
    # Decimal text ("0", "12.5"), compared exactly (Decimal) by the service.
    minimum: Mapped[str | None] = mapped_column(String(50))
    maximum: Mapped[str | None] = mapped_column(String(50))
    choices: Mapped[list[str]] = mapped_column(JSON, default=list)
    sensitive: Mapped[bool] = mapped_column(default=False)
    # Devices only: the device types it applies to (empty: every device).
    device_types: Mapped[list[str]] = mapped_column(JSON, default=list)
