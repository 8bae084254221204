"""Read plans: a hot read written once, run by either driver.

A read plan is a generator that yields `Read(statement, parameters)`, receives that statement's
rows, and returns its result (see `equipment/reads.py`). Two drivers run the same plan:

- `run_in_session` on a request's SQLAlchemy session (SQLite, and every read inside a write);
- `AsyncpgReads` (db.asyncpg_reads) on the event loop through asyncpg (PostgreSQL's read-only hot
  paths), with no worker thread and none of SQLAlchemy's per-statement execution machinery, which
  profiles showed cost more than the database itself (docs/architecture.md has the figures).

Tenancy stays structural on both: a scoped `Read` goes through `db.tenancy`'s scoping, the very
option the session adds, so the compiled SQL carries `company_id = $n` and the company is always a
bound parameter. Statements are compiled once for asyncpg and kept as long as the statement object
lives (hot statements are module constants or cached per filter shape).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Executable, Row
from sqlalchemy.orm import Session

from outfitter.db.tenancy import TenantScopeError, company_rows, touches_company_data

T = TypeVar("T")


@dataclass(frozen=True)
class Read:
    """One statement of a plan. `scoped`: the statement reads company data and is scoped to the
    request's company; False only for what belongs to no company (tokens, reference data), which
    both drivers check: an unscoped read of a company's table is refused, never run."""

    statement: Executable
    parameters: dict[str, Any] = field(default_factory=dict)
    scoped: bool = True


def unscoped_statement(read: Read) -> Executable:
    if touches_company_data(read.statement):
        raise TenantScopeError("Read(scoped=False) of a company's table: company data is read scoped")
    return read.statement


# A plan's rows have attribute access on both drivers (SQLAlchemy's Row, or a named tuple).
ReadPlan = Generator[Read, Sequence[Any], T]


def run_in_session(session: Session, plan: ReadPlan[T]) -> T:
    """Run `plan` on a SQLAlchemy session: scoped reads as `company_rows` runs them."""
    rows: Sequence[Row[Any]] | None = None
    try:
        while True:
            read = plan.send(rows)  # type: ignore[arg-type]  # None starts the generator
            if read.scoped:
                rows = company_rows(session, read.statement, read.parameters)  # type: ignore[arg-type]
            else:
                rows = session.connection().execute(unscoped_statement(read), read.parameters).all()
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
