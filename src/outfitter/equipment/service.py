"""Equipment rules: what a list filters on, what a client may register and change, and that every
status change goes through `lifecycle.move`."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from outfitter.catalog.reference import (
    CountryRef,
    country_id_plan,
    resolve_country,
    resolve_country_ref,
    resolve_currency,
)
from outfitter.core.errors import Conflict, NotFound, ValidationFailed
from outfitter.core.schemas import render_as
from outfitter.customfields.filters import CustomFilter, parse_filters
from outfitter.customfields.records import (
    DEFINITION_ROWS,
    CheckedValues,
    FieldSet,
    field_set,
    field_set_of_rows,
    value_errors,
)
from outfitter.db.base import new_id, utcnow
from outfitter.db.clock import FEED_HOLDERS, NO_HORIZON, SYNC_HORIZON, held_too_long, warn_held
from outfitter.db.keyset import CursorParams, ListParams, ListResult
from outfitter.db.reads import Read, ReadPlan, run_in_session
from outfitter.db.tenancy import company_of
from outfitter.equipment import lifecycle, placement, presenters
from outfitter.equipment.events import answered_events, record_equipment_events, status_event
from outfitter.equipment.filters import EquipmentFilters, EquipmentSort
from outfitter.equipment.reads import (
    capped_count,
    cursor_rows,
    detail_row,
    history_rows,
    page_rows,
)
from outfitter.equipment.repository import EquipmentRepository
from outfitter.equipment.schemas import (
    EquipmentCreate,
    EquipmentFields,
    EquipmentOut,
    EquipmentPatch,
)
from outfitter.locations.reads import subtree_path_plan
from outfitter.locations.service import device_location
from outfitter.models import (
    Currency,
    CustomFieldEntity,
    Employee,
    Equipment,
    EquipmentSource,
    EquipmentStatus,
    EquipmentType,
    fold_spec,
)
from outfitter.models.events import EventType
from outfitter.outbox import event_rows
from outfitter.people.repository import UNKNOWN_EMPLOYEE, offboarded
from outfitter.tenants.actor import Actor

MAX_SERIAL_FILTER = 100
# Plain columns a client edits as given (title, references and specs have their own rules).
PLAIN_FIELDS = (
    "make",
    "model",
    "year",
    "type",
    "state",
    "serial_number",
    "purchase_date",
    "purchase_price",
    "description",
    "image_url",
    "other_details",
)


def resolve_filters(session: Session, **filters: Any) -> EquipmentFilters:
    return run_in_session(session, filters_plan(**filters))


def filters_plan(
    *,
    status: EquipmentStatus | None = None,
    type: EquipmentType | None = None,
    memory: str | None = None,
    storage: str | None = None,
    country: str | None = None,
    serial_number: str | None = None,
    q: str | None = None,
    custom: Mapping[str, str] | None = None,
    location_id: str | None = None,
    home_location_id: str | None = None,
) -> ReadPlan[EquipmentFilters]:
    """Query values as the list compares them; an unknown country is 422 naming query.country, an
    unknown custom field 422 naming its parameter (`query.cf_imei`), an unknown location
    query.location_id (a location filter takes everything beneath it too)."""
    custom_found: tuple[CustomFilter, ...] = ()
    if custom:
        rows = yield Read(DEFINITION_ROWS, {"entity": CustomFieldEntity.DEVICE.value})
        custom_found = parse_filters(field_set_of_rows(CustomFieldEntity.DEVICE, rows), custom)
    country_id = (yield from country_id_plan(country, "query.country")) if country else None
    # `location_id=` (empty) is a 422 naming it, never every location.
    location_path = (
        (yield from subtree_path_plan(location_id, "query.location_id")) if location_id is not None else None
    )
    home_path = (
        (yield from subtree_path_plan(home_location_id, "query.home_location_id"))
        if home_location_id is not None
        else None
    )
    serials = tuple(dict.fromkeys(part.strip() for part in (serial_number or "").split(",") if part.strip()))
    if len(serials) > MAX_SERIAL_FILTER:
        raise ValidationFailed.field(
            "query.serial_number", f"Give at most {MAX_SERIAL_FILTER} serial numbers at once."
        )
    return EquipmentFilters(
        status=status,
        type=type,
        memory_key=fold_spec(memory),
        storage_key=fold_spec(storage),
        country_id=country_id,
        serial_numbers=serials,
        search=(q or "").strip() or None,
        custom=custom_found,
        location_path=location_path,
        home_location_path=home_path,
    )


def list_plan(
    filters: EquipmentFilters, params: ListParams, sort: EquipmentSort | None = None
) -> ReadPlan[tuple[list[dict[str, Any]], ListResult[Any]]]:
    """A page of list records in either mode: its rows, then their histories (three statements
    at most). With `updated_since` (cursor mode), every status, the changes oldest first; `sort`
    may then only be `updated_at`, the order it implies."""
    page: ListResult[Any]
    if isinstance(params, CursorParams):
        if params.updated_since is not None and sort not in (None, EquipmentSort.UPDATED_AT):
            raise ValidationFailed.field(
                "query.sort",
                "updated_since lists the changes oldest first: leave sort out, or sort=updated_at.",
            )
        if params.updated_since is not None:
            horizon = (yield Read(SYNC_HORIZON, scoped=False))[0].horizon
            if held_too_long(horizon):
                warn_held((yield Read(FEED_HOLDERS, scoped=False)))
            horizon = horizon or NO_HORIZON
            filters = replace(filters, updated_since=params.updated_since, horizon=horizon)
        page = yield from cursor_rows(filters, sort or EquipmentSort.CREATED_AT_DESC, params)
    else:
        page = yield from page_rows(filters, params, sort or EquipmentSort.CREATED_AT_DESC)
    history = yield from history_rows([row.id for row in page.items], full=False)
    return [presenters.list_item(row, history[row.id]) for row in page.items], page


def count_plan(filters: EquipmentFilters, cap: int) -> ReadPlan[int]:
    """How many devices the filters match, up to `cap` (a heading's figure, not a page's total)."""
    return capped_count(filters, cap)


def detail_plan(equipment_id: uuid.UUID | str) -> ReadPlan[dict[str, Any]]:
    """The single-record answer: the device with its references and its history, in one statement."""
    row, history = yield from detail_row(equipment_id)
    return presenters.detail(row, history)


def create_equipment(session: Session, actor: Actor, body: EquipmentCreate) -> bytes:
    """Register a device the company already owns: `equipment_added`, then the move to its status.
    Answers the device as GET /client/equipment/{id} renders it (EquipmentOut's JSON).

    Written as rows, as a batch writes them (bulk.py): the device already at its status, its
    history and its events (one statement on PostgreSQL; the unique constraint answers a taken
    serial number, no read first); the answer, which is also the events' data, rendered once from
    the values to write, before they are written."""
    repository = EquipmentRepository(session)
    country, currency = _creation_references(session, body)
    assignee: Employee | None = None
    assignee_error = creation_assignee_error(body)
    if assignee_error is not None:
        raise ValidationFailed.field("assignee_id", assignee_error)
    if body.assignee_id is not None:
        assignee = _assignable(_employee(repository, body.assignee_id))
    references = {
        "country_id": country and country.id,
        "currency_id": currency and currency.id,
        **placement.creation_locations(session, body),
    }
    values = device_fields(session).check(body.custom_fields, device_type=body.type)
    if values.errors:
        raise ValidationFailed.fields(value_errors("custom_fields", values.errors))
    device = new_equipment_row(body, references, company_of(session), utcnow(), values)
    history = lifecycle.registered(device, body.status, actor.name, assignee)
    assignee_fields = repository.assignee_fields({assignee.id}) if assignee is not None else {}
    answer = render_as(
        EquipmentOut,
        presenters.written_detail(
            device, history, currency, country, assignee_fields[assignee.id] if assignee is not None else None
        ),
    )
    changes = [(EventType.EQUIPMENT_ADDED, device["id"])]
    if body.status != EquipmentStatus.UNASSIGNED:
        changes.append((status_event(body.status), device["id"]))
    events = event_rows(session, answered_events(changes, {device["id"]: answer}), actor=actor.name)
    if not repository.insert_created(device, history, events):
        serial = body.serial_number or ""
        raise Conflict(serial_taken_message(serial, repository.serial_holder(serial)))
    return answer


def _creation_references(
    session: Session, body: EquipmentCreate
) -> tuple[CountryRef | None, Currency | None]:
    """A new device's country (from the process's copy) and currency; 422 naming the field."""
    country = resolve_country_ref(session, body.country, "country") if body.country else None
    currency = resolve_currency(session, body.currency, "currency") if body.currency else None
    return country, currency


def creation_assignee_error(body: EquipmentCreate) -> str | None:
    """What is wrong with a new device's `assignee_id` for its `status`, or None."""
    if body.status == EquipmentStatus.ASSIGNED and body.assignee_id is None:
        return "Required when status is Assigned."
    if body.status != EquipmentStatus.ASSIGNED and body.assignee_id is not None:
        return "Only Assigned equipment has an assignee."
    return None


def device_fields(session: Session) -> FieldSet:
    """The company's device fields (customfields): what `custom_fields` may hold."""
    return field_set(session, CustomFieldEntity.DEVICE)


def new_equipment_row(
    body: EquipmentCreate,
    references: dict[str, Any],
    company_id: uuid.UUID,
    now: datetime,
    values: CheckedValues | None = None,
) -> dict[str, Any]:
    """The columns of a device registered by the company (source External, Unassigned, created
    at `now`), as the single create and a batch write it (bulk, CSV imports), with its checked
    custom field `values`."""
    specs = {
        key: value
        for key in (body.specs.model_fields_set if body.specs else ())
        if (value := getattr(body.specs, key)) is not None and value != ""
    }
    return {
        "id": new_id(),
        "company_id": company_id,
        "title": body.title,
        "source": EquipmentSource.EXTERNAL,
        "status": EquipmentStatus.UNASSIGNED,
        "status_changed_at": now,
        "assignee_id": None,
        **{name: getattr(body, name) for name in PLAIN_FIELDS},
        "description": body.description or "",
        "other_details": list(body.other_details or []),
        "country_id": references.get("country_id"),
        "currency_id": references.get("currency_id"),
        "location_id": references.get("location_id"),
        "home_location_id": references.get("home_location_id"),
        "specs": specs,
        "memory_key": fold_spec(specs.get("memory")),
        "storage_key": fold_spec(specs.get("storage")),
        "documents": [],
        "custom_fields": values.public if values is not None else {},
        "sensitive_fields": values.sensitive if values is not None else {},
        "created_at": now,
        "updated_at": now,
    }


def update_equipment(
    session: Session, actor: Actor, equipment_id: str, body: EquipmentPatch
) -> dict[str, Any]:
    """Edit fields, and move status or assignee through the lifecycle; all checked before any write."""
    repository = EquipmentRepository(session)
    equipment = repository.get(equipment_id, for_update=True)
    if equipment.status == EquipmentStatus.ARCHIVED:
        raise Conflict("Archived equipment cannot be changed.")
    fields = body.model_fields_set - {"status"}
    if "title" in fields and body.title is None:
        raise ValidationFailed.field("title", "The title cannot be empty.")
    references = _resolve_references(session, body, fields)
    target = _target_move(repository, equipment, body.status, body.assignee_id, "assignee_id" in fields)
    serial = body.serial_number if "serial_number" in fields else None
    if serial and (holder := repository.serial_holder(serial, except_id=equipment.id)) is not None:
        raise Conflict(serial_taken_message(serial, holder))
    values = None
    if "custom_fields" in fields:
        device_type = body.type if "type" in fields else equipment.type
        current = (dict(equipment.custom_fields or {}), dict(equipment.sensitive_fields or {}))
        values = device_fields(session).check(body.custom_fields, current=current, device_type=device_type)
        if values.errors:
            raise ValidationFailed.fields(value_errors("custom_fields", values.errors))

    location = placement.given_location(session, equipment, body, fields, target)

    changes: list[tuple[EventType, Equipment]] = []
    if target is not None:
        refuse_reserved(repository, [equipment])
        to_status, assignee = target
        lifecycle.move(session, equipment, to_status, actor.name, assignee=assignee, location=location)
        changes.append((status_event(to_status), equipment))
    elif location is not placement.KEEP:
        refuse_reserved(repository, [equipment])
        if placement.place(session, equipment, location, actor.name):
            changes.append((EventType.EQUIPMENT_MOVED, equipment))
    before = _edited_values(equipment)
    _apply_fields(equipment, body, fields, references)
    if values is not None:
        equipment.custom_fields = values.public
        equipment.sensitive_fields = values.sensitive
    if _edited_values(equipment) != before:  # fields sent with the values they had change nothing
        changes.append((EventType.EQUIPMENT_UPDATED, equipment))
    _flush(session, serial)
    record_equipment_events(session, changes, actor.name)
    return _detail(repository, equipment.id)


def archive_equipment(session: Session, actor: Actor, equipment_id: str) -> dict[str, Any]:
    """DELETE: move to Archived (writing `archived`); an archived device is gone for DELETE (404)."""
    repository = EquipmentRepository(session)
    equipment = repository.get(equipment_id, for_update=True)
    if equipment.status == EquipmentStatus.ARCHIVED:
        raise NotFound.record("Equipment")
    refuse_reserved(repository, [equipment])
    lifecycle.move(session, equipment, EquipmentStatus.ARCHIVED, actor.name)
    record_equipment_events(session, [(EventType.EQUIPMENT_ARCHIVED, equipment)], actor.name)
    return _detail(repository, equipment.id)


def reserved_refusal(equipment: Equipment, tx_ref: str) -> str:
    return (
        f"Equipment {equipment.title} ({equipment.id}) is reserved by the pending transaction {tx_ref}: "
        "it cannot move until that transaction is paid, fails or expires."
    )


def retrieving_refusal(equipment: Equipment, order: tuple[uuid.UUID, str]) -> str:
    order_id, tx_ref = order
    return (
        f"Equipment {equipment.title} ({equipment.id}) is on its way back in the retrieval order {order_id} "
        f"(transaction {tx_ref}): it cannot move until that order's item is received "
        f"(POST /client/orders/{order_id}/received for a device coming back to the office) or the order "
        "is cancelled."
    )


def holding_refusals(repository: EquipmentRepository, devices: Collection[Equipment]) -> dict[uuid.UUID, str]:
    """Why each of these devices that something holds cannot move: a Pending transaction (a storage
    onboarding or an offboarding: the payment is for the device as it is) or a retrieval in progress
    (moving the device would strand the order). Call with the devices locked, so that no initiate
    can reserve one, and no fulfilment open a retrieval of one, between this check and the move."""
    ids = [equipment.id for equipment in devices]
    reserved = repository.reserving_transactions(ids)
    retrieving = repository.retrieving_orders(ids)
    refusals: dict[uuid.UUID, str] = {}
    for equipment in devices:
        if equipment.id in reserved:
            refusals[equipment.id] = reserved_refusal(equipment, reserved[equipment.id])
        elif equipment.id in retrieving:
            refusals[equipment.id] = retrieving_refusal(equipment, retrieving[equipment.id])
    return refusals


def refuse_reserved(repository: EquipmentRepository, devices: list[Equipment]) -> None:
    """409 naming the transaction or the order that holds one of these devices (`holding_refusals`)."""
    for refusal in holding_refusals(repository, devices).values():
        raise Conflict(refusal)


def _target_move(
    repository: EquipmentRepository,
    equipment: Equipment,
    status: EquipmentStatus | None,
    assignee_id: uuid.UUID | None,
    assignee_given: bool,
) -> tuple[EquipmentStatus, Employee | None] | None:
    """The move a PATCH asks for, or None: `status`, `assignee_id`, or both."""
    current = equipment.status
    if status is not None and status != EquipmentStatus.ASSIGNED and assignee_id is not None:
        raise ValidationFailed.field("assignee_id", f"Only Assigned equipment has an assignee, not {status}.")
    if status == EquipmentStatus.ASSIGNED or (status is None and assignee_id is not None):
        if assignee_id is None:
            if current == EquipmentStatus.ASSIGNED:
                return None
            raise ValidationFailed.field("assignee_id", "Required when status is Assigned.")
        assignee = _employee(repository, assignee_id)
        if current == EquipmentStatus.ASSIGNED and equipment.assignee_id == assignee.id:
            return None
        return EquipmentStatus.ASSIGNED, _assignable(assignee)
    if status is None:
        # `"assignee_id": null` alone unassigns a device that has an assignee.
        unassign = assignee_given and current == EquipmentStatus.ASSIGNED
        return (EquipmentStatus.UNASSIGNED, None) if unassign else None
    if status == current:
        return None
    return status, None


def _resolve_references(session: Session, body: EquipmentFields, fields: set[str]) -> dict[str, Any]:
    """Country, currency and home location ids for the fields given (None clears them); 422
    naming the field."""
    references: dict[str, Any] = {}
    if "home_location_id" in fields:
        home = body.home_location_id
        references["home_location_id"] = (
            device_location(session, home, "home_location_id").id if home is not None else None
        )
    if "country" in fields:
        references["country_id"] = (
            resolve_country(session, body.country, "country").id if body.country else None
        )
    if "currency" in fields:
        references["currency_id"] = (
            resolve_currency(session, body.currency, "currency").id if body.currency else None
        )
    return references


def _employee(repository: EquipmentRepository, employee_id: uuid.UUID) -> Employee:
    employee = repository.employee(employee_id)
    if employee is None:
        raise ValidationFailed.field("assignee_id", UNKNOWN_EMPLOYEE)
    return employee


def _assignable(employee: Employee) -> Employee:
    """`employee`, unless a device may not be assigned to them now (422 naming why)."""
    if refusal := offboarded(employee):
        raise ValidationFailed.field("assignee_id", refusal)
    return employee


def _apply_fields(
    equipment: Equipment, body: EquipmentCreate | EquipmentPatch, fields: set[str], references: dict[str, Any]
) -> None:
    if "title" in fields and body.title is not None:
        equipment.title = body.title
    for name in PLAIN_FIELDS:
        if name in fields:
            value = getattr(body, name)
            if name == "description":
                value = value or ""
            elif name == "other_details":
                value = list(value or [])
            setattr(equipment, name, value)
    for name, value in references.items():
        setattr(equipment, name, value)
    if "specs" in fields:
        specs = dict(equipment.specs or {})
        given = body.specs
        if given is None:
            specs = {}
        else:
            for key in given.model_fields_set:
                value = getattr(given, key)
                if value is None or value == "":
                    specs.pop(key, None)
                else:
                    specs[key] = value
        equipment.specs = specs  # a new dict: the model folds memory_key / storage_key from it


def _edited_values(equipment: Equipment) -> tuple[object, ...]:
    """What a PATCH's fields edit (not the status), to tell an edit from a no-op."""
    names = ("title", *PLAIN_FIELDS, "country_id", "currency_id", "home_location_id")
    custom = (dict(equipment.custom_fields or {}), dict(equipment.sensitive_fields or {}))
    return (*(getattr(equipment, name) for name in names), dict(equipment.specs or {}), custom)


def _flush(session: Session, serial_number: str | None) -> None:
    try:
        session.flush()
    except IntegrityError:
        # Another request registered the same serial number between our check and this write (the
        # transaction is spoilt: no asking which device).
        raise Conflict(serial_taken_message(serial_number or "", None)) from None


def serial_taken_message(serial_number: str, holder: tuple[uuid.UUID, EquipmentStatus] | None) -> str:
    """Why a serial number cannot be given, naming the device holding it (id, status) when known:
    an archived or sold device keeps its number, and the lists leave those out by default."""
    message = f"Equipment with serial number {serial_number!r} already exists in this company"
    if holder is None:
        return message + "."
    holder_id, status = holder
    message += f": device {holder_id} ({status})."
    if status in (EquipmentStatus.ARCHIVED, EquipmentStatus.SOLD):
        message += f" {status} devices keep their serial numbers, as they keep their history."
    return message


def _detail(repository: EquipmentRepository, equipment_id: uuid.UUID | str) -> dict[str, Any]:
    return run_in_session(repository.session, detail_plan(equipment_id))
