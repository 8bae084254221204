"""Bulk employee creation: up to 1,000 employees, all or nothing, in a constant number of statements
(one for the countries, one for the emails already taken, one executemany for the rows)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import TypeAdapter, ValidationError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from outfitter.catalog.reference import Countries
from outfitter.core.errors import Conflict, ValidationFailed, validation_message
from outfitter.db.base import new_id, utcnow
from outfitter.db.bulk_rows import take_turn
from outfitter.models import EMPLOYEE_ACTIVE, Country, Employee
from outfitter.models.events import EventType
from outfitter.outbox import NewEvent, as_event_data, record_events
from outfitter.people.identities import email_taken, user_name_taken
from outfitter.people.repository import EmployeeRepository, countries_matching
from outfitter.people.schemas import EmployeeCreate, EmployeeOut
from outfitter.people.service import employee_fields, employee_out
from outfitter.tenants.actor import Actor

MAX_BULK_EMPLOYEES = 1000
_ITEM = TypeAdapter(EmployeeCreate)


def _positions(employees: list[Any]) -> Iterator[tuple[str, Any]]:
    """(path, item) for every employee: `employees.0.12` in the nested shape, `employees.12` flat."""
    if employees and all(isinstance(group, list) for group in employees):
        for outer, group in enumerate(employees):
            for inner, item in enumerate(group):
                yield f"employees.{outer}.{inner}", item
        return
    if any(isinstance(group, list) for group in employees):
        raise ValidationFailed.field(
            "employees", "Give either an array of employee arrays or an array of employees, not both."
        )
    for position, item in enumerate(employees):
        yield f"employees.{position}", item


def create_employees(session: Session, actor: Actor, employees: list[Any]) -> tuple[list[Any], int]:
    """Validate every item first, then insert them all; the answer mirrors the input's nesting."""
    positions = list(_positions(employees))
    if not positions:
        raise ValidationFailed.field("employees", "Give at least one employee.")
    if len(positions) > MAX_BULK_EMPLOYEES:
        raise ValidationFailed.field(
            "employees",
            f"At most {MAX_BULK_EMPLOYEES:,} employees a request; this one has {len(positions):,}.",
        )

    errors: dict[str, list[str]] = {}
    valid: list[tuple[str, EmployeeCreate]] = []
    for path, item in positions:
        try:
            valid.append((path, _ITEM.validate_python(item)))
        except ValidationError as error:
            for detail in error.errors():
                key = ".".join([path, *(str(part) for part in detail["loc"])])
                errors.setdefault(key, []).append(validation_message(detail))
    created = create_validated(session, valid, errors, actor=actor.name)
    return _mirror(employees, created), len(created)


def create_validated(
    session: Session,
    valid: list[tuple[str, EmployeeCreate]],
    errors: dict[str, list[str]] | None = None,
    *,
    write: bool = True,
    actor: str | None = None,
    from_text: bool = False,
) -> list[EmployeeOut]:
    """The batch rules (countries, emails unique in the batch and the company) for bodies already
    validated, keyed by their paths; 422 with these errors and `errors` (the bodies' own). Then one
    INSERT for them all and one for their `employee.created` events, unless `write` is False (a dry
    run: nothing written, nothing answered). Used by the bulk endpoint and the CSV import alike."""
    errors = dict(errors or {})
    if write:  # before the emails are read: a batch racing this one has committed them by then
        take_turn(session, Employee)
    countries = Countries(countries_matching(session, {body.country_id for _, body in valid}))
    repository = EmployeeRepository(session)
    emails = {body.email for _, body in valid}
    taken, known_as = repository.existing_emails(emails), repository.user_names_taken(emails)
    first_seen: dict[str, str] = {}
    fields_of_company = employee_fields(session)  # `from_text`: a CSV file's cells, every value a string
    rows: list[dict[str, Any]] = []
    answer_countries: list[Country] = []
    now = utcnow()
    for path, body in valid:
        country = countries.find(body.country_id)
        if country is None:
            errors.setdefault(f"{path}.country_id", []).append(
                f"Unknown country {body.country_id!r}: give a country id, name or two-letter code."
            )
        if body.email in taken:
            errors.setdefault(f"{path}.email", []).append(email_taken(body.email))
        elif body.email in known_as:
            errors.setdefault(f"{path}.email", []).append(user_name_taken(body.email))
        elif body.email in first_seen:
            errors.setdefault(f"{path}.email", []).append(
                f"The email {body.email} is also given at {first_seen[body.email]}."
            )
        first_seen.setdefault(body.email, path)
        values = fields_of_company.check(body.custom_fields, from_text=from_text)
        for key, message in values.errors.items():
            errors.setdefault(f"{path}.custom_fields.{key}", []).append(message)
        if country is not None:
            fields = body.model_dump(exclude={"country_id", "custom_fields"})
            rows.append(
                {
                    **fields,
                    "custom_fields": values.public,
                    "sensitive_fields": values.sensitive,
                    "id": new_id(),
                    "country_id": country.id,
                    "status": EMPLOYEE_ACTIVE,
                    "created_at": now,
                    "updated_at": now,
                }
            )
            answer_countries.append(country)
    if errors:
        raise ValidationFailed.fields(errors)
    if not write:
        return []

    try:
        repository.insert_many(rows)
    except IntegrityError:  # a concurrent request took one of the emails after our check
        raise Conflict(
            "An employee with one of these emails was created meanwhile; nothing was created."
        ) from None

    created = [
        employee_out(Employee(**row), country) for row, country in zip(rows, answer_countries, strict=True)
    ]
    record_events(  # one INSERT for the batch, like the employees themselves
        session,
        [NewEvent(EventType.EMPLOYEE_CREATED, item.id, as_event_data(EmployeeOut, item)) for item in created],
        actor=actor,
    )
    return created


def _mirror(employees: list[Any], created: list[EmployeeOut]) -> list[Any]:
    if not all(isinstance(group, list) for group in employees):
        return list(created)
    nested: list[Any] = []
    start = 0
    for group in employees:
        nested.append(created[start : start + len(group)])
        start += len(group)
    return nested
