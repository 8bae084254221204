"""Tenant scoping in one place: every read of a company's records starts from `scoped()`."""

from __future__ import annotations

import uuid
from typing import Any, ClassVar, Generic, TypeVar

from sqlalchemy import ForeignKey, Select, select
from sqlalchemy.orm import Mapped, Session, declared_attr, mapped_column
from sqlalchemy.orm.interfaces import ORMOption

from outfitter.core.errors import NotFound


class CompanyOwned:
    """Mixin for every table whose rows belong to one company."""

    @declared_attr
    def company_id(cls) -> Mapped[uuid.UUID]:
        return mapped_column(ForeignKey("companies.id", ondelete="CASCADE"), index=True)


ModelT = TypeVar("ModelT", bound=CompanyOwned)


class CompanyRepository(Generic[ModelT]):
    """Base repository of a company-owned model. Subclasses set `model` and `label` and build
    every query from `scoped()`, so no query of theirs can forget the company filter."""

    model: ClassVar[type[Any]]
    label: ClassVar[str]  # how errors name a record, e.g. "Employee"

    def __init__(self, session: Session, company_id: uuid.UUID) -> None:
        self.session = session
        self.company_id = company_id

    def scoped(self, *options: ORMOption) -> Select[ModelT]:
        statement: Select[ModelT] = select(self.model).where(self.model.company_id == self.company_id)
        return statement.options(*options) if options else statement

    def find(
        self, record_id: uuid.UUID | str, *options: ORMOption, for_update: bool = False
    ) -> ModelT | None:
        parsed = parse_uuid(record_id)
        if parsed is None:
            return None
        statement = self.scoped(*options).where(self.model.id == parsed)
        if for_update:
            statement = statement.with_for_update()
        return self.session.scalars(statement).unique().one_or_none()

    def get(self, record_id: uuid.UUID | str, *options: ORMOption, for_update: bool = False) -> ModelT:
        record = self.find(record_id, *options, for_update=for_update)
        if record is None:
            raise NotFound.record(self.label)
        return record

    def add(self, record: ModelT) -> ModelT:
        record.company_id = self.company_id
        self.session.add(record)
        return record


def parse_uuid(value: uuid.UUID | str) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        return None
