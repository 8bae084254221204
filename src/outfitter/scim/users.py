"""SCIM Users are employees: how an employee reads as a User, and how a User writes an employee.

| SCIM attribute | employee |
|---|---|
| userName | `user_name` (lower-cased); an employee made through the API answers its email |
| externalId | `external_id` |
| name.givenName, name.familyName | first_name, last_name |
| title | job_title |
| active | false while offboarded (`status` Offboarded) |
| emails | the work email (typed work, else primary, else first; else the userName), and a personal one |
| phoneNumbers | phone (primary, else first) |
| addresses | address (`formatted`, else street, locality, region, postal code) and country (alpha-2) |
| enterprise department | department_name (a label; membership comes from Groups) |
| enterprise manager | manager_id: another employee's SCIM id |
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from email_validator import EmailNotValidError, validate_email
from pydantic import TypeAdapter, ValidationError
from scim2_models import (
    Context,
    EnterpriseUser,
    Error,
    InvalidSyntaxException,
    InvalidValueException,
    SCIMException,
    ScimPolicy,
    User,
)
from scim2_models.path import CompareOperator
from sqlalchemy import func
from sqlalchemy.orm import Session

from outfitter.catalog.reference import find_country
from outfitter.core.errors import validation_message
from outfitter.models import EMPLOYEE_OFFBOARDED, Employee
from outfitter.people.identities import known_as
from outfitter.people.provisioning import ProvisionedEmployee, check_manager, is_active, user_name_of
from outfitter.people.schemas import Address, Name, Phone, Text200
from outfitter.scim.filters import Attribute, bool_attribute, compare_text
from outfitter.scim.responses import with_meta

ScimUser = User[EnterpriseUser]
# The REST API's own rules for the fields a User writes: what its 422 refuses, SCIM's 400 refuses.
_NAME: TypeAdapter[str] = TypeAdapter(Name)  # one line that shows something, composed (NFC)
_PHONE: TypeAdapter[str] = TypeAdapter(Phone)
_ADDRESS: TypeAdapter[str] = TypeAdapter(Address)
_TITLE: TypeAdapter[str] = TypeAdapter(Text200)
CORE_URN = str(User.__schema__)
ENTERPRISE_URN = str(EnterpriseUser.__schema__)
# Requests may carry attributes Outfitter does not keep (locale, ims, an IdP's own extension...):
# they are ignored, as RFC 7644 section 3.3 allows.
TOLERANT = ScimPolicy(unknown=ScimPolicy.Unknown.ignore)

FILTERABLE: dict[str, Attribute] = {
    "id": Attribute((Employee.id,), kind="id"),
    "username": Attribute(
        custom=lambda op, value: (
            known_as(value)
            if op == CompareOperator.eq and value is not None
            else compare_text(func.coalesce(Employee.user_name, Employee.email), op, value)
        )
    ),
    "externalid": Attribute((Employee.external_id,), case_exact=True),
    "emails.value": Attribute((Employee.email, Employee.personal_email), folded=True),  # stored so
    "name.givenname": Attribute((Employee.first_name,)),
    "name.familyname": Attribute((Employee.last_name,)),
    "title": Attribute((Employee.job_title,)),
    "active": bool_attribute(func.coalesce(Employee.status, "") != EMPLOYEE_OFFBOARDED),
    f"{ENTERPRISE_URN.lower()}:department": Attribute((Employee.department_name,)),
    "meta.created": Attribute((Employee.created_at,), kind="datetime"),
    "meta.lastmodified": Attribute((Employee.updated_at,), kind="datetime"),
}

LIMITS = {
    "userName": 320,
    "name.givenName": 100,
    "name.familyName": 100,
    "title": 200,
    "phoneNumbers.value": 50,
    "addresses": 500,
    "department": 200,
    "displayName": 200,  # a Group's: the department's name
    "externalId": 255,
}


@dataclass(frozen=True)
class Links:
    """Absolute URLs of resources, from the base the client called (…/scim/v2)."""

    base: str

    def user(self, user_id: uuid.UUID | str) -> str:
        return f"{self.base}/Users/{user_id}"

    def group(self, group_id: uuid.UUID | str) -> str:
        return f"{self.base}/Groups/{group_id}"


def render(employee: Employee, links: Links) -> dict[str, Any]:
    """The employee as a SCIM User (its country loaded)."""
    resource: dict[str, Any] = {"schemas": [CORE_URN], "id": str(employee.id)}
    if employee.external_id:
        resource["externalId"] = employee.external_id
    resource["userName"] = user_name_of(employee)
    name = {"givenName": employee.first_name, "familyName": employee.last_name}
    resource["name"] = {key: value for key, value in name.items() if value}
    if employee.job_title:
        resource["title"] = employee.job_title
    resource["active"] = is_active(employee)
    # The work email first, then the personal one. Neither typed nor marked primary, as the
    # schema published says (discovery.py): Outfitter keeps one of each, not the IdP's flags.
    emails = [{"value": employee.email}]
    if employee.personal_email and employee.personal_email != employee.email:
        emails.append({"value": employee.personal_email})
    resource["emails"] = emails
    if employee.phone:
        resource["phoneNumbers"] = [{"value": employee.phone}]
    address = {"formatted": employee.address, "country": employee.country.code}
    resource["addresses"] = [{key: value for key, value in address.items() if value}]
    enterprise: dict[str, Any] = {}
    if employee.department_name:
        enterprise["department"] = employee.department_name
    if employee.manager_id:
        enterprise["manager"] = {"value": str(employee.manager_id), "$ref": links.user(employee.manager_id)}
    if enterprise:
        resource["schemas"].append(ENTERPRISE_URN)
        resource[ENTERPRISE_URN] = enterprise
    return with_meta(resource, "User", links.user(employee.id), employee.created_at, employee.updated_at)


def parse(body: Any, context: Context) -> ScimUser:
    """A User from a request body (or from `render`'s output, to patch it)."""
    if not isinstance(body, dict):
        raise InvalidSyntaxException(detail="The body must be a JSON object: a User.")
    try:
        return ScimUser.model_validate(_with_manager_refs(body), scim_ctx=context, scim_policy=TOLERANT)
    except ValidationError as exc:
        raise invalid(exc) from None


def invalid(exc: ValidationError) -> SCIMException:
    """The first of a validation's errors as the SCIM exception it stands for (invalidValue,
    invalidSyntax, mutability...), naming the attribute as SCIM does (`name.givenName`, not the
    model's `given_name`)."""
    error = Error.from_validation_errors(exc)[0]
    first = exc.errors()[0]
    where = ".".join(_scim_name(str(part)) for part in first["loc"] if not isinstance(part, int))
    error.detail = f"{where}: {first['msg']}" if where else first["msg"]
    return SCIMException.from_error(error)


def _scim_name(field: str) -> str:
    head, *rest = field.split("_")
    return head + "".join(word.title() for word in rest)


def manager_reference(value: Any) -> dict[str, str] | None:
    """The enterprise manager in any form identity providers send it (RFC 7643's `{value, $ref}`,
    an object with `value` alone, the bare id, a list of one of these: Entra), as RFC 7643's
    object; None for an empty id, which clears the manager."""
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, dict):
        if not any(key.lower() in ("value", "$ref") for key in value):
            raise InvalidValueException(detail='manager: give the manager\'s id as its "value".')
        given = {key.lower(): item for key, item in value.items()}
        ref = given.get("$ref")
        value = given.get("value") or (str(ref).rstrip("/").rpartition("/")[2] if ref else None)
    if value is not None and not isinstance(value, str):
        raise InvalidValueException(detail="manager: the manager's id is a text.")
    if not value:
        return None
    return {"value": value, "$ref": f"Users/{value}"}


def _with_manager_refs(body: dict[str, Any]) -> dict[str, Any]:
    """The manager of a POST or PUT as RFC 7643 has it (`manager_reference`), which scim2-models
    requires (`$ref` included); an empty id is no manager."""
    for key, extension in body.items():
        if key.lower() != ENTERPRISE_URN.lower() or not isinstance(extension, dict):
            continue
        for name, manager in list(extension.items()):
            if name.lower() != "manager":
                continue
            reference = manager_reference(manager)
            extension = {other: item for other, item in extension.items() if other != name}
            if reference is not None:
                extension[name] = reference
        body = {**body, key: extension}
    return body


def to_provisioned(
    session: Session, user: ScimUser, current: Employee | None, default_country: Callable[[], str | None]
) -> ProvisionedEmployee:
    """The employee fields `user` asks for; 400 `invalidValue` naming what is wrong."""
    user_name = (user.user_name or "").strip().lower()
    if not user_name:
        raise InvalidValueException(detail="userName is required.")
    emails = [email for email in user.emails or [] if email.value]
    # An email typed otherwise (home, other) is never the work email, the employee's identity.
    candidates = [email for email in emails if (email.type or "work").lower() == "work"]
    work = (
        next((email for email in candidates if email.type), None)
        or next((email for email in candidates if email.primary), None)
        or (candidates[0] if candidates else None)  # as `render` lists them: the work email first
    )
    if work is not None:
        email = _email(str(work.value), "emails.value")
    elif current is not None:  # a list of personal emails only: the work email stays
        email = current.email
    elif "@" in user_name:
        email = _email(user_name, "userName")
    else:
        raise InvalidValueException(
            detail="No work email: send one in emails (type work or primary), or an email as userName."
        )
    personal = next(
        (str(item.value).lower() for item in emails if item is not work and str(item.value).lower() != email),
        None,
    )
    first, last = _names(user, user_name)
    phones = [phone for phone in user.phone_numbers or [] if phone.value]
    phone = next((phone for phone in phones if phone.primary), phones[0] if phones else None)
    addresses = list(user.addresses or [])
    address = next((item for item in addresses if item.primary), addresses[0] if addresses else None)
    enterprise = user[EnterpriseUser]
    manager_id = _manager_id(session, enterprise, current)
    wanted = ProvisionedEmployee(
        user_name=limited_text(user_name, "userName"),
        email=email,
        personal_email=_email(personal, "emails.value") if personal else None,
        first_name=limited_text(first, "name.givenName", _NAME),
        last_name=limited_text(last, "name.familyName", _NAME),
        country_id=_country_id(session, address.country if address else None, current, default_country),
        external_id=limited_text(user.external_id, "externalId") or None,
        phone=limited_text(str(phone.value) if phone else "", "phoneNumbers.value", _PHONE),
        address=limited_text(_formatted(address), "addresses", _ADDRESS),
        job_title=limited_text(user.title, "title", _TITLE) or None,
        department_name=limited_text(enterprise.department if enterprise else None, "department") or None,
        manager_id=manager_id,
        active=user.active if user.active is not None else (is_active(current) if current else True),
    )
    return wanted


def _email(value: str, field: str) -> str:
    try:
        return validate_email(value, check_deliverability=False).normalized.lower()
    except EmailNotValidError as exc:
        raise InvalidValueException(detail=f"{field}: {value!r} is not an email address ({exc}).") from None


def limited_text(value: str | None, field: str, rule: TypeAdapter[str] | None = None) -> str:
    """`value` stripped and within the field's length (LIMITS); when sent, as the REST API's `rule`
    for the field takes it (a name on two lines, or of invisible characters only, is refused there
    too). 400 invalidValue naming the field and saying why. An empty value stays empty: which
    fields a resource may leave out is the mapping's to say (docs/scim.md)."""
    value = (value or "").strip()
    if len(value) > LIMITS[field]:
        raise InvalidValueException(detail=f"{field} is longer than {LIMITS[field]} characters.")
    if not value or rule is None:
        return value
    try:
        return rule.validate_python(value)
    except ValidationError as exc:
        problem = validation_message(exc.errors()[0])
        raise InvalidValueException(detail=f"{field}: {value!r}: {problem}") from None


def _names(user: ScimUser, user_name: str) -> tuple[str, str]:
    given = (user.name.given_name if user.name else None) or ""
    family = (user.name.family_name if user.name else None) or ""
    if given.strip():
        return given, family
    # No given name (none sent, or removed): the display name, else the userName's local part, so
    # the employee keeps a first name, as the API requires of every employee.
    shown = (user.display_name or (user.name.formatted if user.name else None) or "").strip()
    first, _, rest = shown.partition(" ") if shown else (user_name.partition("@")[0], "", "")
    return first, family or rest.strip()


def _formatted(address: Any) -> str:
    if address is None:
        return ""
    if address.formatted:
        return str(address.formatted)
    parts = (address.street_address, address.locality, address.region, address.postal_code)
    return ", ".join(str(part) for part in parts if part)


def _country_id(
    session: Session, code: str | None, current: Employee | None, default_country: Callable[[], str | None]
) -> uuid.UUID:
    if code:
        country = find_country(session, code)
        if country is None:
            raise InvalidValueException(
                detail=f"addresses.country: unknown country {code!r}; send an ISO 3166-1 alpha-2 code."
            )
        return country.id
    if current is not None:
        return current.country_id
    default = default_country()
    if default:
        country = find_country(session, default)
        if country is not None:
            return country.id
    raise InvalidValueException(
        detail="addresses.country is required (an ISO 3166-1 alpha-2 code): the company has no default "
        "country for SCIM users (outfitter company set ID --scim-default-country CODE)."
    )


def _manager_id(
    session: Session, enterprise: EnterpriseUser | None, current: Employee | None
) -> uuid.UUID | None:
    manager = enterprise.manager if enterprise else None
    if manager is None:
        return None
    reference = manager.value or (str(manager.ref).rstrip("/").rpartition("/")[2] if manager.ref else "")
    try:
        manager_id = uuid.UUID(str(reference))
    except ValueError:
        manager_id = None
    if manager_id is None or not check_manager(session, manager_id, current.id if current else None):
        raise InvalidValueException(detail=f"manager: {reference!r} is not the id of another User.")
    return manager_id
