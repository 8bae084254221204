"""console users: TOTP keys sealed at rest (core.sealing, with OUTFITTER_SECRET_KEYS)

The column grows to hold a sealed value, and every key kept in clear is sealed with the first of
OUTFITTER_SECRET_KEYS. The downgrade opens them again (every listed key may open them) and gives
the column back its width.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-08 00:30:00.000000
"""

from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic import op

from outfitter.config import get_settings
from outfitter.core.sealing import SEALED, seal, unseal

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _rewrite(change: Callable[[str], str], sealed: bool) -> None:
    connection = op.get_bind()
    users = sa.table("console_users", sa.column("id", sa.Uuid()), sa.column("totp_secret", sa.String()))
    kept = users.c.totp_secret.like(f"{SEALED}%")
    rows = connection.execute(
        sa.select(users.c.id, users.c.totp_secret).where(
            users.c.totp_secret.is_not(None), kept if sealed else sa.not_(kept)
        )
    ).all()
    for user_id, secret in rows:
        connection.execute(users.update().where(users.c.id == user_id).values(totp_secret=change(secret)))


def upgrade() -> None:
    with op.batch_alter_table("console_users", schema=None) as batch_op:
        batch_op.alter_column("totp_secret", existing_type=sa.String(64), type_=sa.String(255))
    keys = tuple(get_settings().secret_keys)
    _rewrite(lambda secret: seal(secret, keys), sealed=False)


def downgrade() -> None:
    keys = tuple(get_settings().secret_keys)
    _rewrite(lambda secret: unseal(secret, keys), sealed=True)
    with op.batch_alter_table("console_users", schema=None) as batch_op:
        batch_op.alter_column("totp_secret", existing_type=sa.String(255), type_=sa.String(64))
