"""The database itself keeps each company's rows to their own company: every reference between
company tables is a foreign key of (company_id, x_id), so a row naming another company's employee,
device or order is refused whatever path wrote it (migration 0016)."""

from __future__ import annotations

import enum
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    JSON,
    Boolean,
    Connection,
    DateTime,
    Engine,
    ForeignKeyConstraint,
    Integer,
    LargeBinary,
    Numeric,
    String,
    Table,
    Uuid,
    insert,
    select,
    text,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from outfitter.db.base import Money, UTCDateTime
from outfitter.migrations import is_current, upgrade
from outfitter.models import Country, Employee, Equipment, metadata
from outfitter.tenants.tokens import create_company
from tests.core.test_migrations import _database_at, _migrate, old_row


def _company_tables() -> set[Table]:
    return {table for table in metadata.tables.values() if "company_id" in table.c and "id" in table.c}


def _company_references() -> list[ForeignKeyConstraint]:
    """Every foreign key from a company table to another (or the same) company table, once each
    (the models declare SQLite's and PostgreSQL's form of a SET NULL reference under one name)."""
    found: dict[str, ForeignKeyConstraint] = {}
    for table in sorted(_company_tables(), key=lambda table: table.name):
        for constraint in table.foreign_key_constraints:
            if constraint.referred_table in _company_tables() and len(constraint.columns) == 2:
                assert constraint.name is not None
                found.setdefault(str(constraint.name), constraint)
    return sorted(found.values(), key=lambda constraint: str(constraint.name))


REFERENCES = _company_references()


def test_every_reference_between_company_tables_names_the_company() -> None:
    """A table added later cannot refer to a company table by its id alone (but for SQLite's
    companion of a SET NULL reference, which carries the action the composite key cannot)."""
    assert len(REFERENCES) >= 21  # migration 0016's, and any since
    composite = {
        (constraint.table.name, next(c.name for c in constraint.columns if c.name != "company_id"))
        for constraint in REFERENCES
    }
    for table in _company_tables():
        for constraint in table.foreign_key_constraints:
            if constraint.referred_table not in _company_tables():
                continue
            names = [column.name for column in constraint.columns]
            if names[0] == "company_id" and len(names) == 2:
                assert [element.column.name for element in constraint.elements] == ["company_id", "id"]
            else:
                assert (table.name, names[0]) in composite, f"{table.name}.{names[0]} names no company"
                assert constraint.ondelete == "SET NULL"
                assert constraint._ddl_if is not None and constraint._ddl_if.dialect == "sqlite"


def _value(column: Any) -> Any:
    """A value of `column`'s type, unique enough for a unique column."""
    kind = column.type
    if isinstance(kind, (Uuid,)):
        return uuid.uuid4()
    if hasattr(kind, "enum_class") and kind.enum_class is not None:
        return next(iter(kind.enum_class))
    if isinstance(kind, (Money, Numeric)):
        return Decimal(0)
    if isinstance(kind, (UTCDateTime, DateTime)):
        return datetime.now(UTC)
    if isinstance(kind, Boolean):
        return False
    if isinstance(kind, Integer):
        return 0
    if isinstance(kind, JSON):
        return {}
    if isinstance(kind, LargeBinary):
        return b""
    if isinstance(kind, String):
        return uuid.uuid4().hex[: kind.length or 32]
    if isinstance(kind, enum.EnumMeta):  # pragma: no cover
        return next(iter(kind))
    raise AssertionError(f"no value for {column}")


def _row(connection: Connection, table: Table, company: uuid.UUID, **given: Any) -> uuid.UUID:
    """Insert a row of `table` for `company` with Core (no session, no tenancy): every required
    column filled, each required reference to a new row of that company (countries: an existing one)."""
    values: dict[str, Any] = {"id": uuid.uuid4(), **given}
    if "company_id" in table.c:
        values.setdefault("company_id", company)
    for column in table.columns:
        if column.name in values or column.nullable or column.default is not None:
            continue
        if column.server_default is not None:
            continue
        references = [fk for fk in column.foreign_keys if fk.constraint is not None]
        if column.primary_key and not references:
            values[column.name] = _value(column)
        elif references:
            target = references[0].column.table
            if "company_id" in target.c:
                values[column.name] = _row(connection, target, company)
            else:
                values[column.name] = _any_row(connection, target)
        else:
            values[column.name] = _value(column)
    connection.execute(insert(table).values(values))
    return values["id"]  # type: ignore[no-any-return]


def _any_row(connection: Connection, table: Table) -> Any:
    """The id of a row of reference data (a country, a specification), made if there is none."""
    found = connection.scalar(select(table.c.id).limit(1))
    if found is not None:
        return found
    values = {column.name: _value(column) for column in table.columns if not column.nullable}
    for column in table.columns:
        for fk in column.foreign_keys:
            values[column.name] = _any_row(connection, fk.column.table)
    connection.execute(insert(table).values(values))
    return values["id"]


@pytest.mark.parametrize("reference", REFERENCES, ids=lambda reference: str(reference.name))
def test_the_database_refuses_a_row_naming_another_companys_row(
    engine: Engine, reference: ForeignKeyConstraint
) -> None:
    """Written with Core on a bare connection (no session, so no tenancy): the same row naming a row
    of its own company is taken, naming one of another company is refused by the database."""
    column = next(c.name for c in reference.columns if c.name != "company_id")
    target = reference.referred_table
    with engine.connect() as connection, connection.begin():
        ours, theirs = (
            _row(connection, metadata.tables["companies"], uuid.uuid4(), id=uuid.uuid4(), name=name)
            for name in ("Acme Ltd", "Globex")
        )
        own = _row(connection, target, ours)
        _row(connection, reference.table, ours, **{column: own})
        other = _row(connection, target, theirs)
        with pytest.raises(IntegrityError), connection.begin_nested():
            _row(connection, reference.table, ours, **{column: other})
        connection.rollback()


def _crossed_assignment(url_engine: Engine) -> str:
    """A device of one company assigned to another's employee, written as 0015 allowed."""
    with Session(url_engine) as session, session.begin():
        ours, theirs = create_company(session, "Acme Ltd").id, create_company(session, "Globex").id
        country = Country(name="Nigeria", code="NG", currency_code="NGN")
        session.add(country)
        session.flush()
        employee = old_row(
            session,
            Employee,
            company_id=theirs,
            first_name="Gina",
            last_name="W",
            email="gina@globex.com",
            phone="+2348012345678",
            address="1 Road",
            country_id=country.id,
        )
        device = old_row(
            session,
            Equipment,
            company_id=ours,
            title="ThinkPad X1",
            source="External",
            status="Assigned",
            assignee_id=employee,
            status_changed_at=datetime.now(UTC),
            description="",
            other_details=[],
            specs={},
            documents=[],
        )
        return str(device)


def test_0016_refuses_a_database_holding_a_crossed_reference_naming_it_and_downgrades(
    database_url: str, tmp_path: Path
) -> None:
    with _database_at(database_url, tmp_path, "0015") as (_url, old):
        device = _crossed_assignment(old)
        with pytest.raises(
            RuntimeError, match=rf"equipment\.assignee_id -> employees \(1\): {device}\. Point"
        ):
            upgrade(old)
        assert not is_current(old)
        with old.begin() as connection:
            connection.execute(text("UPDATE equipment SET assignee_id = NULL"))
        upgrade(old)
        assert is_current(old)
        _migrate(old, "0015", down=True)
        assert not is_current(old)
        upgrade(old)
        assert is_current(old)
