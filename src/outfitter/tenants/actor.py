"""Who makes a change: the one shape every service takes after its session."""

from __future__ import annotations

import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class Actor:
    """A company's token, console user or operator command, as the services know it: the company
    it acts in, the scopes it holds, and the name its changes are recorded under."""

    company_id: uuid.UUID
    company_name: str
    scopes: frozenset[str]
    name: str
    token_id: uuid.UUID | None = None  # None for a console user or an operator command
