"""Schema migrations (Alembic) and the seed step that loads reference data.

This package is Alembic's script directory too (env.py, script.py.mako, versions/). It sits above
the domains: the environment compares against every table of `outfitter.models`, and `upgrade`
seeds the countries and currencies (catalog) and the default fee schedules (payments).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from outfitter.catalog.reference import sync_reference_data
from outfitter.payments.fees import ensure_default_fee_schedules

SCRIPTS = Path(__file__).parent


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(SCRIPTS))
    return config


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest revision, then load any missing countries, currencies and fees."""
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    with Session(engine) as session, session.begin():
        sync_reference_data(session)
        ensure_default_fee_schedules(session)


@lru_cache
def head_revisions() -> frozenset[str]:
    """This release's newest revisions (read from the scripts once: /readyz asks on every probe)."""
    return frozenset(ScriptDirectory.from_config(alembic_config()).get_heads())


def is_current(engine: Engine) -> bool:
    """Whether the schema at `engine` is at this release's newest revision."""
    with engine.connect() as connection:
        return set(MigrationContext.configure(connection).get_current_heads()) == head_revisions()


def autogenerate(engine: Engine, message: str, rev_id: str | None = None) -> None:
    """Write a new revision from the difference between the models and the database at `engine`."""
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.revision(config, message=message, autogenerate=True, rev_id=rev_id)
