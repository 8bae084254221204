"""Arranging equipment tests: employees inserted directly (their API is built elsewhere) and devices
registered through the API."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.models import Country, Department, Employee, UserDepartment
from tests.factories import Api


def make_employee(
    db: Session, company_id: uuid.UUID, first: str = "Ada", last: str = "Obi", country: str = "NG"
) -> Employee:
    country_id = db.scalars(select(Country.id).where(Country.code == country)).one()
    employee = Employee(
        company_id=company_id,
        first_name=first,
        last_name=last,
        email=f"{first.lower()}.{uuid.uuid4().hex[:8]}@example.com",
        phone="+2348000000000",
        country_id=country_id,
        address="1 Marina, Lagos",
        job_title="Engineer",
        employment_type="Full_Time",
        level="Senior",
    )
    db.add(employee)
    db.commit()
    return employee


def add_to_department(db: Session, employee: Employee, name: str) -> None:
    department = Department(company_id=employee.company_id, name=name, active_name=name.lower())
    db.add(department)
    db.flush()
    db.add(UserDepartment(company_id=employee.company_id, user_id=employee.id, department_id=department.id))
    db.commit()


def register(api: Api, **fields: Any) -> dict[str, Any]:
    body = {"title": "MacBook Pro 14", **fields}
    response = api.post("/client/equipment", body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def events(record: dict[str, Any]) -> list[str]:
    return [entry["event_type"] for entry in record["history"]]
