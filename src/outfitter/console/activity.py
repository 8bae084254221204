"""The console's activity log: the company's events as `GET /client/events` reads them (the same
service, filters and cursor pages), each told as a sentence a person reads, with a link to its
record and its data on demand.

A move's "from" status and an edit's changed fields are not in the event itself (its data is the
record after the change): they come from the subject's previous event, which the log's own
`subject_id` and `until` filters find (one indexed read per such event on the page).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session
from starlette.datastructures import QueryParams

from outfitter.console.pages import page, render
from outfitter.console.web import MOUNT_PATH, console_work
from outfitter.core.cursors import decode_cursor, query_fingerprint
from outfitter.core.errors import ValidationFailed
from outfitter.db.keyset import CursorParams, CursorResult
from outfitter.db.tenancy import parse_uuid
from outfitter.events import service as events_service
from outfitter.events.repository import EventFilters, EventRepository
from outfitter.http.pagination import cursor_key
from outfitter.models.events import Event, EventType

router = APIRouter(include_in_schema=False)

PER_PAGE = 25
PATH = f"{MOUNT_PATH}/activity"
# The record pages an event links to, by subject (a transaction's is by its tx_ref: `_record_page`).
RECORD_PAGES = {
    "employee": "employees",
    "department": "departments",
    "equipment": "devices",
    "order": "orders",
    "webhook_endpoint": "integrations/webhooks",
    "location": "locations",
}
GONE = {EventType.EMPLOYEE_OFFBOARDED, EventType.DEPARTMENT_DELETED, EventType.LOCATION_DELETED}
# Fields an edit always changes, or that are other records' (not the subject's own facts).
NOT_FACTS = {
    "updated_at",
    "history",
    "status_changed_at",
    "equipment",
    "orders",
    "open_retrievals",
    "members",
}
# The integrations' subjects (console/integrations.py): the data field naming one, or the words.
INTEGRATION_NAMES = {
    "api_token": ("name", "a token"),
    "webhook_endpoint": ("url", "a webhook endpoint"),
    "webhook_delivery": ("event_type", "an event"),
    "scim_settings": ("", "the SCIM settings"),
}
STATUS_MOVES = {
    EventType.EQUIPMENT_UNASSIGNED,
    EventType.EQUIPMENT_MOVED_TO_STORAGE,
    EventType.EQUIPMENT_SOLD,
    EventType.EQUIPMENT_ARCHIVED,
}
WANT_PREVIOUS = STATUS_MOVES | {
    EventType.EMPLOYEE_UPDATED,
    EventType.DEPARTMENT_UPDATED,
    EventType.EQUIPMENT_UPDATED,
}


def type_choices() -> list[tuple[str, str]]:
    """The type filter's options: each subject's `x.*`, then each type."""
    subjects = [(f"{subject}.*", f"Any {subject} event") for subject in events_service.SUBJECT_TYPES]
    return subjects + [(member.value, member.value) for member in EventType]


# --- the view in the URL ------------------------------------------------------------------------------


def _day(value: str) -> datetime:
    """A date (YYYY-MM-DD, as a date field sends it) or an ISO 8601 time; no offset: UTC."""
    if len(value) == 10:
        return datetime.combine(date.fromisoformat(value), time(), UTC)
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class ActivityQuery:
    type: str = ""
    subject_id: str = ""
    since: str = ""
    until: str = ""
    cursor: str = ""
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, params: QueryParams) -> ActivityQuery:
        def text(name: str, longest: int) -> str:
            return (params.get(name) or "").strip()[:longest]

        return cls(
            type=text("type", 200),
            subject_id=text("subject_id", 100),
            since=text("since", 40),
            until=text("until", 40),
            cursor=text("cursor", 1000),
        )

    def params(self, **changes: Any) -> dict[str, str]:
        view = replace(self, **changes)
        values = {
            "type": view.type,
            "subject_id": view.subject_id,
            "since": view.since,
            "until": view.until,
            "cursor": view.cursor,
        }
        return {name: value for name, value in values.items() if value}

    def window(self) -> tuple[datetime | None, datetime | None]:
        """(since, until) as the service takes them; `until` as a date includes that whole day."""
        bounds: list[datetime | None] = []
        for name in ("since", "until"):
            value = getattr(self, name)
            try:
                moment = _day(value) if value else None
            except ValueError:
                self.errors[name] = "Give a date such as 2025-01-31."
                moment = None
            if moment is not None and name == "until" and len(value) == 10:
                moment += timedelta(days=1)
            bounds.append(moment)
        return bounds[0], bounds[1]


def _cursor_params(query: ActivityQuery) -> CursorParams:
    """Cursor pages bound to the view, as the API's are (`http.pagination`): a cursor made for other
    filters, or altered, is set aside with a message and the first page shown."""
    fingerprint = query_fingerprint(PATH, sorted(query.params(cursor="").items()))
    key = cursor_key()
    after = None
    if query.cursor:
        try:
            after = decode_cursor(key, query.cursor, fingerprint)
        except ValidationFailed as exc:
            query.errors["cursor"] = (exc.errors or {}).get("query.cursor", [exc.message])[0]
    return CursorParams(limit=PER_PAGE, after=after, query=fingerprint, key=key)


def list_events(session: Session, query: ActivityQuery) -> CursorResult[Event]:
    """A page of the log through the API's service; a filter it refuses is noted beside its field
    and left out."""
    since, until = query.window()
    subject = parse_uuid(query.subject_id) if query.subject_id else None
    if query.subject_id and subject is None:
        query.errors["subject_id"] = "Give a record's id, as its page's address shows it."
    kind: str | None = query.type or None
    params = _cursor_params(query)
    while True:
        try:
            result = events_service.list_events(session, params, kind, subject, since, until)
            break
        except ValidationFailed as exc:
            path = next(iter(exc.errors or {}), "")
            name = path.removeprefix("query.")
            query.errors[name] = (exc.errors or {}).get(path, [exc.message])[0]
            if name == "type" and kind is not None:
                kind = None
            elif name == "until" and until is not None:
                until = None
            else:
                raise
    assert isinstance(result, CursorResult)  # cursor mode: CursorParams
    return result


# --- an event as a sentence ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Sentence:
    """`{actor} {verb} <a href>{name}</a> {rest}`, the parts escaped by the template."""

    actor: str
    verb: str
    name: str
    href: str | None
    rest: str = ""

    @property
    def text(self) -> str:
        return " ".join(part for part in (self.actor, self.verb, self.name, self.rest) if part)


def actor_words(actor: str | None) -> str:
    if not actor:
        return "Someone"
    if actor.startswith("console:"):
        return actor
    if actor.startswith("operator:"):  # Outfitter's staff, from the operator console
        return f"Outfitter operator {actor.removeprefix('operator:')}"
    if actor.startswith("token:"):  # `token:<name> (<id>)`: the name reads; the id is in the event
        return f"token {re.sub(r' [(][0-9a-f-]{36}[)]$', '', actor.removeprefix('token:'))}"
    return {"system": "The system", "operator": "An operator"}.get(actor, f"token {actor}")


def _status(value: Any) -> str:
    return str(value or "unknown").replace("_", " ")


def _label(name: str) -> str:
    return name.replace("_", " ")


def _changed(before: dict[str, Any] | None, after: dict[str, Any]) -> str:
    if before is None:
        return ""
    changed = [
        _label(name) for name, value in after.items() if name not in NOT_FACTS and before.get(name) != value
    ]
    return f"(changed {', '.join(changed)})" if changed else ""


def _subject_name(event: Event) -> str:
    data = event.data or {}
    if event.subject_type == "employee":
        return f"{data.get('first_name', '')} {data.get('last_name', '')}".strip() or "an employee"
    if event.subject_type in ("department", "location"):
        return str(data.get("name") or f"a {event.subject_type}")
    if event.subject_type == "equipment":
        return str(data.get("title") or "a device")
    if event.subject_type in ("transaction", "order", "payment_anomaly"):
        return str(data.get("tx_ref") or f"a {event.subject_type}")
    if event.subject_type == "company":
        return str(data.get("name") or "a company")
    if event.subject_type in INTEGRATION_NAMES:  # the field that names it, else how to say it
        field, otherwise = INTEGRATION_NAMES[event.subject_type]
        return str(data.get(field) or otherwise)
    return f"a {event.subject_type}"


def sentence(event: Event, before: dict[str, Any] | None = None) -> Sentence:
    """What happened, as a person says it; `before` is the subject's data at its previous event."""
    data = event.data or {}
    kind = event.type
    verb = {
        EventType.EMPLOYEE_CREATED: "created employee",
        EventType.EMPLOYEE_UPDATED: "edited employee",
        EventType.EMPLOYEE_OFFBOARDED: "offboarded employee",
        EventType.EMPLOYEE_OFFBOARDING_REQUIRED: "asked for the devices of employee",
        EventType.DEPARTMENT_CREATED: "created department",
        EventType.DEPARTMENT_UPDATED: "changed department",
        EventType.DEPARTMENT_DELETED: "deleted department",
        EventType.LOCATION_CREATED: "created location",
        EventType.LOCATION_UPDATED: "changed location",
        EventType.LOCATION_DELETED: "deleted location",
        EventType.EQUIPMENT_ADDED: "added",
        EventType.EQUIPMENT_UPDATED: "edited",
        EventType.EQUIPMENT_ASSIGNED: "assigned",
        EventType.TRANSACTION_INITIATED: "started payment",
        EventType.TRANSACTION_FULFILLED: "completed payment",
        EventType.TRANSACTION_FAILED: "recorded the failure of payment",
        EventType.TRANSACTION_EXPIRED: "expired payment",
        EventType.ORDER_CREATED: "placed order",
        EventType.ORDER_UPDATED: "moved order",
        EventType.ORDER_COMPLETED: "completed order",
        EventType.WALLET_CREDITED: "credited",
        EventType.WALLET_DEBITED: "debited",
        EventType.API_TOKEN_CREATED: "created API token",
        EventType.API_TOKEN_REVOKED: "revoked API token",
        EventType.WEBHOOK_ENDPOINT_CREATED: "registered webhook endpoint",
        EventType.WEBHOOK_ENDPOINT_UPDATED: "changed webhook endpoint",
        EventType.WEBHOOK_ENDPOINT_SECRET_ROTATED: "rotated the secret of webhook endpoint",
        EventType.WEBHOOK_ENDPOINT_PINGED: "pinged webhook endpoint",
        EventType.WEBHOOK_DELIVERY_REPLAYED: "replayed a delivery of",
        EventType.SCIM_SETTINGS_UPDATED: "changed",
        EventType.COMPANY_CREATED: "created the company",
        EventType.COMPANY_UPDATED: "changed the settings of",
        EventType.COMPANY_SUSPENDED: "suspended",
        EventType.COMPANY_REINSTATED: "reinstated",
        EventType.PAYMENT_ANOMALY_RESOLVED: "resolved the payment anomaly of",
    }.get(kind, "moved")
    rest = ""
    if kind in STATUS_MOVES:
        target = _status(data.get("status"))
        was = _status(before.get("status")) if before else target
        rest = f"from {was} to {target}" if was != target else f"to {target}"
    elif kind == EventType.EQUIPMENT_ASSIGNED:
        assignee = data.get("assignee") or {}
        rest = f"to {assignee.get('name') or 'an employee'}"
        if before and before.get("status"):
            rest += f" (was {_status(before['status'])})"
    elif kind == EventType.WEBHOOK_ENDPOINT_UPDATED:
        rest = "(enabled)" if data.get("enabled") else "(disabled)"
    elif kind == EventType.EQUIPMENT_ADDED:
        rest = f"as {_status(data.get('status'))}"
    elif kind in (EventType.EMPLOYEE_UPDATED, EventType.EQUIPMENT_UPDATED):
        rest = _changed(before, data)
    elif kind == EventType.DEPARTMENT_UPDATED:
        rest = _department_change(before, data)
    elif kind in (EventType.TRANSACTION_INITIATED, EventType.ORDER_CREATED):
        if data.get("total_amount") is not None:
            rest = f"of {data.get('currency', '')} {data['total_amount']}".replace("  ", " ")
    elif kind in (EventType.WALLET_CREDITED, EventType.WALLET_DEBITED):
        entry = (data.get("entries") or [{}])[0]
        return Sentence(
            actor_words(event.actor),
            verb,
            f"the {entry.get('currency', '')} wallet".replace("  ", " "),
            f"{MOUNT_PATH}/wallet?{urlencode({'currency': entry.get('currency', '')})}",
            f"{'with' if kind == EventType.WALLET_CREDITED else 'by'} {entry.get('amount', '?')}",
        )
    href = _record_page(event) if kind not in GONE else None
    return Sentence(actor_words(event.actor), verb, _subject_name(event), href, rest)


def _record_page(event: Event) -> str | None:
    if event.subject_type == "transaction":
        tx_ref = (event.data or {}).get("tx_ref")
        return f"{MOUNT_PATH}/transactions/{quote(str(tx_ref))}" if tx_ref else None
    pages = RECORD_PAGES.get(event.subject_type)
    return f"{MOUNT_PATH}/{pages}/{event.subject_id}" if pages else None


def _department_change(before: dict[str, Any] | None, after: dict[str, Any]) -> str:
    if before is None:
        return ""
    changes = []
    if before.get("name") != after.get("name"):
        changes.append(f"renamed from {before.get('name')}")
    head_before, head_after = (before.get("head") or {}), (after.get("head") or {})
    if head_before.get("id") != head_after.get("id"):
        changes.append(f"head {(head_after.get('name') or '').strip() or 'none'}")
    members_before = {member["id"]: member for member in before.get("members") or []}
    members_after = {member["id"]: member for member in after.get("members") or []}

    def names(ids: set[str], members: dict[str, Any]) -> str:
        return ", ".join(f"{members[i]['first_name']} {members[i]['last_name']}" for i in sorted(ids))

    if joined := set(members_after) - set(members_before):
        changes.append(f"added {names(joined, members_after)}")
    if left := set(members_before) - set(members_after):
        changes.append(f"removed {names(left, members_before)}")
    return f"({'; '.join(changes)})" if changes else ""


def previous_data(session: Session, event: Event) -> dict[str, Any] | None:
    """The subject's data at its event before `event`: the log read with `subject_id` and `until`,
    one row."""
    if event.type not in WANT_PREVIOUS:
        return None
    filters = EventFilters(subject_id=event.subject_id, until=event.created_at)
    params = CursorParams(limit=1, after=None, query="previous", key=cursor_key())
    found = EventRepository(session).cursor_page(filters, params).items
    return found[0].data if found else None


@dataclass(frozen=True)
class Told:
    event: Event
    sentence: Sentence


def told(session: Session, events: list[Event]) -> list[Told]:
    return [Told(event, sentence(event, previous_data(session, event))) for event in events]


# --- the pages -----------------------------------------------------------------------------------------


@router.get("/activity")
@page
def activity_page(request: Request) -> Response:
    query = ActivityQuery.parse(request.query_params)
    with console_work(request) as work:
        result = list_events(work.session, query)
        return render(
            request,
            "activity.html",
            user=work.user,
            nav="activity",
            query=query,
            events=told(work.session, result.items),
            next_cursor=result.next_cursor,
            types=type_choices(),
            urlencode=urlencode,
        )


@router.get("/activity/{event_id}")
@page
def event_page(request: Request, event_id: str) -> Response:
    with console_work(request) as work:
        event = events_service.get_event(work.session, event_id)  # another company's: 404
        return render(
            request,
            "event.html",
            user=work.user,
            nav="activity",
            item=told(work.session, [event])[0],
        )
