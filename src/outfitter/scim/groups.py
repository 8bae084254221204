"""SCIM Groups are departments: displayName is the name, members the active members (Users only),
externalId the identity provider's id. Writes go through `people.departments`, so the rules (a
unique live name, members of the company) and the department events are the API's own."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import Any

from pydantic import ValidationError
from scim2_models import Context, Group, InvalidSyntaxException, InvalidValueException
from sqlalchemy.orm import Session

from outfitter.models import Department
from outfitter.people.repository import DepartmentRepository, with_member
from outfitter.scim.filters import Attribute
from outfitter.scim.responses import with_meta
from outfitter.scim.users import TOLERANT, Links, invalid

CORE_URN = str(Group.__schema__)

FILTERABLE: dict[str, Attribute] = {
    "id": Attribute((Department.id,), kind="id"),
    # the name as its uniqueness folds it (`active_name`, set on every live department)
    "displayname": Attribute((Department.active_name,), folded=True),
    "externalid": Attribute((Department.external_id,), case_exact=True),
    "members.value": Attribute(custom=lambda op, value: with_member(value), kind="id"),
    "meta.created": Attribute((Department.created_at,), kind="datetime"),
    "meta.lastmodified": Attribute((Department.updated_at,), kind="datetime"),
}


def members_of(session: Session, department_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, list[uuid.UUID]]:
    """The active members SCIM can see, per department, in a stable order: one statement."""
    return DepartmentRepository(session).provisioned_members_of(department_ids)


def render(department: Department, members: list[uuid.UUID], links: Links) -> dict[str, Any]:
    resource: dict[str, Any] = {"schemas": [CORE_URN], "id": str(department.id)}
    if department.external_id:
        resource["externalId"] = department.external_id
    resource["displayName"] = department.name
    if members:
        resource["members"] = [{"value": str(member), "$ref": links.user(member)} for member in members]
    return with_meta(
        resource, "Group", links.group(department.id), department.created_at, department.updated_at
    )


def parse(body: Any, context: Context) -> Group:
    if not isinstance(body, dict):
        raise InvalidSyntaxException(detail="The body must be a JSON object: a Group.")
    try:
        return Group.model_validate(body, scim_ctx=context, scim_policy=TOLERANT)
    except ValidationError as exc:
        raise invalid(exc) from None


def wanted_members(group: Group) -> list[str]:
    """The member ids a Group asks for, in order, without repeats; only Users can be members."""
    values: list[str] = []
    for member in group.members or []:
        if member.type and str(member.type).lower() != "user":
            raise InvalidValueException(detail="members: only Users can be members of a Group (department).")
        value = member.value or (str(member.ref).rstrip("/").rpartition("/")[2] if member.ref else None)
        if not value:
            raise InvalidValueException(detail="members: each member needs the value (id) of a User.")
        values.append(str(value))
    return list(dict.fromkeys(values))
