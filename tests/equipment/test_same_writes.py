"""A CSV import and a bulk registration write exactly what single creates write: the same devices,
history, events (their data the device as the single retrieve answers it) and webhook outbox rows.
The batches write rows directly (COPY on PostgreSQL) and render their answers without reading the
devices back; this compares all of it, company against company, ids and instants set aside."""

from __future__ import annotations

import csv
import io
import json
import re
import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.core.timestamps import format_timestamp
from outfitter.csvio.writer import cell
from outfitter.models import Equipment, EquipmentHistory, WebhookDelivery, WebhookEndpoint
from outfitter.models.events import Event
from tests.equipment.helpers import add_to_department, make_employee
from tests.factories import Api, CompanyFactory

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
INSTANT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")
CSV_COLUMNS = (
    "title",
    "serial_number",
    "status",
    "assignee_id",
    "country",
    "currency",
    "purchase_price",
    "purchase_date",
    "specs.memory",
    "specs.storage",
    "specs.color",
    "description",
    "other_details",
    "make",
    "model",
    "year",
    "type",
    "state",
    "image_url",
)


def items(assignee: uuid.UUID) -> list[dict[str, Any]]:
    """30 devices (enough for the batches to COPY), every field and status a create takes."""
    devices: list[dict[str, Any]] = []
    for n in range(30):
        item: dict[str, Any] = {"title": f"Device {n:02}", "serial_number": f"SN-{n}"}
        if n % 5 == 0:
            item |= {"status": "Assigned", "assignee_id": str(assignee)}
        elif n % 5 == 1:
            item |= {
                "status": "In_Storage",
                "country": "Kenya",
                "currency": "usd",
                "purchase_price": "1200.5",
            }
        elif n % 5 == 2:
            item |= {
                "specs": {"memory": "16 GB", "storage": "512GB", "color": "=grey"},
                "other_details": ["charger", "bag"],
                "purchase_date": "2024-02-29T10:00:00+01:00",
                "purchase_price": "0.125",
            }
        elif n % 5 == 3:
            item |= {"make": "Apple", "model": "M3", "year": "2024", "type": "Laptop", "state": "Used"}
        else:
            item |= {"description": "'=1+1", "image_url": "https://example.com/a.png", "country": "NG"}
        devices.append(item)
    return devices


def as_csv(devices: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for item in devices:
        cells = []
        for column in CSV_COLUMNS:
            value = item.get("specs", {}).get(column[6:]) if column.startswith("specs.") else item.get(column)
            cells.append(cell(value))  # as the export writes it: '=1+1 escaped, a list as JSON
        writer.writerow(cells)
    return buffer.getvalue()


def company(companies: CompanyFactory, db: Session) -> tuple[Api, uuid.UUID]:
    """A company with an assignee (in a department) and a webhook endpoint wanting every event."""
    api = companies.create("Acme Ltd")  # one name: the actor history and events record
    employee = make_employee(db, api.company_id, "Ada", "Obi")
    employee.email = "ada@example.com"  # the same in each company: events show it
    add_to_department(db, employee, "Operations")
    db.add(
        WebhookEndpoint(
            company_id=api.company_id, url="https://example.com/hook", secret="whsec_test", event_types=[]
        )
    )
    db.commit()
    return api, employee.id


def written(db: Session, api: Api, employee: uuid.UUID) -> dict[str, Any]:
    """What the company's devices are in the database, by title, ids and instants replaced."""
    names: dict[str, str] = {str(employee): "<assignee>", str(api.company_id): "<company>"}

    def plain(value: Any) -> Any:
        text = json.dumps(value, sort_keys=True, default=str)
        text = UUID.sub(lambda found: names.setdefault(found.group(), f"<id{len(names)}>"), text)
        return json.loads(INSTANT.sub("<instant>", text))

    ids = db.scalars(select(Equipment.id).where(Equipment.company_id == api.company_id)).all()
    db.rollback()  # end the read: SQLite writers (the token's last-used stamp) wait for it
    answers = {}
    for device_id in ids:
        answer = api.get(f"/client/equipment/{device_id}")
        assert answer.status_code == 200, answer.text
        answers[device_id] = answer.json()["data"]
    devices = db.scalars(
        select(Equipment).where(Equipment.company_id == api.company_id).order_by(Equipment.title)
    )
    result: dict[str, Any] = {}
    for device in devices:
        columns = {
            column.key: getattr(device, column.key)
            for column in Equipment.__table__.c
            if column.key not in {"id", "created_at", "updated_at", "status_changed_at"}
        }
        history = db.scalars(
            select(EquipmentHistory)
            .where(EquipmentHistory.equipment_id == device.id)
            .order_by(EquipmentHistory.seq)
        ).all()
        events = db.scalars(
            select(Event).where(Event.subject_id == device.id).order_by(Event.created_at)
        ).all()
        deliveries = {
            delivery.event_id: delivery
            for delivery in db.scalars(
                select(WebhookDelivery).where(WebhookDelivery.event_id.in_([e.id for e in events]))
            )
        }
        retrieved = answers[device.id]
        for entry in events:  # an event's data is the device as the single retrieve answers it
            assert entry.data == retrieved, (entry.type, device.title)
            assert deliveries[entry.id].payload == {  # the Standard Webhooks body, data embedded
                "id": str(entry.id),
                "type": entry.type,
                "timestamp": format_timestamp(entry.created_at),
                "data": entry.data,
            }
        result[device.title] = plain(
            {
                "device": columns,
                "history": [
                    {
                        column.key: getattr(entry, column.key)
                        for column in EquipmentHistory.__table__.c
                        if column.key not in {"id", "event_date"}
                    }
                    for entry in history
                ],
                "events": [[entry.type, entry.subject_type, entry.actor, entry.data] for entry in events],
                "deliveries": [
                    [
                        deliveries[entry.id].event_type,
                        deliveries[entry.id].status,
                        deliveries[entry.id].attempts,
                    ]
                    for entry in events
                ],
            }
        )
    db.rollback()
    return result


def test_an_import_and_a_bulk_registration_write_what_single_creates_write(
    companies: CompanyFactory, db: Session
) -> None:
    single, single_assignee = company(companies, db)
    for item in items(single_assignee):
        assert single.post("/client/equipment", item).status_code == 201
    bulk, bulk_assignee = company(companies, db)
    response = bulk.post("/client/equipment/bulk", {"equipment": items(bulk_assignee)})
    assert response.status_code == 201, response.text
    imported, import_assignee = company(companies, db)
    response = imported.request(
        "POST",
        "/client/equipment/import",
        content=as_csv(items(import_assignee)).encode(),
        headers={"Content-Type": "text/csv"},
    )
    assert response.status_code == 200, response.text

    expected = written(db, single, single_assignee)
    assert len(expected) == 30
    assert sum(len(device["events"]) for device in expected.values()) == 42
    assert written(db, bulk, bulk_assignee) == expected
    assert written(db, imported, import_assignee) == expected
