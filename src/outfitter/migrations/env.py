"""Alembic environment. Run through `outfitter db upgrade`; the URL comes from the settings."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from outfitter.migrations import built_here
from outfitter.models import metadata

config = context.config


def run_migrations(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters tables by copying them
        compare_type=True,
        include_object=built_here(connection.dialect.name),
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through outfitter.migrations, which passes a connection")
run_migrations(connection)
