"""The SCIM operations on Users and Groups: parse with scim2-models, apply the people rules, answer
the resource. Every write runs in the request's unit of work and records its one event."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter
from scim2_models import Context, Group, InvalidFilterException, InvalidValueException
from sqlalchemy import Select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import flag_modified

from outfitter.core.errors import NotFound
from outfitter.db.tenancy import parse_uuid
from outfitter.models import Department, Employee
from outfitter.models.events import EventType
from outfitter.payments.gateways import GatewayRegistry
from outfitter.people import departments, identities, provisioning
from outfitter.people.provisioning import Change
from outfitter.people.repository import DepartmentRepository, EmployeeRepository, counted_page
from outfitter.people.schemas import DepartmentCreate, DepartmentName, DepartmentPatch
from outfitter.scim import filters, groups, offboarding, patching, users
from outfitter.scim.discovery import MAX_RESULTS
from outfitter.scim.responses import check_version
from outfitter.scim.settings import settings_of
from outfitter.scim.users import Links
from outfitter.tenants.actor import Actor

MAX_MEMBERS = 1000  # as the department endpoints (DepartmentPatch.member_ids)
_DEPARTMENT_NAME: TypeAdapter[str] = TypeAdapter(DepartmentName)


@dataclass(frozen=True)
class Query:
    """A list request: `filter`, `startIndex` (from 1) and `count` (0 answers only the total)."""

    filter: str | None
    start_index: int
    count: int

    @classmethod
    def parse(cls, filter: str | None, start_index: Any, count: Any) -> Query:
        if filter and "\x00" in filter:
            raise InvalidFilterException(detail="The filter must not contain NUL characters (\\u0000).")
        start = _integer(start_index, "startIndex", 1)
        wanted = _integer(count, "count", MAX_RESULTS)
        return cls(
            filter.strip() if filter and filter.strip() else None,
            max(start, 1),
            min(max(wanted, 0), MAX_RESULTS),
        )


def _integer(value: Any, name: str, default: int) -> int:
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidValueException(detail=f"{name} must be an integer, got {value!r}.") from None


def _page(session: Session, statement: Select[Any], query: Query) -> tuple[list[Any], int]:
    return counted_page(session, statement, query.start_index - 1, query.count)


# Users


def list_users(session: Session, query: Query, links: Links) -> tuple[list[dict[str, Any]], int]:
    statement = EmployeeRepository(session).provisioned_listing()
    if query.filter:
        statement = statement.where(filters.where(query.filter, users.FILTERABLE, users.CORE_URN))
    employees, total = _page(session, statement, query)
    return [users.render(employee, links) for employee in employees], total


def get_user(session: Session, user_id: str, links: Links) -> dict[str, Any]:
    return users.render(provisioning.get_provisioned(session, user_id), links)


def create_user(session: Session, actor: Actor, body: Any, links: Links) -> dict[str, Any]:
    user = users.parse(body, Context.RESOURCE_CREATION_REQUEST)
    employee = provisioning.create(
        session, users.to_provisioned(session, user, None, _default_country(session, actor))
    )
    provisioning.record_change(session, employee, EventType.EMPLOYEE_CREATED, actor.name)
    return users.render(employee, links)


def replace_user(
    session: Session,
    actor: Actor,
    user_id: str,
    body: Any,
    if_match: str | None,
    links: Links,
    gateways: GatewayRegistry,
) -> dict[str, Any]:
    employee = _locked_user(session, user_id, if_match, links)
    user = users.parse(body, Context.RESOURCE_REPLACEMENT_REQUEST)
    return _write_user(session, actor, employee, user, links, gateways)


def patch_user(
    session: Session,
    actor: Actor,
    user_id: str,
    body: Any,
    if_match: str | None,
    links: Links,
    gateways: GatewayRegistry,
) -> dict[str, Any]:
    """The operations applied to the User as read, then the row locked for the write only; if the
    User changed in between, they are applied again to the User as locked."""
    operations = patching.operations_of(body)
    read = users.render(provisioning.get_provisioned(session, user_id), links)
    patched = patching.apply(users.parse(_without_meta(read), Context.DEFAULT), copy.deepcopy(operations))
    employee = _locked_user(session, user_id, if_match, links)
    locked = users.render(employee, links)
    if locked["meta"]["version"] != read["meta"]["version"]:
        patched = patching.apply(users.parse(_without_meta(locked), Context.DEFAULT), operations)
    return _write_user(session, actor, employee, patched, links, gateways)


def delete_user(
    session: Session,
    actor: Actor,
    user_id: str,
    if_match: str | None,
    links: Links,
    gateways: GatewayRegistry,
) -> None:
    employee = _locked_user(session, user_id, if_match, links)
    if provisioning.deprovision(session, employee) == Change.OFFBOARDED:
        offboarding.offboard(session, actor, employee, gateways)


def _locked_user(session: Session, user_id: str, if_match: str | None, links: Links) -> Employee:
    employee = provisioning.get_provisioned(session, user_id, for_update=True)
    if if_match is not None:
        check_version(if_match, users.render(employee, links))
    return employee


def _write_user(
    session: Session,
    actor: Actor,
    employee: Employee,
    user: users.ScimUser,
    links: Links,
    gateways: GatewayRegistry,
) -> dict[str, Any]:
    wanted = users.to_provisioned(session, user, employee, _default_country(session, actor))
    change = provisioning.update(session, employee, wanted)
    if change == Change.UPDATED:
        provisioning.record_change(session, employee, EventType.EMPLOYEE_UPDATED, actor.name)
    elif change == Change.OFFBOARDED:
        offboarding.offboard(session, actor, employee, gateways)
    return users.render(employee, links)


def _default_country(session: Session, actor: Actor) -> Callable[[], str | None]:
    """The company's default country for users sent without one, read only if one is needed."""
    return lambda: settings_of(session, actor.company_id).default_country


def _without_meta(resource: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in resource.items() if key != "meta"}


# Groups


def list_groups(session: Session, query: Query, links: Links) -> tuple[list[dict[str, Any]], int]:
    statement = DepartmentRepository(session).live_listing()
    if query.filter:
        statement = statement.where(filters.where(query.filter, groups.FILTERABLE, groups.CORE_URN))
    found, total = _page(session, statement, query)
    members = groups.members_of(session, [department.id for department in found])
    return [groups.render(department, members.get(department.id, []), links) for department in found], total


def get_group(session: Session, group_id: str, links: Links) -> dict[str, Any]:
    department = _live_group(session, group_id)
    return groups.render(department, groups.members_of(session, [department.id])[department.id], links)


def create_group(session: Session, actor: Actor, body: Any, links: Links) -> dict[str, Any]:
    group = groups.parse(body, Context.RESOURCE_CREATION_REQUEST)
    _check_group_external_id(session, group, None)
    created = departments.create_department(
        session, actor, DepartmentCreate(name=_display_name(group), member_ids=_members(session, group))
    )
    department = _live_group(session, str(created.id))
    if group.external_id:  # part of the creation: lastModified stays `created`, the UPDATE
        flag_modified(department, "updated_at")  # setting it as it is rather than onupdate's now
    _set_external_id(session, department, group.external_id)
    return get_group(session, str(department.id), links)


def replace_group(
    session: Session, actor: Actor, group_id: str, body: Any, if_match: str | None, links: Links
) -> dict[str, Any]:
    department = _locked_group(session, group_id, if_match, links)
    return _write_group(
        session, actor, department, groups.parse(body, Context.RESOURCE_REPLACEMENT_REQUEST), links
    )


def patch_group(
    session: Session, actor: Actor, group_id: str, body: Any, if_match: str | None, links: Links
) -> dict[str, Any]:
    """The operations applied to the Group as read, then the row locked for the write only (a
    REST change of the department waits for no PATCH's work); if the Group changed in between,
    they are applied again to the Group as locked."""
    operations = patching.operations_of(body)
    read = get_group(session, group_id, links)
    patched = patching.apply_to_group(
        groups.parse(_without_meta(read), Context.DEFAULT), copy.deepcopy(operations)
    )
    department = _live_group(session, group_id, for_update=True)
    locked = get_group(session, group_id, links)
    check_version(if_match, locked)
    if locked["meta"]["version"] != read["meta"]["version"]:
        patched = patching.apply_to_group(groups.parse(_without_meta(locked), Context.DEFAULT), operations)
    return _write_group(session, actor, department, patched, links)


def delete_group(session: Session, actor: Actor, group_id: str, if_match: str | None, links: Links) -> None:
    department = _locked_group(session, group_id, if_match, links)
    department.external_id = None  # free for a Group made later
    departments.delete_department(session, actor, group_id)


def _live_group(session: Session, group_id: str, for_update: bool = False) -> Department:
    department = DepartmentRepository(session).find_live(group_id, for_update=for_update)
    if department is None:
        raise NotFound.record("Group")
    return department


def _locked_group(session: Session, group_id: str, if_match: str | None, links: Links) -> Department:
    department = _live_group(session, group_id, for_update=True)
    if if_match is not None:
        check_version(if_match, get_group(session, group_id, links))
    return department


def _write_group(
    session: Session, actor: Actor, department: Department, group: Group, links: Links
) -> dict[str, Any]:
    """Write the name, members and externalId `group` asks for; the department event when the name
    or members change (externalId is not part of the department the API shows)."""
    _check_group_external_id(session, group, department)
    name = _display_name(group)
    members = _members(session, group)
    current = [str(member) for member in groups.members_of(session, [department.id])[department.id]]
    changes: dict[str, Any] = {}
    if name != department.name:
        changes["name"] = name
    if set(members) != set(current):
        changes["member_ids"] = members
    if changes:
        departments.update_department(session, actor, str(department.id), DepartmentPatch(**changes))
    _set_external_id(session, department, group.external_id)
    return get_group(session, str(department.id), links)


def _set_external_id(session: Session, department: Department, external_id: str | None) -> None:
    department.external_id = external_id or None
    try:
        session.flush()
    except IntegrityError:  # a concurrent request gave it to another Group after our check
        raise identities.group_external_id_just_taken(external_id) from None


def _display_name(group: Group) -> str:
    """The department's name, by the REST API's rule for it; 400 invalidValue naming what is wrong."""
    name = users.limited_text(group.display_name, "displayName", _DEPARTMENT_NAME)
    if not name:
        raise InvalidValueException(detail="displayName is required.")
    return name


def _members(session: Session, group: Group) -> list[str]:
    """The members' ids; each must be a User of the company (else 400, naming it). One statement."""
    wanted = groups.wanted_members(group)
    if len(wanted) > MAX_MEMBERS:  # before the look-up: one bind parameter per member
        raise InvalidValueException(detail=f"A Group (department) holds at most {MAX_MEMBERS} members.")
    parsed = {member: parse_uuid(member) for member in wanted}
    found = EmployeeRepository(session).provisioned_ids({value for value in parsed.values() if value})
    unknown = next((member for member, value in parsed.items() if value not in found), None)
    if unknown is not None:
        raise InvalidValueException(detail=f"members: {unknown!r} is not the id of a User.")
    return wanted


def _check_group_external_id(session: Session, group: Group, department: Department | None) -> None:
    if not group.external_id:
        return
    if len(group.external_id) > users.LIMITS["externalId"]:  # a User's and a Group's alike
        raise InvalidValueException(
            detail=f"externalId is longer than {users.LIMITS['externalId']} characters."
        )
    except_id = department.id if department is not None else None
    identities.check_group_external_id(DepartmentRepository(session), group.external_id, except_id)
