"""Employees, departments and department memberships."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import ForeignKey, Index, String, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from outfitter.db.base import (
    Base,
    ChangeTracked,
    CompanyOwned,
    IdMixin,
    TimestampMixin,
    company_key,
    company_reference,
    str_enum,
    trigram_index,
)
from outfitter.models.catalog import Country
from outfitter.models.customfields import EMPTY_VALUES, CustomValues, custom_values_index

# `Employee.status` of an employee offboarded by SCIM (`active: false` or DELETE); "Active" again
# when the identity provider reactivates them.
EMPLOYEE_OFFBOARDED = "Offboarded"
EMPLOYEE_ACTIVE = "Active"


class MembershipStatus(StrEnum):
    ACTIVE = "Active"
    INACTIVE = "Inactive"  # ended: the employee left the department, or the department was deleted


class Employee(IdMixin, ChangeTracked, CompanyOwned, Base):
    __tablename__ = "employees"
    __table_args__ = (
        UniqueConstraint("company_id", "email"),
        company_key("employees"),
        *ChangeTracked.company_indexes("employees"),
        # The searches (the employee list's, and the equipment's by assignee) match part of a name
        # or email, whatever the case (trigram, PostgreSQL).
        *(trigram_index("employees", column) for column in ("first_name", "last_name", "email")),
        custom_values_index("employees"),
        # SCIM identities (scim/): unique in the company; NULLs (employees made by the API) never clash.
        Index("uq_employees_company_user_name", "company_id", "user_name", unique=True),
        Index("uq_employees_company_external_id", "company_id", "external_id", unique=True),
        # The identity SCIM knows an employee by (people.identities.known_as): its userName, else,
        # until SCIM deprovisions it, its email. One employee each (migration 0015).
        Index(
            "uq_employees_company_scim_identity",
            "company_id",
            text("(COALESCE(user_name, CASE WHEN deprovisioned_at IS NULL THEN email END))"),
            unique=True,
        ),
    )

    first_name: Mapped[str] = mapped_column(String(100))
    last_name: Mapped[str] = mapped_column(String(100))
    email: Mapped[str] = mapped_column(String(320))  # stored lower-cased; unique in the company
    personal_email: Mapped[str | None] = mapped_column(String(320))
    phone: Mapped[str] = mapped_column(String(50))
    country_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("countries.id"), index=True)
    address: Mapped[str] = mapped_column(String(500))
    landmark: Mapped[str | None] = mapped_column(String(200))
    job_title: Mapped[str | None] = mapped_column(String(200))
    tax_number: Mapped[str | None] = mapped_column(String(100))
    employment_type: Mapped[str | None] = mapped_column(String(50))
    level: Mapped[str | None] = mapped_column(String(50))
    status: Mapped[str | None] = mapped_column(String(50))
    last_login: Mapped[datetime | None]
    # Set by SCIM provisioning (scim/): the identity provider's userName (lower-cased; null for an
    # employee made through the API, whose userName is its email), its id for the person, the
    # manager and department label of the enterprise extension, and when SCIM deleted the person
    # (offboarded and unlinked: the SCIM id answers 404, the record stays for its equipment history).
    user_name: Mapped[str | None] = mapped_column(String(320))
    external_id: Mapped[str | None] = mapped_column(String(255))
    manager_id: Mapped[uuid.UUID | None]  # no foreign key (migration 0008): a deleted manager reads as none
    department_name: Mapped[str | None] = mapped_column(String(200))
    deprovisioned_at: Mapped[datetime | None]
    # The company's own fields (models.customfields): the sensitive ones apart, never in an answer.
    custom_fields: Mapped[dict[str, Any]] = mapped_column(
        CustomValues, default=dict, server_default=EMPTY_VALUES
    )
    sensitive_fields: Mapped[dict[str, Any]] = mapped_column(
        CustomValues, default=dict, server_default=EMPTY_VALUES
    )

    country: Mapped[Country] = relationship(lazy="raise")

    @property
    def full_name(self) -> str:
        return f"{self.first_name} {self.last_name}"


class Department(IdMixin, ChangeTracked, CompanyOwned, Base):
    __tablename__ = "departments"
    __table_args__ = (
        # Names are unique among live departments: a deleted one clears `active_name` (NULLs never clash).
        UniqueConstraint("company_id", "active_name"),
        company_key("departments"),
        *company_reference("departments", "head_id", "employees", ondelete="SET NULL"),
        *ChangeTracked.company_indexes("departments"),
        Index("uq_departments_company_external_id", "company_id", "external_id", unique=True),
    )

    name: Mapped[str] = mapped_column(String(200))
    external_id: Mapped[str | None] = mapped_column(String(255))  # the SCIM Group's externalId
    active_name: Mapped[str | None] = mapped_column(String(200))  # lower(name) while not deleted
    head_id: Mapped[uuid.UUID | None]
    deleted_at: Mapped[datetime | None]

    head: Mapped[Employee | None] = relationship(lazy="raise", foreign_keys="Department.head_id")
    memberships: Mapped[list[UserDepartment]] = relationship(
        back_populates="department", lazy="raise", foreign_keys="UserDepartment.department_id"
    )


class UserDepartment(IdMixin, TimestampMixin, CompanyOwned, Base):
    __tablename__ = "user_departments"
    __table_args__ = (
        *company_reference("user_departments", "user_id", "employees", ondelete="CASCADE"),
        *company_reference("user_departments", "department_id", "departments", ondelete="CASCADE"),
    )

    user_id: Mapped[uuid.UUID] = mapped_column(index=True)
    department_id: Mapped[uuid.UUID] = mapped_column(index=True)
    status: Mapped[MembershipStatus] = mapped_column(
        str_enum(MembershipStatus, 20), default=MembershipStatus.ACTIVE
    )
    deleted_at: Mapped[datetime | None]

    department: Mapped[Department] = relationship(
        back_populates="memberships", lazy="raise", foreign_keys="UserDepartment.department_id"
    )
    user: Mapped[Employee] = relationship(lazy="raise", foreign_keys="UserDepartment.user_id")
