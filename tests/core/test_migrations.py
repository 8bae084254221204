"""The migrations build exactly the schema the models describe, on both databases."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine

from outfitter.migrations import is_current, upgrade
from outfitter.models import metadata


def test_migrated_schema_matches_the_models(engine: Engine) -> None:
    with engine.connect() as connection:
        differences = compare_metadata(
            MigrationContext.configure(connection, opts={"compare_type": True}), metadata
        )
    assert differences == []


def test_upgrade_is_idempotent_and_current(engine: Engine) -> None:
    upgrade(engine)  # a second run changes nothing and fails on nothing
    assert is_current(engine)
