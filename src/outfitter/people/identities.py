"""The identity rules people and SCIM share, and the words of each refusal.

An employee's email, SCIM userName and externalId are each unique in the company: the email and
the userName compared as they are stored, lower-cased by Python's `str.lower()` (SCIM's filters
fold them alike, `scim.filters`), the externalId case-exact. An employee made through the REST
API has no userName: SCIM knows it by its email (`known_as`), so the REST API refuses an email
that is another employee's userName, which a unique index backs (migration 0015:
SCIM_IDENTITY). A deprovisioned employee keeps its email but answers to no userName. A Group's
externalId is unique among the company's live departments. Every refusal is a 409."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from sqlalchemy import ColumnElement, and_, or_

from outfitter.core.errors import Conflict
from outfitter.models import Employee

if TYPE_CHECKING:
    from outfitter.people.repository import DepartmentRepository, EmployeeRepository

# The unique index that refuses an email that is another employee's SCIM userName (migration 0015),
# which both databases name in their message.
SCIM_IDENTITY = "uq_employees_company_scim_identity"


class IdentityTaken(Conflict):
    """A userName, externalId or email another employee of the company already has."""


def email_taken(email: str) -> str:
    return f"An employee with the email {email} already exists in this company."


def user_name_taken(email: str) -> str:
    """An email that another employee's identity provider login is (SCIM's `userName`): a second
    employee known by it would answer an IdP's `userName eq` lookup beside the first."""
    return f"The email {email} is the SCIM userName of another employee of this company."


def known_as(user_name: str) -> ColumnElement[bool]:
    """Employees whose userName is `user_name` (lower-cased): their own, or the email of one made
    through the API. Written so that both databases answer it from the two unique indexes."""
    return or_(
        Employee.user_name == user_name, and_(Employee.user_name.is_(None), Employee.email == user_name)
    )


def check_identities(
    employees: EmployeeRepository,
    user_name: str,
    email: str,
    external_id: str | None,
    except_id: uuid.UUID | None,
) -> None:
    """409 when another employee has the userName, the email or the externalId: three point
    lookups, each on a unique index."""
    holders = employees.identity_holders(known_as(user_name), except_id)
    if any(row.user_name or row.deprovisioned_at is None for row in holders):
        raise IdentityTaken(f"The userName {user_name} is already taken in this company.")
    if holders := employees.identity_holders(Employee.email == email, except_id):
        message = email_taken(email)
        if holders[0].deprovisioned_at is not None:  # SCIM cannot see it: say what holds the email
            message += (
                f" It is employee {holders[0].id}, deprovisioned through SCIM, which keeps its records: "
                f"delete it through the REST API (DELETE /api/v2/client/employees/{holders[0].id}, "
                "once its devices are returned) to provision this email again."
            )
        raise IdentityTaken(message)
    if external_id and employees.identity_holders(Employee.external_id == external_id, except_id):
        raise IdentityTaken(f"The externalId {external_id} is already taken in this company.")


def identities_just_taken(user_name: str) -> IdentityTaken:
    """A concurrent request took an identity between the check and the write (a unique index)."""
    return IdentityTaken(
        f"The userName {user_name} (or its externalId or email) was just taken in this company."
    )


def check_group_external_id(
    departments: DepartmentRepository, external_id: str, except_id: uuid.UUID | None
) -> None:
    if departments.external_id_holder(external_id, except_id) is not None:
        raise IdentityTaken(f"The externalId {external_id} is already taken by another Group.")


def group_external_id_just_taken(external_id: str | None) -> IdentityTaken:
    return IdentityTaken(f"The externalId {external_id} was just taken by another Group.")
