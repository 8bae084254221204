"""Schema migrations (Alembic) and the seed step that loads reference data.

This package is Alembic's script directory too (env.py, script.py.mako, versions/). It sits above
the domains: the environment compares against every table of `outfitter.models`, and `upgrade`
seeds the countries and currencies (catalog) and the default fee schedules (payments).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, Index, TextClause, inspect
from sqlalchemy.orm import Session

import outfitter.models  # noqa: F401  (every table, in Base.metadata)
from outfitter.catalog.reference import sync_reference_data
from outfitter.config.database_url import display_database_url
from outfitter.db.base import Base
from outfitter.db.session import one_at_a_time
from outfitter.payments.fees import ensure_default_fee_schedules

SCRIPTS = Path(__file__).parent
MIGRATION = "outfitter migration"  # what concurrent upgrades wait on (db.session.one_at_a_time)


def built_here(dialect: str) -> Callable[[Any, str | None, str, bool, Any], bool]:
    """Alembic's `include_object` for a database of `dialect`: leaves out what the models build on
    another database only (`ddl_if`: PostgreSQL's claim index, SQLite's), which Alembic would
    otherwise find missing, and an index of an expression given as SQL text (the SCIM identity's),
    which it cannot compare."""

    def include(item: Any, _name: str | None, _type: str, reflected: bool, compare_to: Any) -> bool:
        declared = compare_to if reflected else item
        if isinstance(declared, Index) and any(isinstance(part, TextClause) for part in declared.expressions):
            return False  # an expression written as SQL text: Alembic can compare it on neither side
        only_on = getattr(item, "_ddl_if", None)
        return only_on is None or only_on.dialect in (None, dialect)

    return include


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(SCRIPTS))
    return config


@contextmanager
def migrating(engine: Engine) -> Iterator[Config]:
    """Alembic's configuration holding a connection of `engine` in a transaction, for a command.

    On SQLite the connection's foreign keys are off while the migrations run, as Alembic requires
    of its batch mode: SQLite alters a table by copying it, and dropping the old copy with the keys
    on would run the ON DELETE action of every row referring to it (a downgrade that copied
    `employees` set every device's assignee to NULL). The keys are checked before the transaction
    commits (`PRAGMA foreign_key_check`), and put back on after; SQLite ignores the pragma inside
    a transaction, so it goes to the driver's connection around it."""
    config = alembic_config()
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            _sqlite_foreign_keys(connection, "OFF")
        try:
            with connection.begin():
                config.attributes["connection"] = connection
                yield config
                if sqlite and (broken := connection.exec_driver_sql("PRAGMA foreign_key_check").all()):
                    raise RuntimeError(f"the migration leaves rows referring to nothing: {broken[:10]}")
        finally:
            if sqlite:
                _sqlite_foreign_keys(connection, "ON")


def _sqlite_foreign_keys(connection: Connection, state: str) -> None:
    driver = connection.connection.driver_connection
    assert driver is not None
    driver.execute(f"PRAGMA foreign_keys={state}")


class SchemaAhead(Exception):
    """The database was migrated by a newer release: this one cannot know its schema."""

    def __init__(self, revisions: frozenset[str]) -> None:
        super().__init__(", ".join(sorted(revisions)))
        self.revisions = revisions


class SchemaUnversioned(Exception):
    """The database holds tables of ours but no revision (a restore without `alembic_version`):
    migrating it from the start would fail on the first table, after a page of traceback."""

    def __init__(self, tables: Collection[str]) -> None:
        super().__init__(", ".join(sorted(tables)))
        self.tables = sorted(tables)


def upgrade(engine: Engine) -> frozenset[str]:
    """Bring the schema to the newest revision and load any missing countries, currencies and
    fees, in one transaction; answers the revisions it found. SchemaAhead if a newer release
    migrated it (Alembic would fail on a revision it lacks), SchemaUnversioned if it has our tables
    and no revision.
    Upgrades of one database run one at a time (every host's start script may run one): the next
    finds the schema current and changes nothing (and answers the current revision)."""
    with migrating(engine) as config:
        connection: Connection = config.attributes["connection"]
        one_at_a_time(connection, MIGRATION)
        revisions = frozenset(MigrationContext.configure(connection).get_current_heads())
        if revisions - known_revisions():
            raise SchemaAhead(revisions)
        if not revisions and (ours := set(inspect(connection).get_table_names()) & set(Base.metadata.tables)):
            raise SchemaUnversioned(ours)
        command.upgrade(config, "head")
        # In the migration's transaction: an upgrade cut short leaves the schema where it was,
        # never at the newest revision without its countries, currencies and fees (which every
        # check of the schema would have taken for a ready database).
        with Session(bind=connection) as session:
            sync_reference_data(session)
            ensure_default_fee_schedules(session)
            session.flush()
    return revisions


@lru_cache
def head_revisions() -> frozenset[str]:
    """This release's newest revisions (read from the scripts once: /readyz asks on every probe)."""
    return frozenset(ScriptDirectory.from_config(alembic_config()).get_heads())


@lru_cache
def known_revisions() -> frozenset[str]:
    """Every revision this release has a script for."""
    scripts = ScriptDirectory.from_config(alembic_config())
    return frozenset(script.revision for script in scripts.walk_revisions())


def current_revisions(engine: Engine) -> frozenset[str]:
    with engine.connect() as connection:
        return frozenset(MigrationContext.configure(connection).get_current_heads())


def schema_state(engine: Engine) -> Literal["current", "behind", "ahead"]:
    """`current` at this release's newest revision, `ahead` when a newer release migrated it (at a
    revision this release does not know: after a rollback, say), otherwise `behind`."""
    return _state_at(current_revisions(engine))


def _state_at(revisions: frozenset[str]) -> Literal["current", "behind", "ahead"]:
    if revisions == head_revisions():
        return "current"
    return "ahead" if revisions - known_revisions() else "behind"


def schema_problem(engine: Engine) -> str | None:
    """None when the schema at `engine` is this release's, otherwise one line for an operator that
    names the database and what to do (the commands and `uvicorn outfitter.asgi:app` print it)."""
    revisions = current_revisions(engine)
    state = _state_at(revisions)
    if state == "ahead":
        return schema_ahead_message(engine, revisions)
    if state == "behind":
        return schema_behind_message(engine)
    return None


def named_database(engine: Engine) -> str:
    return display_database_url(engine.url.render_as_string(hide_password=False))


def schema_behind_message(engine: Engine) -> str:
    return (
        f"the database schema is not up to date in {named_database(engine)}: run 'outfitter db upgrade' first"
    )


def schema_ahead_message(engine: Engine, revisions: Collection[str]) -> str:
    """A revision this release has no script for: a newer release's, most often; or another
    application's, whose migrations keep their revision in the same alembic_version table."""
    return (
        f"the database schema in {named_database(engine)} is at a revision this release does not know "
        f"({', '.join(sorted(revisions))}; this release ends at {', '.join(sorted(head_revisions()))}): "
        "a newer release migrated it, or another application's migrations share its alembic_version "
        "table; run the release that migrated it, or restore a backup taken before"
    )


def is_current(engine: Engine) -> bool:
    """Whether the schema at `engine` is at this release's newest revision."""
    return schema_state(engine) == "current"


def autogenerate(engine: Engine, message: str, rev_id: str | None = None) -> None:
    """Write a new revision from the difference between the models and the database at `engine`."""
    with migrating(engine) as config:
        command.revision(config, message=message, autogenerate=True, rev_id=rev_id)
