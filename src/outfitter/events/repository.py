"""Every query of the activity log. The session is bound to the company and scopes each one."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Select, func, select

from outfitter.db.keyset import CursorParams, CursorResult, PageParams, PageResult, cursor_page, newest_first
from outfitter.db.tenancy import CompanyRepository
from outfitter.events.counts import KEPT_TOTAL
from outfitter.models.events import Event, EventType


@dataclass(frozen=True)
class EventFilters:
    """Already validated: the exact types a `type` filter names (prefixes expanded), a subject,
    and the window `since <= created_at < until`."""

    types: tuple[EventType, ...] = ()
    subject_id: uuid.UUID | None = None
    since: datetime | None = None
    until: datetime | None = None

    def conditions(self) -> list[ColumnElement[bool]]:
        # A prefix is an IN list of exact types, so each filter is a range of one composite index.
        conditions: list[ColumnElement[bool]] = []
        if self.types:
            conditions.append(Event.type.in_(self.types))
        if self.subject_id is not None:
            conditions.append(Event.subject_id == self.subject_id)
        if self.since is not None:
            conditions.append(Event.created_at >= self.since)
        if self.until is not None:
            conditions.append(Event.created_at < self.until)
        return conditions


class EventRepository(CompanyRepository[Event]):
    model = Event
    label = "Event"

    def cursor_page(self, filters: EventFilters, params: CursorParams) -> CursorResult[Event]:
        """A cursor page, newest first: one statement on the order's index, no count."""
        return cursor_page(
            self.session, select(Event).where(*filters.conditions()), newest_first(Event), params
        )

    def page(self, filters: EventFilters, params: PageParams) -> PageResult[Event]:
        """One page, newest first (id breaks ties), with its exact total: two statements.

        The unfiltered total is the company's kept count on PostgreSQL (`events.counts`); a
        filtered one, and any on SQLite, is counted on the composite indexes of `models/events.py`
        (index-only on PostgreSQL). The page's ids are read from those indexes and only the page's
        own rows are then fetched. A page in the back half is read from the other end (oldest
        first, a short offset), so the last page costs what the first does.
        """
        conditions = filters.conditions()
        total = self.session.scalar(self._total(conditions)) or 0
        start = params.offset
        end = min(start + params.per_page, total)
        if start >= end:
            return PageResult(items=[], total=total, params=params)
        backwards = start > total - end
        order = (Event.created_at, Event.id)
        ids = (
            select(Event.id, Event.created_at)
            .where(*conditions)
            .order_by(*(column.asc() if backwards else column.desc() for column in order))
            .offset(total - end if backwards else start)
            .limit(end - start)
            .subquery()
        )
        statement = (
            select(Event).join(ids, ids.c.id == Event.id).order_by(ids.c.created_at.desc(), ids.c.id.desc())
        )
        return PageResult(items=list(self.session.scalars(statement)), total=total, params=params)

    def _total(self, conditions: list[ColumnElement[bool]]) -> Select[int]:
        if not conditions and self.session.get_bind().dialect.name == "postgresql":
            return KEPT_TOTAL
        return select(func.count()).select_from(Event).where(*conditions)
