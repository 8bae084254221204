"""Declarative base, constraint naming convention, the column types every table shares, and the
mixins (ids, timestamps, the company that owns a row)."""

from __future__ import annotations

import unicodedata
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    DateTime,
    Enum,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    MetaData,
    Numeric,
    String,
    Uuid,
    func,
)
from sqlalchemy import column as sql_column
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import DeclarativeBase, Mapped, declared_attr, mapped_column
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import TypeDecorator, TypeEngine
from uuid_utils.compat import uuid7

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> uuid.UUID:
    """A new row's id: a version 7 UUID, whose first 48 bits are the time in milliseconds, then a
    counter and random bits, so ids made one after another (even in one millisecond) sort in that
    order. Every index on an id (primary keys; a device's history, an event's subject) then takes
    new entries at its right edge: a batch of 1,000 rows touches a few leaf pages instead of 1,000
    scattered ones, each a read, a dirty page and, after a checkpoint, a full image in the WAL.
    Nothing relies on an id being unguessable (every read is scoped to the caller's company), and
    the time it shows is its record's own `created_at`."""
    return uuid7()


class time_ordered_uuid(FunctionElement[uuid.UUID]):
    """`new_id` made by the database, for rows an `INSERT ... SELECT` writes."""

    type = Uuid()
    inherit_cache = True


@compiles(time_ordered_uuid)
def _time_ordered_uuid_named(_element: time_ordered_uuid, _compiler: Any, **_kw: Any) -> str:
    # Any other dialect, and a statement rendered as text (a SELECT's FROM list is worked out so).
    return "time_ordered_uuid()"


@compiles(time_ordered_uuid, "postgresql")
def _time_ordered_uuid_postgresql(_element: time_ordered_uuid, _compiler: Any, **_kw: Any) -> str:
    # A random UUID's bytes, the first six replaced by the Unix time in milliseconds (the low six
    # bytes of a big-endian int8), and the version nibble turned from 4 (0100) to 7 (0111) by
    # setting bits 52 and 53 (set_bit counts from each byte's lowest bit).
    milliseconds = "int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)"
    return (
        "CAST(encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) "
        f"PLACING substring({milliseconds} FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex') AS uuid)"
    )


@compiles(time_ordered_uuid, "sqlite")
def _time_ordered_uuid_sqlite(_element: time_ordered_uuid, _compiler: Any, **_kw: Any) -> str:
    # 32 hex digits, as SQLAlchemy's Uuid stores one on SQLite: 12 of the time in milliseconds
    # ('%f' is seconds with three decimals), the version 7, then random digits with the variant bits.
    milliseconds = (
        "(CAST(strftime('%s', 'now') AS INTEGER) * 1000 + CAST(substr(strftime('%f', 'now'), 4) AS INTEGER))"
    )
    return (
        f"lower(printf('%012x', {milliseconds}) || '7' || substr(hex(randomblob(2)), 2) || "
        "substr('89ab', 1 + abs(random() % 4), 1) || substr(hex(randomblob(2)), 2) || hex(randomblob(6)))"
    )


class uuid_text(FunctionElement[str]):
    """A UUID column's value as its hyphenated text, made by the database: an export writes its
    ids as they come, with no UUID object made and formatted per row."""

    type = String()
    inherit_cache = True


@compiles(uuid_text)
def _uuid_text_named(element: uuid_text, compiler: Any, **kw: Any) -> str:
    return f"uuid_text({compiler.process(element.clauses, **kw)})"


@compiles(uuid_text, "postgresql")
def _uuid_text_postgresql(element: uuid_text, compiler: Any, **kw: Any) -> str:
    return f"CAST({compiler.process(element.clauses, **kw)} AS TEXT)"


@compiles(uuid_text, "sqlite")
def _uuid_text_sqlite(element: uuid_text, compiler: Any, **kw: Any) -> str:
    # SQLAlchemy's Uuid keeps 32 hex digits on SQLite: hyphens go between the five groups.
    digits = compiler.process(element.clauses, **kw)
    groups = ((1, 8), (9, 4), (13, 4), (17, 4), (21, 12))
    return "lower(" + " || '-' || ".join(f"substr({digits}, {start}, {size})" for start, size in groups) + ")"


class utc_text(FunctionElement[str]):
    """A UTC time column's value as the text every answer gives it (`format_timestamp`:
    2024-05-01T09:30:00.000000Z), made by the database: an export writes its times as they come,
    with no datetime made and formatted per row."""

    type = String()
    inherit_cache = True


@compiles(utc_text, "postgresql")
def _utc_text_postgresql(element: utc_text, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.clauses, **kw)
    return f"""to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"""


@compiles(utc_text, "sqlite")
def _utc_text_sqlite(element: utc_text, compiler: Any, **kw: Any) -> str:
    # SQLite holds SQLAlchemy's naive UTC text, microseconds always: 2024-05-01 09:30:00.000000.
    column = compiler.process(element.clauses, **kw)
    return f"substr({column}, 1, 10) || 'T' || substr({column}, 12) || 'Z'"


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None or value.tzinfo is UTC:  # PostgreSQL's, in a UTC session (db.session)
            return value
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


MONEY_SCALE = 6


class Money(TypeDecorator[Decimal]):
    """Exact decimal money. NUMERIC on PostgreSQL; on SQLite, whose NUMERIC is a float, an integer
    count of millionths, so comparisons, sums and conditional updates stay exact there too."""

    impl = Numeric(24, MONEY_SCALE, asdecimal=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(BigInteger())
        return dialect.type_descriptor(Numeric(24, MONEY_SCALE, asdecimal=True))

    def process_bind_param(self, value: Decimal | int | str | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        amount = Decimal(value)
        if dialect.name == "sqlite":
            scaled = amount.scaleb(MONEY_SCALE)
            if scaled != scaled.to_integral_value():
                raise ValueError(f"{amount} has more than {MONEY_SCALE} decimal places")
            return int(scaled)
        return amount

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        if value is None:
            return None
        if dialect.name == "sqlite":
            return Decimal(int(value)).scaleb(-MONEY_SCALE)
        return Decimal(value)


def _values(enum: type[StrEnum]) -> list[str]:
    return [member.value for member in enum]


def str_enum(enum: type[StrEnum], length: int) -> Enum:
    """A column holding one of `enum`'s values, stored as the plain VARCHAR(length) the migrations
    create (no native enum type, no CHECK), so adding a value needs no migration. Rows load as
    members; binding a string outside the enum raises before it reaches the database."""
    return Enum(
        enum,
        native_enum=False,
        length=length,
        create_constraint=False,
        validate_strings=True,
        values_callable=_values,
    )


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime(), uuid.UUID: Uuid(), Decimal: Money()}


class IdMixin:
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)


def _created_then(context: Any) -> datetime:
    """A new row's `updated_at`: its `created_at`, one instant rather than two readings of the clock
    (a new record was not changed after it was made). That default runs first: the column is first."""
    created: datetime | None = context.get_current_parameters().get("created_at")
    return created if created is not None else utcnow()


class TimestampMixin:
    created_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    updated_at: Mapped[datetime] = mapped_column(default=_created_then, onupdate=utcnow)


class ChangeTracked(TimestampMixin):
    """Timestamps of a record that clients sync with `updated_since` (db.keyset): every write
    moves `updated_at` (the ORM's onupdate, and Core updates of the table; the database's default
    covers Core inserts that leave it out). `company_indexes` order a company's records by creation
    (the lists) and by change (sync). Such a record is only ever read within its company, so those
    two serve every lookup by company or by time: neither `company_id` nor `created_at` has an index
    of its own, which each insert would pay for (migration 0011)."""

    indexes_company_id = False
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        default=_created_then, onupdate=utcnow, server_default=func.now()
    )

    @classmethod
    def company_indexes(cls, table: str) -> tuple[Index, Index]:
        return (
            Index(f"ix_{table}_company_created", "company_id", "created_at", "id"),
            Index(f"ix_{table}_company_updated", "company_id", "updated_at", "id"),
        )


def trigram_index(table: str, column: str) -> Index:
    """For the case-insensitive searches (`lower(column) LIKE '%part%'`, `search_text`): a trigram
    GIN index of the lower-cased column, on PostgreSQL only (pg_trgm, created by migration 0009).

    Of `lower(column)`, not of the column: pg_trgm's index serves `column = value` as well, and
    PostgreSQL misjudges its cost until the table's first VACUUM. With 30,000 devices analyzed but
    not yet vacuumed, the check of a batch's serial numbers (db.bulk_rows.values_taken) looked
    each one up in the trigram index instead of the unique btree, reading the index's pending list
    (entries not yet merged) every time (migration 0012)."""
    lowered = f"{column}_lowered"
    return Index(
        f"ix_{table}_{column}_trgm",
        func.lower(sql_column(column)).label(lowered),
        postgresql_using="gin",
        postgresql_ops={lowered: "gin_trgm_ops"},
    ).ddl_if(dialect="postgresql")


def composed(text: str) -> str:
    """`text` in Unicode's composed form (NFC), in which names, titles and searches are kept: "é"
    typed with a combining accent (as macOS and copy-paste often write it) is the same letter."""
    return unicodedata.normalize("NFC", text)


def search_pattern(text: str) -> str:
    """A LIKE pattern matching `text` (composed) anywhere (its own `%`, `_` and `\\` taken
    literally), for `search_text`."""
    escaped = composed(text).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def search_text(column: Any, pattern: Any) -> ColumnElement[bool]:
    """`column` matches `pattern` (a LIKE pattern escaped with a backslash: `search_pattern`),
    whatever the case: `lower(column) LIKE lower(pattern)`, which the column's trigram index serves
    (`trigram_index`). PostgreSQL's ILIKE is the same comparison in UTF-8, and SQLAlchemy's on
    SQLite is this one."""
    return func.lower(column).like(func.lower(pattern), escape="\\")


class CompanyOwned:
    """Mixin for every table whose rows belong to one company; `db.tenancy` scopes them.
    `company_id` has an index of its own unless the table sets `indexes_company_id = False`, having
    indexes led by it (they serve the lookups, and deleting a company, as well)."""

    indexes_company_id = True

    @declared_attr
    def company_id(cls) -> Mapped[uuid.UUID]:
        return mapped_column(ForeignKey("companies.id", ondelete="CASCADE"), index=cls.indexes_company_id)


def company_key(table: str) -> Index:
    """`UNIQUE (company_id, id)` of a company table another one refers to: what a reference's
    composite foreign key (`company_reference`) points at. A unique index rather than a constraint,
    which SQLite can add without copying the table; PostgreSQL takes either as a foreign key's target."""
    return Index(f"uq_{table}_company_id_id", "company_id", "id", unique=True)


def company_reference(
    table: str, column: str, target: str, ondelete: str | None = None
) -> tuple[ForeignKeyConstraint, ...]:
    """The foreign key of `table.column` to a row of company table `target`, of the same company:
    `(company_id, column) REFERENCES target (company_id, id)`, so the database refuses a row of one
    company that names another's (`target` has `company_key`). A NULL `column` is not checked
    (MATCH SIMPLE).

    ON DELETE SET NULL must clear `column` only, never `company_id`: PostgreSQL (15 and later) says
    so (`SET NULL (column)`). SQLite cannot: there the one-column key clears it, and the composite
    one, with no action of its own, is checked at the end of the statement, once it is cleared."""
    name = f"fk_{table}_{column}_{target}"
    key = (["company_id", column], [f"{target}.company_id", f"{target}.id"])
    if ondelete != "SET NULL":
        return (ForeignKeyConstraint(*key, name=name, ondelete=ondelete),)
    return (
        ForeignKeyConstraint(*key, name=name, ondelete=f"SET NULL ({column})").ddl_if(dialect="postgresql"),
        ForeignKeyConstraint(*key, name=name).ddl_if(dialect="sqlite"),
        ForeignKeyConstraint(
            [column], [f"{target}.id"], name=f"fk_{table}_{column}_{target}_null", ondelete="SET NULL"
        ).ddl_if(dialect="sqlite"),
    )
