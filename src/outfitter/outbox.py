"""Recording events: the one way a change a client can see announces itself.

Services call `record_event` (or `record_events` for a batch) in the request's own session, next to
the change, so the event commits with it or not at all: the unit of work commits once, after the
answer is rendered, and rolls everything back on any failure. `data` is the subject as the API
answers it after the change (before it, for `*.deleted`): pass the response schema's JSON form
(`as_event_data(EmployeeOut, employee)`), never ORM objects.

A batch is one INSERT (a COPY on PostgreSQL for a large one: db.company_writes), whatever its size, so
bulk work stays a constant number of statements.

Outgoing webhooks are fanned out here too, in the same transaction (an outbox): a delivery row per
(event, enabled endpoint of the company that wants its type). One event (the commonest write) is
one `INSERT ... SELECT` from `webhook_endpoints`, its payload a parameter; a batch is one SELECT of
the endpoints (indexed; a company with none pays only that) and one INSERT of the rows, their
payloads built here. Nothing is sent from the request: a worker
(`outfitter.worker`) claims the rows once they are committed; a rolled-back request leaves none.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import (
    CTE,
    BindParameter,
    ColumnElement,
    Insert,
    Table,
    Text,
    bindparam,
    cast,
    exists,
    func,
    literal,
    or_,
    select,
    true,
)
from sqlalchemy import event as sqlalchemy_event
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session
from sqlalchemy.sql import Select

from outfitter.core import metrics
from outfitter.core.schemas import adapter_of
from outfitter.core.timestamps import format_timestamp
from outfitter.core.tracing import current_trace_id
from outfitter.db.base import new_id, time_ordered_uuid, utcnow
from outfitter.db.company_writes import company_insert, company_insert_statement
from outfitter.db.session import JsonText
from outfitter.db.tenancy import company_named
from outfitter.models.events import Event, EventType
from outfitter.models.webhooks import DeliveryStatus, WebhookDelivery, WebhookEndpoint

SYSTEM_ACTOR = "system"
# session.info: the events this transaction wrote, by type, counted (core.metrics) once it commits.
_TO_COUNT = "outfitter.events_to_count"


@dataclass(frozen=True)
class NewEvent:
    type: EventType
    subject_id: uuid.UUID
    data: Mapping[str, Any] | JsonText


def as_event_data(schema: Any, value: Any) -> dict[str, Any]:
    """`value` rendered through the API's response `schema`, as plain JSON values (the same
    timestamps, decimal strings and field names a client reads)."""
    adapter = adapter_of(schema)
    rendered = adapter.dump_python(adapter.validate_python(value, from_attributes=True), mode="json")
    assert isinstance(rendered, dict)
    return rendered


def rendered_event_data(rendered: bytes) -> JsonText:
    """The data of an event whose subject's answer is already rendered (`core.schemas.render_as`):
    the same JSON `as_event_data` gives, kept as its text (`db.session.JsonText`), which the event
    and its deliveries' payloads store as it is, never parsed again."""
    return JsonText(rendered.decode())


def record_event(
    session: Session,
    type: EventType,
    subject_id: uuid.UUID,
    data: Mapping[str, Any],
    *,
    actor: str | None = None,
    company_id: uuid.UUID | None = None,
) -> uuid.UUID:
    """Write one event in `session`'s transaction and answer its id."""
    return record_events(session, [NewEvent(type, subject_id, data)], actor=actor, company_id=company_id)[0]


def record_events(
    session: Session,
    events: Sequence[NewEvent],
    *,
    actor: str | None = None,
    company_id: uuid.UUID | None = None,
) -> list[uuid.UUID]:
    """Write `events` in one statement. The company is the bound session's (`company_id`, if
    given, must be it); a session working across companies (a gateway webhook, the worker) must
    name it with `company_id`."""
    if not events:
        return []
    rows = event_rows(session, events, actor=actor, company_id=company_id)
    record_event_rows(session, rows)
    return [row["id"] for row in rows]


def record_event_rows(session: Session, rows: Sequence[Mapping[str, Any]]) -> None:
    """Write events made by `event_rows` (of one company), with their deliveries."""
    if not rows:
        return
    company = rows[0]["company_id"]
    if len(rows) == 1:  # the commonest write
        _record_one(session, company, rows[0])
        return
    company_insert(session, Event, rows)  # flushes first: the changes the events describe come first
    queue_deliveries(session, company, rows)


def event_rows(
    session: Session,
    events: Sequence[NewEvent],
    *,
    actor: str | None = None,
    company_id: uuid.UUID | None = None,
) -> list[dict[str, Any]]:
    """The rows `record_events` writes for `events` (for a batch that writes them itself, with its
    deliveries: `enabled_endpoints`, `delivery_rows`)."""
    company = company_named(session, company_id)
    now = utcnow()
    trace_id = current_trace_id.get()
    if metrics.active is not None:
        counted: dict[str, int] = session.info.setdefault(_TO_COUNT, {})
        for event in events:
            counted[event.type] = counted.get(event.type, 0) + 1
    return [
        {
            "id": new_id(),
            "company_id": company,
            "type": event.type,
            "subject_type": event.type.subject_type,
            "subject_id": event.subject_id,
            "actor": actor or SYSTEM_ACTOR,
            # A batch keeps its order in the log (newest first): a microsecond apart.
            "created_at": now + timedelta(microseconds=position),
            # not copied: the events of one subject share their data, written once (db.copy_rows)
            "data": event.data if isinstance(event.data, dict | JsonText) else dict(event.data),
            "trace_id": trace_id,  # the request's (core.tracing); its deliveries carry it too
        }
        for position, event in enumerate(events)
    ]


@sqlalchemy_event.listens_for(Session, "after_commit")
def _count_committed_events(session: Session) -> None:
    counted = session.info.pop(_TO_COUNT, None)
    if counted and metrics.active is not None:
        metrics.active.events_written(counted.items())


@sqlalchemy_event.listens_for(Session, "after_soft_rollback")
def _forget_rolled_back_events(session: Session, _previous: Any) -> None:
    session.info.pop(_TO_COUNT, None)


# Held FOR KEY SHARE (PostgreSQL) until the write commits, as in `_deliveries_select`.
_ENABLED_ENDPOINTS = (
    select(WebhookEndpoint.id, WebhookEndpoint.event_types)
    .where(WebhookEndpoint.company_id == bindparam("company"), WebhookEndpoint.enabled.is_(True))
    .with_for_update(read=True, key_share=True)
)


def webhook_payload(
    event_id: uuid.UUID, type: str, created_at: datetime, data: Mapping[str, Any] | JsonText
) -> dict[str, Any] | JsonText:
    """The body of a delivery, as the Standard Webhooks specification shapes it; data kept as its
    text is embedded as it is (the payload is text too)."""
    head = {"id": str(event_id), "type": type, "timestamp": format_timestamp(created_at)}
    if isinstance(data, JsonText):
        return JsonText(orjson.dumps({**head, "data": orjson.Fragment(data.text)}).decode())
    return {**head, "data": dict(data)}


def queue_deliveries(session: Session, company: uuid.UUID, events: Sequence[Mapping[str, Any]]) -> None:
    """One delivery row per (event, enabled endpoint of `company` that wants its type), for a batch
    of events (one event's are written with it: `_record_one`). `events` are rows as written to
    `events` (id, type, created_at, data)."""
    company_insert(
        session, WebhookDelivery, delivery_rows(company, enabled_endpoints(session, company), events)
    )


def enabled_endpoints(session: Session, company: uuid.UUID) -> list[tuple[uuid.UUID, list[str]]]:
    """The company's enabled webhook endpoints, each with the event types it wants (empty: all)."""
    return [
        (endpoint_id, wanted)
        for endpoint_id, wanted in session.execute(_ENABLED_ENDPOINTS, {"company": company})
    ]


def delivery_rows(
    company: uuid.UUID,
    endpoints: Sequence[tuple[uuid.UUID, list[str]]],
    events: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """A delivery row per (event, endpoint that wants its type); `events` as `event_rows` makes them."""
    return [
        {
            "id": new_id(),
            "company_id": company,
            "endpoint_id": endpoint_id,
            "event_id": event["id"],
            "event_type": str(event["type"]),
            "payload": webhook_payload(event["id"], str(event["type"]), event["created_at"], event["data"]),
            "status": DeliveryStatus.PENDING,
            "attempts": 0,
            "round_started_at": event["created_at"],
            "round_attempts": 0,
            "next_attempt_at": event["created_at"],
            "created_at": event["created_at"],
            "trace_id": event.get("trace_id"),
        }
        for event in events
        for endpoint_id, wanted in endpoints
        if not wanted or str(event["type"]) in wanted  # as _wants_type says it in SQL
    ]


def _record_one(session: Session, company: uuid.UUID, event: Mapping[str, Any]) -> None:
    """One event and its deliveries. On PostgreSQL one statement, `WITH event AS (INSERT INTO events
    ...) INSERT INTO webhook_deliveries ... SELECT ... FROM webhook_endpoints ...` (a statement costs
    more of the request's CPU than what it writes); SQLite has no data-modifying CTE, so there the
    event's INSERT, then its deliveries'. The same rows either way, bound to the company by
    db.company_writes."""
    if session.get_bind().dialect.name != "postgresql":
        company_insert(session, Event, [event])  # flushes first: the changes it describes come first
        _queue_deliveries_of_one(session, company, event)
        return
    company_insert(session, _event_and_deliveries(), parameters={**event, **_delivery_values(company, event)})


@dataclass(frozen=True)
class InsertSelect:
    """An INSERT ... SELECT to be built by `company_insert_statement`, with what the caller adds."""

    table: Table
    columns: tuple[str, ...]
    rows: Select[Any]

    def statement(self, *, returning: Sequence[str] = (), ctes: Sequence[CTE] = ()) -> Insert:
        return company_insert_statement(
            self.table, columns=self.columns, select=self.rows, returning=returning, ctes=ctes
        )


def events_written_with(gate: CTE, columns: tuple[str, ...], count: int) -> list[InsertSelect]:
    """PostgreSQL: the INSERTs of `count` events (rows with `columns`, as `event_rows` makes them)
    and of their deliveries, for the statement that writes the change they announce: each selects
    from `gate`, that change's data-modifying CTE (it RETURNs the row's `company_id`, which the
    events take), so nothing is written unless it wrote its row. In order: the first event, its
    deliveries, the second event, ... The caller makes them CTEs of that statement (or one of them
    the statement itself): a create is then one statement, and a create refused by a unique
    constraint announces nothing. Parameters as `events_written_with_values` names them."""
    table: Table = getattr(Event, "__table__")  # noqa: B009 (typed as a Table)
    inserts: list[InsertSelect] = []
    for position in range(count):
        row = select(
            *(
                gate.c.company_id
                if name == "company_id"
                else bindparam(f"event_{position}_{name}", type_=table.c[name].type)
                for name in columns
            )
        )
        deliveries = _deliveries_select(f"delivery_{position}_", "postgresql", gate)
        inserts.append(InsertSelect(table, columns, row))
        inserts.append(InsertSelect(_delivery_table(), _DELIVERY_COLUMNS, deliveries))
    return inserts


def events_written_with_values(company: uuid.UUID, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The parameters of `events_written_with` for event rows of `company`."""
    values: dict[str, Any] = {"company_id": company}
    for position, row in enumerate(rows):
        values |= {f"event_{position}_{name}": value for name, value in row.items() if name != "company_id"}
        delivery = _delivery_values(company, row)
        values |= {
            f"delivery_{position}_{name}": value for name, value in delivery.items() if name != "company_id"
        }
    return values


def _queue_deliveries_of_one(session: Session, company: uuid.UUID, event: Mapping[str, Any]) -> None:
    """The deliveries of one event as one `INSERT ... SELECT` from the company's endpoints: the
    same rows as a batch's, with no read first (db.company_writes proves the SELECT the company's)."""
    dialect = session.get_bind().dialect.name
    company_insert(session, _deliveries_of_one(dialect), parameters=_delivery_values(company, event))


def _delivery_values(company: uuid.UUID, event: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of `_deliveries_of_one` for `event`, a row as written to `events`."""
    type = str(event["type"])
    return {
        "company_id": company,
        "event_id": event["id"],
        "event_type": type,
        "payload": webhook_payload(event["id"], type, event["created_at"], event["data"]),
        "created_at": event["created_at"],
        "trace_id": event.get("trace_id"),
    }


@functools.cache
def _event_and_deliveries() -> Insert:
    """PostgreSQL's one statement for an event and its deliveries: the event's row (parameters
    named as its columns) as a CTE of `_deliveries_of_one`."""
    table: Table = getattr(Event, "__table__")  # noqa: B009 (typed as a Table)
    written = company_insert_statement(table, columns=[column.name for column in table.c])
    rows = _deliveries_select("", "postgresql", None)
    return company_insert_statement(
        _delivery_table(), columns=_DELIVERY_COLUMNS, select=rows, ctes=[written.cte("event")]
    )


@functools.cache
def _deliveries_of_one(dialect: str) -> Insert:
    rows = _deliveries_select("", dialect, None)
    return company_insert_statement(_delivery_table(), columns=_DELIVERY_COLUMNS, select=rows)


_DELIVERY_COLUMNS = (
    "id",
    "company_id",
    "endpoint_id",
    "event_id",
    "event_type",
    "payload",
    "status",
    "attempts",
    "round_started_at",
    "round_attempts",
    "next_attempt_at",
    "created_at",
    "trace_id",
)


def _delivery_table() -> Table:
    table: Table = getattr(WebhookDelivery, "__table__")  # noqa: B009 (typed as a Table)
    return table


def _deliveries_select(prefix: str, dialect: str, gate: CTE | None) -> Select[Any]:
    """The delivery rows of one event (parameters `<prefix>event_id`, `<prefix>event_type`,
    `<prefix>payload`, `<prefix>created_at`, `<prefix>trace_id` and `company_id`): one per enabled
    endpoint of the company that wants its type; none unless `gate`, if given, wrote its row."""
    endpoint: Table = getattr(WebhookEndpoint, "__table__")  # noqa: B009 (typed as a Table)
    delivery = _delivery_table()
    created_at = bindparam(f"{prefix}created_at", type_=delivery.c.created_at.type)
    event_type = bindparam(f"{prefix}event_type", type_=delivery.c.event_type.type)
    rows = select(
        time_ordered_uuid(),
        endpoint.c.company_id,
        endpoint.c.id,
        bindparam(f"{prefix}event_id", type_=delivery.c.event_id.type),
        event_type,
        bindparam(f"{prefix}payload", type_=delivery.c.payload.type),
        literal(DeliveryStatus.PENDING, delivery.c.status.type),
        literal(0),
        created_at,
        literal(0),
        created_at,
        created_at,
        bindparam(f"{prefix}trace_id", type_=delivery.c.trace_id.type),
    ).where(
        endpoint.c.company_id == bindparam("company_id", type_=endpoint.c.company_id.type),
        endpoint.c.enabled.is_(True),
        _wants_type(endpoint.c.event_types, event_type, dialect),
    )
    # Each endpoint is held FOR KEY SHARE until the write commits: a DELETE of it waits, then takes
    # these deliveries with it (ON DELETE CASCADE); one committed first leaves no row here to hold.
    # Unheld, the read found an endpoint whose DELETE then committed, and the deliveries' foreign
    # key failed the write. SQLite's writers run one at a time and have no such lock.
    rows = rows.with_for_update(read=True, key_share=True, of=endpoint)
    # The gate is one row or none: joined on true, each endpoint's row is kept or none is.
    return rows if gate is None else rows.select_from(endpoint.join(gate, true()))


def _wants_type(event_types: Any, wanted: BindParameter[str], dialect: str) -> ColumnElement[bool]:
    """An endpoint's `event_types` (a JSON array) is empty (every type) or holds `wanted`."""
    if dialect == "postgresql":
        holds = cast(event_types, JSONB).contains(func.jsonb_build_array(cast(wanted, Text)))
    else:
        item = func.json_each(event_types).table_valued("value")
        holds = exists(select(literal(1)).select_from(item).where(item.c.value == wanted))
    return or_(func.json_array_length(event_types) == 0, holds)
