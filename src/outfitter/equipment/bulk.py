"""Bulk equipment work: register up to 1,000 devices, or move up to 1,000, all or nothing.

Registering is a constant number of statements whatever the batch's size: one read each for the
countries, the currencies, the assignees and the serial numbers already taken, then one write
(COPY on PostgreSQL) for the devices, one for their history and one for their events; the answers
(and the events' data) are rendered from the rows written, with one read for the assignees' fields.
Every rule is checked for every item before anything is written, and every error is reported,
keyed by the item's path (`equipment.3.serial_number`, or `rows.12.serial_number` for a file).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from outfitter.catalog.reference import Countries, currencies_by_code
from outfitter.core.errors import Conflict, ValidationFailed
from outfitter.core.schemas import render_as
from outfitter.customfields.records import CheckedValues
from outfitter.db.base import utcnow
from outfitter.db.bulk_rows import rows_written_meanwhile, take_turn
from outfitter.db.tenancy import company_of
from outfitter.equipment import lifecycle, placement, presenters, service
from outfitter.equipment.events import answered_events, record_equipment_events, status_event
from outfitter.equipment.repository import UNKNOWN_DEVICE, EquipmentRepository
from outfitter.equipment.schemas import EquipmentBulkMove, EquipmentCreate, EquipmentOut
from outfitter.locations.repository import UNKNOWN_LOCATION, LocationRepository
from outfitter.models import Country, Currency, Employee, Equipment, EquipmentHistory, EquipmentStatus, Event
from outfitter.models.events import EventType
from outfitter.models.webhooks import WebhookDelivery
from outfitter.outbox import delivery_rows, enabled_endpoints, event_rows
from outfitter.people.repository import UNKNOWN_EMPLOYEE, countries_matching, offboarded
from outfitter.tenants.actor import Actor

MAX_BULK_EQUIPMENT = 1000


class SerialNumberTaken(Exception):
    """Writing the devices broke the company's unique serial numbers: nothing of them is kept."""


@dataclass
class CheckedDevice:
    """An item that passed every rule, with what its rules looked up."""

    path: str
    body: EquipmentCreate
    references: dict[str, Any] = field(default_factory=dict)
    assignee: Employee | None = None
    country: Country | None = None
    currency: Currency | None = None
    values: CheckedValues | None = None
    from_text: bool = False  # read from a CSV file


def check_devices(
    session: Session,
    items: Sequence[tuple[str, EquipmentCreate]],
    *,
    serials_taken: bool = True,
    from_text: bool = False,
) -> list[CheckedDevice]:
    """Every rule of registering a device, for every item, by set queries; 422 with all the errors.
    Without `serials_taken` the serial numbers the company already holds are looked up only when
    there are other errors to report with them; otherwise the unique constraint refuses them while
    the rows are written (`write_or_report_taken`)."""
    repository = EquipmentRepository(session)
    named_countries = {body.country for _, body in items if body.country}
    countries = Countries(countries_matching(session, named_countries))
    country_named = {name: countries.find(name) for name in named_countries}  # per name, not per item
    currencies = currencies_by_code(session, {body.currency for _, body in items if body.currency})
    assignees = repository.employees({body.assignee_id for _, body in items if body.assignee_id})
    places = _named_locations(session, items)
    storage = (
        placement.default_storage_id(session, company_of(session))
        if any(body.status == EquipmentStatus.IN_STORAGE for _, body in items)
        else None
    )
    serials = {body.serial_number for _, body in items if body.serial_number}
    taken = repository.serial_holders(serials) if serials_taken else {}
    fields = service.device_fields(session)  # `from_text`: a CSV file's cells, every value a string
    errors: dict[str, list[str]] = {}
    first_seen: dict[str, str] = {}
    checked: list[CheckedDevice] = []
    for path, body in items:
        item = CheckedDevice(path, body, {"country_id": None, "currency_id": None}, from_text=from_text)
        problems: dict[str, str] = {}
        if body.country:
            country = country_named[body.country]
            if country is None:
                problems["country"] = (
                    f"Unknown country {body.country!r}: give a country id, name or two-letter code."
                )
            else:
                item.references["country_id"] = country.id
                item.country = country
        if body.currency:
            currency = currencies.get(body.currency.upper())
            if currency is None:
                problems["currency"] = (
                    f"Unknown currency {body.currency!r}: give an ISO 4217 code such as USD."
                )
            else:
                item.references["currency_id"] = currency.id
                item.currency = currency
        assignee_error = service.creation_assignee_error(body)
        if assignee_error is None and body.assignee_id is not None:
            item.assignee = assignees.get(body.assignee_id)
            assignee_error = UNKNOWN_EMPLOYEE if item.assignee is None else offboarded(item.assignee)
        if assignee_error is not None:
            problems["assignee_id"] = assignee_error
        item.values = fields.check(body.custom_fields, device_type=body.type, from_text=from_text)
        problems |= {f"custom_fields.{key}": message for key, message in item.values.errors.items()}
        problems |= _place(session, item, places, storage)
        serial = body.serial_number
        if serial and serial in taken:
            problems["serial_number"] = service.serial_taken_message(serial, taken[serial])
        elif serial and serial in first_seen:
            problems["serial_number"] = f"The serial number {serial!r} is also given at {first_seen[serial]}."
        if serial:
            first_seen.setdefault(serial, path)
        for name, message in problems.items():
            errors.setdefault(f"{path}.{name}", []).append(message)
        checked.append(item)
    if errors:
        if not serials_taken:  # every error is reported at once: the taken numbers too
            check_devices(session, items, from_text=from_text)
        raise ValidationFailed.fields(errors)
    return checked


def _named_locations(session: Session, items: Sequence[tuple[str, EquipmentCreate]]) -> set[uuid.UUID]:
    """The live locations the items name (locked against a delete): one statement."""
    named = {
        value for _, body in items for value in (body.location_id, body.home_location_id) if value is not None
    }
    return set(LocationRepository(session).lock(named, share=True)) if named else set()


def _place(
    session: Session, item: CheckedDevice, places: set[uuid.UUID], storage: placement.GivenLocation
) -> dict[str, str]:
    """An item's location and home location into its references (placement.landing), or what is
    wrong with them."""
    body, problems = item.body, {}
    for name in ("location_id", "home_location_id"):
        value = getattr(body, name)
        if value is not None and value not in places:
            problems[name] = UNKNOWN_LOCATION
    if body.location_id is not None and body.status == EquipmentStatus.ASSIGNED:
        problems["location_id"] = placement.ASSIGNED_HAS_NO_LOCATION
    if not problems:
        device = {
            "company_id": company_of(session),
            "location_id": None,
            "home_location_id": body.home_location_id,
        }
        given = body.location_id if body.location_id is not None else placement.KEEP
        item.references["location_id"] = placement.landing(session, device, None, body.status, given, storage)
        item.references["home_location_id"] = body.home_location_id
    return problems


def insert_devices(session: Session, actor: str, checked: Sequence[CheckedDevice]) -> list[uuid.UUID]:
    """Register a file's checked devices and answer their ids (`write_or_report_taken`)."""
    return list(write_or_report_taken(session, actor, checked))


def register_devices(
    session: Session, actor: Actor, items: Sequence[tuple[str, EquipmentCreate]]
) -> list[bytes]:
    """Register every item (all or nothing) and answer the devices in order, as the single create
    does (each rendered once, for the events' data and the response both)."""
    checked = check_devices(session, items, serials_taken=False)
    return list(write_or_report_taken(session, actor.name, checked).values())


def write_or_report_taken(
    session: Session, actor: str, checked: Sequence[CheckedDevice]
) -> dict[uuid.UUID, bytes]:
    """`write_devices` for devices checked without looking up their serial numbers: the company's
    unique index checks each number as the devices are written, which the write does anyway (the
    read of the numbers saved). The write is in a savepoint: when
    the index refuses a number, it is undone and the items are checked again, numbers included, so
    the 422 names every item whose number is taken, before this request or by a concurrent one."""
    take_turn(session, Equipment)  # before the savepoint: one batch's numbers at a time
    try:
        with session.begin_nested():
            return write_devices(session, actor, checked)
    except SerialNumberTaken:
        from_text = any(device.from_text for device in checked)
        check_devices(
            session, [(device.path, device.body) for device in checked], from_text=from_text
        )  # the 422
        raise Conflict(  # the device holding it was deleted or renumbered since
            "A device held one of these serial numbers while the batch was written and holds it no "
            "more; nothing was registered: send the request again."
        ) from None


def write_devices(session: Session, actor: str, checked: Sequence[CheckedDevice]) -> dict[uuid.UUID, bytes]:
    """Write checked devices as the single create does (`equipment_added`, the move to their
    status, the events of both) in a constant number of statements, and answer each device (by id,
    in order) as the single retrieve renders it (EquipmentOut's JSON), from what was written
    rather than read back.

    The rows are written by COPY as they are made and while the answers are rendered
    (`rows_written_meanwhile`): what the rendering needs from the database (the assignees' fields,
    the webhook endpoints) is read first."""
    company = company_of(session)
    now = utcnow()
    assignees = EquipmentRepository(session).assignee_fields(
        {item.assignee.id for item in checked if item.assignee is not None}
    )
    endpoints = enabled_endpoints(session, company)
    devices: list[dict[str, Any]] = []
    history: dict[uuid.UUID, list[dict[str, Any]]] = {}
    changes: list[tuple[EventType, uuid.UUID]] = []

    def made() -> Iterator[dict[str, Any]]:
        """Each device's row, keeping its history and its changes: the server inserts the first
        devices while the next are made."""
        for position, item in enumerate(checked):
            # a microsecond apart: the batch keeps its order in the list (newest first)
            device = service.new_equipment_row(
                item.body, item.references, company, now + timedelta(microseconds=position), item.values
            )
            history[device["id"]] = lifecycle.registered(device, item.body.status, actor, item.assignee)
            devices.append(device)
            changes.append((EventType.EQUIPMENT_ADDED, device["id"]))
            if item.body.status != EquipmentStatus.UNASSIGNED:
                changes.append((status_event(item.body.status), device["id"]))
            yield device

    try:
        with rows_written_meanwhile(session) as rows:
            rows.write(Equipment, made())
            rows.write(EquipmentHistory, [entry for entries in history.values() for entry in entries])
            answers: dict[uuid.UUID, bytes] = {}
            for item, device in zip(checked, devices, strict=True):
                assignee = assignees[item.assignee.id] if item.assignee is not None else None
                answers[device["id"]] = render_as(
                    EquipmentOut,
                    presenters.written_detail(
                        device, history[device["id"]], item.currency, item.country, assignee
                    ),
                )
            events = event_rows(session, answered_events(changes, answers), actor=actor)
            rows.write(Event, events)
            rows.write(WebhookDelivery, delivery_rows(company, endpoints, events))
            # Every row is COPY text in the writer's queue by now: freed here, while the server
            # writes the events, rather than on return, on the request's path.
            for made_rows in (devices, history, changes, events):
                made_rows.clear()
    except IntegrityError as error:
        if "serial_number" not in str(error.orig):
            raise
        raise SerialNumberTaken from None
    return answers


def move_devices(session: Session, actor: Actor, body: EquipmentBulkMove) -> list[dict[str, Any]]:
    """Move every device to `body.status` (all or nothing): 422 for what the request names wrongly,
    then 409 listing every device that cannot make the move, with its status; nothing moves unless
    all can. One read locks every device; each move writes its history entry and its event."""
    devices, assignee = check_move(session, body)
    moved = [devices[equipment_id] for equipment_id in body.equipment_ids]
    location = body.location_id if body.location_id is not None else placement.KEEP
    for equipment in moved:
        lifecycle.move(session, equipment, body.status, actor.name, assignee=assignee, location=location)
    record_equipment_events(session, [(status_event(body.status), device) for device in moved], actor.name)
    return EquipmentRepository(session).answers(body.equipment_ids)


def check_move(
    session: Session, body: EquipmentBulkMove
) -> tuple[dict[uuid.UUID, Equipment], Employee | None]:
    """Every rule of a bulk move, nothing written: the devices (locked) and the assignee, or 422
    for what the request names wrongly, then 409 keyed `equipment_ids.<i>` for every device that
    cannot move (what a bulk move answers, and what the console's preview shows)."""
    errors: dict[str, list[str]] = {}
    first_index: dict[uuid.UUID, int] = {}
    for index, equipment_id in enumerate(body.equipment_ids):
        if equipment_id in first_index:
            errors[f"equipment_ids.{index}"] = [f"Also given at equipment_ids.{first_index[equipment_id]}."]
        first_index.setdefault(equipment_id, index)
    repository = EquipmentRepository(session)
    assignee: Employee | None = None
    if body.status == EquipmentStatus.ASSIGNED and body.assignee_id is None:
        errors["assignee_id"] = ["Required when status is Assigned."]
    elif body.status != EquipmentStatus.ASSIGNED and body.assignee_id is not None:
        errors["assignee_id"] = [f"Only Assigned equipment has an assignee, not {body.status}."]
    elif body.assignee_id is not None:
        assignee = repository.employees({body.assignee_id}).get(body.assignee_id)
        if assignee is None:
            errors["assignee_id"] = [UNKNOWN_EMPLOYEE]
        elif refusal := offboarded(assignee):
            errors["assignee_id"] = [refusal]
    if body.location_id is not None:
        if body.status in placement.NOT_PLACED:
            errors["location_id"] = [placement.ASSIGNED_HAS_NO_LOCATION]
        elif not LocationRepository(session).lock({body.location_id}, share=True):
            errors["location_id"] = [UNKNOWN_LOCATION]
    devices = repository.for_move(set(body.equipment_ids))
    for index, equipment_id in enumerate(body.equipment_ids):
        if equipment_id not in devices:  # unknown, or another company's: the same words
            errors.setdefault(f"equipment_ids.{index}", []).append(UNKNOWN_DEVICE)
    if errors:
        raise ValidationFailed.fields(errors)

    refusals: dict[str, list[str]] = {}
    reserved = repository.reserving_transactions(devices)
    retrieving = repository.retrieving_orders(devices)  # a retrieval in progress holds them too
    for index, equipment_id in enumerate(body.equipment_ids):
        equipment = devices[equipment_id]
        if equipment_id in reserved:
            refusals[f"equipment_ids.{index}"] = [service.reserved_refusal(equipment, reserved[equipment_id])]
            continue
        if equipment_id in retrieving:
            refusals[f"equipment_ids.{index}"] = [
                service.retrieving_refusal(equipment, retrieving[equipment_id])
            ]
            continue
        refused = lifecycle.refusal(equipment, body.status, assignee)
        if refused is not None:
            refusals[f"equipment_ids.{index}"] = [f"{equipment_id} is {equipment.status}: {refused}"]
    if refusals:
        holding = ", ".join(sorted(set(reserved.values())))
        orders = ", ".join(sorted({str(order_id) for order_id, _ in retrieving.values()}))
        raise Conflict(
            f"{len(refusals)} of the {len(devices)} devices cannot move to {body.status}; nothing was moved."
            + (f" Reserved by the pending transaction(s) {holding}." if holding else "")
            + (f" On their way back in the retrieval order(s) {orders}." if orders else ""),
            errors=refusals,
        )
    return devices, assignee
