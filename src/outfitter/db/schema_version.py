"""This release's schema revision, known without Alembic: every CLI command checks the database is
at it before it runs, and importing Alembic and the migrations costs more than most commands do.
A test keeps it equal to the head of the migration scripts."""

from __future__ import annotations

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

HEAD_REVISION = "0025"


def at_head(engine: Engine) -> bool:
    """Whether the database's schema is this release's; False when it cannot tell (no version
    table), so that the caller's full check (outfitter.migrations) says why."""
    try:
        with engine.connect() as connection:
            versions = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    except DBAPIError:
        return False
    return list(versions) == [HEAD_REVISION]
