"""People request and response shapes: the Employee and Department resources field for field as
docs/people.md lists them, and the bodies that create and change them."""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any

from email_validator import EmailNotValidError, validate_email
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
)

from outfitter.core.schemas import (
    NOT_BLANK,
    ONE_LINE,
    Documented,
    DocumentedAs,
    Money,
    NotNull,
    Schema,
    Timestamp,
    UuidText,
)
from outfitter.db.base import composed
from outfitter.models import EquipmentStatus, MembershipStatus, OrderStage, OrderStatus, RetrievalDestination

# A leading '+', then a digit or '(' (local numbers are often written "(080) 1234 5678"), then digits,
# spaces, '-', '.' and parentheses, ending with no space; 4 to 50 characters once stripped.
_PHONE = re.compile(r"^\+?\(?[0-9][0-9 ()\-.]*[0-9()\-.]$")
PHONE_MESSAGE = (
    "Not a valid phone number: begin with a digit, '+' or '(', then use only digits, spaces, '-', "
    "'.' and parentheses."
)


def _email(value: str) -> str:
    try:
        return validate_email(value, check_deliverability=False).normalized.lower()
    except EmailNotValidError as error:
        raise ValueError(f"Not a valid email address: {error}") from None


def _phone(value: str) -> str:
    if not _PHONE.match(value):
        raise ValueError(PHONE_MESSAGE)
    return value


def _text(max_length: int) -> Any:
    return StringConstraints(strip_whitespace=True, min_length=1, max_length=max_length)


Name = Annotated[str, _text(100), ONE_LINE, AfterValidator(composed)]  # found by a search however typed
Email = Annotated[str, _text(320), NOT_BLANK, AfterValidator(_email), Documented(format="email")]
Phone = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=4, max_length=50),
    AfterValidator(_phone),
    Documented(pattern=_PHONE.pattern, examples=["+234 801 234 5678", "(080) 1234 5678"]),
]
Address = Annotated[str, _text(500), NOT_BLANK]
CountryRef = Annotated[str, _text(100), NOT_BLANK]
Text200 = Annotated[str, _text(200), NOT_BLANK]
# Unique in its company ignoring case: kept in Unicode's composed form (NFC), so that "Équipe" typed
# with a combining accent (as macOS and some HR exports write it) is the same name, not a second.
DepartmentName = Annotated[str, _text(200), ONE_LINE, AfterValidator(composed)]
Text100 = Annotated[str, _text(100), NOT_BLANK]
Text50 = Annotated[str, _text(50), NOT_BLANK]


def _blank_to_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


def _nullable(*branches: dict[str, Any]) -> WithJsonSchema:
    return WithJsonSchema({"anyOf": [*branches, {"type": "null"}]})


# Nullable fields: null or a blank string leaves them empty (so a blank string is documented too).
OptionalEmail = Annotated[
    Email | None,
    BeforeValidator(_blank_to_none),
    _nullable(
        {"type": "string", "format": "email", "maxLength": 320},
        {"type": "string", "pattern": r"^\s*$"},
    ),
]
Optional200 = Annotated[
    Text200 | None, BeforeValidator(_blank_to_none), _nullable({"type": "string", "maxLength": 200})
]
Optional100 = Annotated[
    Text100 | None, BeforeValidator(_blank_to_none), _nullable({"type": "string", "maxLength": 100})
]
Optional50 = Annotated[
    Text50 | None, BeforeValidator(_blank_to_none), _nullable({"type": "string", "maxLength": 50})
]


CustomFieldsIn = Annotated[
    dict[str, Any] | None,
    Field(
        max_length=100,
        description="Values of the company's custom fields by key; a null clears one (docs/custom-fields.md)",
    ),
]


class Body(BaseModel):
    """A request body: unknown fields are refused with 422 naming them."""

    model_config = ConfigDict(extra="forbid")


_ADA: dict[str, Any] = {
    "first_name": "Ada",
    "last_name": "Lovelace",
    "email": "ada.lovelace@example.com",
    "country_id": "NG",
    "phone": "+234 801 234 5678",
    "address": "1 Marina, Lagos",
    "job_title": "Engineer",
    "employment_type": "Full-time",
}


class EmployeeCreate(Body):
    model_config = ConfigDict(json_schema_extra={"examples": [_ADA]})

    first_name: Name
    last_name: Name
    email: Email
    country_id: CountryRef = Field(description="The country's id, name or two-letter code")
    phone: Phone
    address: Address
    personal_email: OptionalEmail = None
    landmark: Optional200 = None
    job_title: Optional200 = None
    tax_number: Optional100 = None
    employment_type: Optional50 = None
    custom_fields: CustomFieldsIn = None


class EmployeeBulkCreate(Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"employees": [[_ADA, {**_ADA, "first_name": "Grace", "email": "grace.hopper@example.com"}]]}
            ]
        }
    )

    # Typed in the document; checked item by item by `bulk.create_employees`, which reports every
    # item's errors at its path. The flat array is the document's first shape, so that a generated
    # client's natural call (a list of employees) is the one it builds; the nested one stays accepted.
    employees: Annotated[
        list[Any],
        DocumentedAs(list[EmployeeCreate] | list[Annotated[list[EmployeeCreate], Documented(minItems=1)]]),
    ] = Field(
        json_schema_extra={"minItems": 1},
        description="A flat array of employees, or an array holding arrays of them (the shape older clients "
        "send, which the answer mirrors); at most 1,000 employees in all",
    )


class EmployeePatch(Body):
    model_config = ConfigDict(json_schema_extra={"examples": [{"job_title": "Staff Engineer"}]})

    """Only the fields docs/people.md lists; null clears the nullable ones."""

    first_name: Annotated[Name | None, NotNull()] = None
    last_name: Annotated[Name | None, NotNull()] = None
    personal_email: OptionalEmail = None
    phone: Annotated[Phone | None, NotNull()] = None
    country: Annotated[CountryRef | None, NotNull()] = Field(
        None, description="The country's id, name or two-letter code"
    )
    landmark: Optional200 = None
    job_title: Optional200 = None
    tax_number: Optional100 = None
    address: Annotated[Address | None, NotNull()] = None
    employment_type: Optional50 = None
    custom_fields: CustomFieldsIn = None


REQUIRED_ON_PATCH = ("first_name", "last_name", "phone", "country", "address")


class DepartmentCreate(Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "Engineering",
                    "head_id": "5b6c1f0e-8a2d-4c3b-9e1f-7a2b3c4d5e6f",
                    "member_ids": [
                        "5b6c1f0e-8a2d-4c3b-9e1f-7a2b3c4d5e6f",
                        "7d1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6",
                    ],
                }
            ]
        }
    )

    name: DepartmentName
    head_id: UuidText | None = Field(None, description="An employee of the company, or null")
    member_ids: list[UuidText] = Field(default_factory=list, max_length=1000)


class DepartmentPatch(Body):
    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "Platform Engineering"}]})

    name: Annotated[DepartmentName | None, NotNull()] = None
    head_id: UuidText | None = Field(None, description="An employee of the company, or null to clear")
    member_ids: Annotated[list[UuidText] | None, NotNull()] = Field(
        None, max_length=1000, description="The full set of members; replaces it ([] removes them all)"
    )


class DepartmentBrief(Schema):
    id: uuid.UUID
    name: str


class EquipmentBrief(Schema):
    id: uuid.UUID
    title: str
    type: str | None
    status: EquipmentStatus
    serial_number: str | None


class OrderBrief(Schema):
    id: uuid.UUID
    tx_ref: str
    status: OrderStatus
    total_amount: Money
    currency: str
    created_at: Timestamp


class OpenRetrieval(Schema):
    """A device of this employee on its way back: its retrieval order is in progress and the
    device has not been received yet (it is still Assigned to the employee)."""

    order_id: uuid.UUID
    order_item_id: uuid.UUID
    equipment_id: uuid.UUID | None
    destination: RetrievalDestination | None
    stage: OrderStage


class EmployeeOut(Schema):
    id: uuid.UUID
    first_name: str
    last_name: str
    email: str
    personal_email: str | None
    phone: str
    country: str
    country_code: str
    currency_code: str
    landmark: str | None
    last_login: Timestamp | None
    job_title: str | None
    tax_number: str | None
    employment_type: str | None
    level: str | None
    status: str | None
    address: str
    departments: list[DepartmentBrief]
    catalogs: None = None
    equipment: list[EquipmentBrief]
    orders: list[OrderBrief]
    open_retrievals: list[OpenRetrieval]
    custom_fields: dict[str, Any] = Field(
        default_factory=dict,
        description="The company's custom fields (docs/custom-fields.md), sensitive ones left out",
    )
    created_at: Timestamp
    updated_at: Timestamp = Field(
        description="When the employee's own fields last changed: where an `updated_since` sync resumes"
    )


class CompanyBrief(Schema):
    id: uuid.UUID
    name: str


class HeadOut(Schema):
    name: str
    id: uuid.UUID | None


class UserDepartmentOut(Schema):
    id: uuid.UUID
    company_id: uuid.UUID
    user_id: uuid.UUID
    department_id: uuid.UUID
    status: MembershipStatus
    created_at: Timestamp
    updated_at: Timestamp
    deleted_at: Timestamp | None


class MemberOut(Schema):
    id: uuid.UUID
    first_name: str
    last_name: str
    email: str
    user_departments: list[UserDepartmentOut]


class DepartmentOut(Schema):
    id: uuid.UUID
    company: CompanyBrief
    name: str
    member_count: int
    asset_count: int
    created_at: Timestamp
    updated_at: Timestamp
    head: HeadOut
    members: list[MemberOut]


class EmployeeChange(EmployeeOut):
    """An employee in a cursor page: `deleted` marks one offboarded (`updated_since` reports it,
    as it was just before, at the time it left)."""

    deleted: bool = False


class DepartmentChange(DepartmentOut):
    """A department in a cursor page: `deleted` marks one deleted (`updated_since` reports it)."""

    deleted: bool = False
