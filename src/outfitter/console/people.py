"""The console's employees and departments: lists, a page per record, forms and the CSV import.

Every read and write goes through the services the API's people endpoints call (people.service,
people.departments, people.imports), in the signed-in user's unit of work, so the rules, the
messages and the events (actor `console:<email>`) are the API's. A refused write is rolled back
and its reasons are shown beside the fields they concern.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError
from sqlalchemy.orm import Session
from starlette.datastructures import QueryParams

from outfitter.console.custom_values import panel, submitted_values
from outfitter.console.pages import page, render
from outfitter.console.web import MOUNT_PATH, ConsoleWork, console_work, error_page, redirect
from outfitter.core.errors import Conflict, DomainError, NotFound, ValidationFailed, validation_message
from outfitter.csvio.reader import MAX_IMPORT_BYTES
from outfitter.db.keyset import PageParams, PageResult
from outfitter.models import CustomFieldEntity
from outfitter.people import departments as department_service
from outfitter.people import imports
from outfitter.people import service as employee_service
from outfitter.people.repository import DepartmentRepository
from outfitter.people.schemas import (
    DepartmentCreate,
    DepartmentPatch,
    EmployeeCreate,
    EmployeeOut,
    EmployeePatch,
)

router = APIRouter(include_in_schema=False)

PER_PAGE_CHOICES = (25, 50, 100)
MAX_QUERY_TEXT = 200
MAX_FILTER_DEPARTMENTS = 500
FormText = Annotated[str, Form(max_length=1000)]

# The employee form's fields, in order: (name, label, input type, required, help). `country` is the
# create body's `country_id` and the patch's `country`; `email` cannot change after creation.
EMPLOYEE_FIELDS: tuple[tuple[str, str, str, bool, str], ...] = (
    ("first_name", "First name", "text", True, ""),
    ("last_name", "Last name", "text", True, ""),
    ("email", "Work email", "email", True, "Unique in the company; it cannot be changed later."),
    ("country", "Country", "text", True, "The country's name or two-letter code, such as NG or Kenya."),
    ("phone", "Phone", "tel", True, "Digits, spaces, '-', '.' and parentheses; may begin with '+'."),
    ("address", "Address", "text", True, ""),
    ("personal_email", "Personal email", "email", False, ""),
    ("landmark", "Landmark", "text", False, ""),
    ("job_title", "Job title", "text", False, ""),
    ("tax_number", "Tax number", "text", False, ""),
    ("employment_type", "Employment type", "text", False, "Full-time, Contractor..."),
)
_FIELD_NAMES = {name for name, *_ in EMPLOYEE_FIELDS}
_FORM_ALIASES = {"country_id": "country", "head_id": "head", "member_ids": "member"}
ONLY_ADMINS = "Only an admin can change employees and departments."


# --- shared -----------------------------------------------------------------------------------------


def _whole(value: str | None, default: int) -> int:
    if value is None or not value.isdigit() or len(value) > 9:
        return default
    return max(1, int(value))


def field_errors(errors: Mapping[str, Sequence[str]] | None, fallback: str) -> dict[str, str]:
    """The errors of a ValidationFailed by the form field they concern (`body.country_id` and
    `country_id` are the form's `country`); anything unplaced goes under `fallback`."""
    placed: dict[str, str] = {}
    for path, messages in (errors or {}).items():
        name = path.split(".")[-1] if "." in path else path
        if name.isdigit():  # member_ids.0
            name = path.split(".")[-2]
        name = _FORM_ALIASES.get(name, name)
        placed.setdefault(name if name else fallback, " ".join(messages))
    return placed


def pydantic_errors(exc: ValidationError) -> dict[str, str]:
    placed: dict[str, str] = {}
    for detail in exc.errors():
        name = str(detail["loc"][0]) if detail["loc"] else "form"
        placed.setdefault(_FORM_ALIASES.get(name, name), validation_message(detail))
    return placed


def refused_unless_admin(request: Request, work: ConsoleWork, message: str = ONLY_ADMINS) -> Response | None:
    """Viewers read; every write is an admin's (403 saying `message`; the page hides the controls)."""
    if work.user.is_admin:
        return None
    return error_page(request, 403, message, work.user)


async def form_fields(request: Request) -> dict[str, str]:
    """A plain form's text fields (no files)."""
    async with request.form(max_files=0, max_fields=50) as form:
        return {name: value.strip() for name, value in form.items() if isinstance(value, str)}


Fields = Annotated[dict[str, str], Depends(form_fields)]


# --- employees: the list ----------------------------------------------------------------------------


@dataclass(frozen=True)
class EmployeeQuery:
    """The list's view, all in the URL: the API's filters (search, country, department) and page."""

    q: str = ""
    country: str = ""
    department: str = ""
    page: int = 1
    per_page: int = PER_PAGE_CHOICES[0]
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, params: QueryParams) -> EmployeeQuery:
        per_page = _whole(params.get("per_page"), PER_PAGE_CHOICES[0])
        return cls(
            q=(params.get("q") or "").strip()[:MAX_QUERY_TEXT],
            country=(params.get("country") or "").strip()[:MAX_QUERY_TEXT],
            department=(params.get("department") or "").strip()[:MAX_QUERY_TEXT],
            page=_whole(params.get("page"), 1),
            per_page=per_page if per_page in PER_PAGE_CHOICES else PER_PAGE_CHOICES[0],
        )

    def params(self, **changes: Any) -> dict[str, str]:
        """The view as query parameters (defaults left out), with `changes`: a link's query."""
        view = replace(self, **changes)
        values = {
            "q": view.q,
            "country": view.country,
            "department": view.department,
            "per_page": "" if view.per_page == PER_PAGE_CHOICES[0] else str(view.per_page),
            "page": "" if view.page == 1 else str(view.page),
        }
        return {name: value for name, value in values.items() if value}


@dataclass(frozen=True)
class Listing:
    rows: list[Any]
    total: int
    page: int
    last_page: int


def _paged(records: list[Any], result: Any, page_number: int) -> Listing:
    assert isinstance(result, PageResult)  # page mode: PageParams
    return Listing(records, result.total, page_number, result.last_page)


def list_employees(session: Session, query: EmployeeQuery) -> Listing:
    """A page of employees as `GET /client/employees` answers the same filters; a filter the
    service refuses (an unknown country or department) is noted beside its field and left out."""
    given: dict[str, Any] = {"country": query.country or None, "department_id": query.department or None}
    while True:
        try:
            filters = employee_service.resolve_filters(session, search=query.q or None, **given)
            break
        except ValidationFailed as exc:
            path = next(iter(exc.errors or {}), "")
            name = path.removeprefix("query.")
            if name not in given or given[name] is None:
                raise
            query.errors[{"department_id": "department"}.get(name, name)] = (exc.errors or {})[path][0]
            given[name] = None
    params = PageParams(page=query.page, per_page=query.per_page)
    records, result = employee_service.list_employees(session, params, filters)
    return _paged(records, result, query.page)


def department_choices(session: Session) -> list[Any]:
    """The live departments (oldest first) for the list's department filter."""
    statement = DepartmentRepository(session).live_listing().limit(MAX_FILTER_DEPARTMENTS)
    return list(session.scalars(statement))


@router.get("/employees")
@page
def employees_page(request: Request) -> Response:
    query = EmployeeQuery.parse(request.query_params)
    with console_work(request) as work:
        listing = list_employees(work.session, query)
        return render(
            request,
            "employees.html",
            user=work.user,
            nav="employees",
            query=query,
            listing=listing,
            departments=department_choices(work.session),
            per_page_choices=PER_PAGE_CHOICES,
            urlencode=urlencode,
            deleted=request.query_params.get("deleted"),
        )


# --- employees: the CSV import ---------------------------------------------------------------------


@dataclass(frozen=True)
class ImportOutcome:
    dry_run: bool
    count: int = 0
    errors: list[tuple[str, str, str]] = field(default_factory=list)  # (line, column, message)
    problem: str = ""


def _row_errors(errors: Mapping[str, Sequence[str]]) -> list[tuple[str, str, str]]:
    """`rows.3.email` -> ("3", "email", message); a file-wide problem has no line."""
    rows: list[tuple[str, str, str]] = []
    for path, messages in errors.items():
        parts = path.split(".", 2)
        line, column = (parts[1], parts[2]) if len(parts) == 3 and parts[0] == "rows" else ("", path)
        rows.extend((line, column, message) for message in messages)
    return rows


def _import_page(
    request: Request, work: ConsoleWork, outcome: ImportOutcome | None = None, status: int = 200
) -> Response:
    return render(
        request,
        "employees_import.html",
        status,
        user=work.user,
        nav="employees",
        outcome=outcome,
        columns=imports.COLUMNS,
        required=imports.REQUIRED,
        example=imports.EXAMPLE,
    )


@router.get("/employees/import")
@page
def import_page(request: Request) -> Response:
    with console_work(request) as work:
        return refused_unless_admin(request, work) or _import_page(request, work)


@router.post("/employees/import")
@page
def import_employees(
    request: Request,
    file: Annotated[UploadFile | None, File()] = None,
    dry_run: FormText = "",
    csrf_token: FormText = "",
) -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        refused = refused_unless_admin(request, work)
        if refused:
            return refused
        checking = dry_run == "1"
        data = file.file.read(MAX_IMPORT_BYTES + 1) if file is not None else b""
        if not data:
            problem = "Choose a CSV file to import."
            return _import_page(request, work, ImportOutcome(checking, problem=problem), 422)
        if len(data) > MAX_IMPORT_BYTES:
            problem = f"The file is larger than {MAX_IMPORT_BYTES // (1024 * 1024)} MiB: split it in parts."
            return _import_page(request, work, ImportOutcome(checking, problem=problem), 413)
        try:
            result = imports.import_employees(work.session, work.actor, data, dry_run=checking)
        except (ValidationFailed, Conflict) as exc:
            work.session.rollback()  # all or nothing: not one employee of the file stays
            outcome = ImportOutcome(checking, errors=_row_errors(exc.errors or {}), problem=exc.message)
            return _import_page(request, work, outcome, exc.status_code)
        return _import_page(request, work, ImportOutcome(checking, count=int(result["count"])))


# --- employees: one, its form ----------------------------------------------------------------------


def _employee_form(
    request: Request,
    work: ConsoleWork,
    values: Mapping[str, str],
    errors: Mapping[str, str] | None = None,
    status: int = 200,
    employee: EmployeeOut | None = None,
) -> Response:
    return render(
        request,
        "employee_form.html",
        status,
        user=work.user,
        nav="employees",
        fields=EMPLOYEE_FIELDS,
        values=values,
        errors=errors or {},
        employee=employee,
    )


def _values_of(employee: EmployeeOut) -> dict[str, str]:
    values = {name: getattr(employee, name, None) for name in _FIELD_NAMES}
    values["country"] = employee.country
    return {name: "" if value is None else str(value) for name, value in values.items()}


@router.get("/employees/new")
@page
def new_employee_page(request: Request) -> Response:
    with console_work(request) as work:
        return refused_unless_admin(request, work) or _employee_form(request, work, {})


def validated(model: type[BaseModel], values: dict[str, Any]) -> tuple[Any, dict[str, str]]:
    try:
        return model.model_validate(values), {}
    except ValidationError as exc:
        return None, pydantic_errors(exc)


def _domain_errors(exc: DomainError, conflict_field: str) -> dict[str, str]:
    """A service's refusal by field: a 409 (a taken email or name) belongs to `conflict_field`."""
    if isinstance(exc, Conflict):
        return {conflict_field: exc.message}
    return field_errors(exc.errors, "form") or {"form": exc.message}


@router.post("/employees")
@page
def create_employee(request: Request, values: Fields) -> Response:
    with console_work(request, values) as work:
        refused = refused_unless_admin(request, work)
        if refused:
            return refused
        body = {name: values.get(name, "") for name in _FIELD_NAMES - {"country"}}
        body["country_id"] = values.get("country", "")
        created, errors = validated(EmployeeCreate, body)
        if errors:
            return _employee_form(request, work, values, errors, 422)
        try:
            employee = employee_service.create_employee(work.session, work.actor, created)
        except (ValidationFailed, Conflict) as exc:
            work.session.rollback()  # nothing of the refused create stays
            return _employee_form(request, work, values, _domain_errors(exc, "email"), exc.status_code)
    return redirect(f"{MOUNT_PATH}/employees/{employee.id}?saved=created")


def _employee(
    request: Request,
    work: ConsoleWork,
    employee_id: str,
    status: int = 200,
    error: str = "",
    custom_errors: dict[str, str] | None = None,
) -> Response:
    employee = employee_service.get_employee(work.session, employee_id)
    entity = CustomFieldEntity.EMPLOYEE
    custom = panel(work.session, entity, employee.id, employee.custom_fields, errors=custom_errors)
    return render(
        request,
        "employee.html",
        status,
        user=work.user,
        nav="employees",
        employee=employee,
        custom=custom,
        error=error,
        saved=request.query_params.get("saved"),
    )


@router.post("/employees/{employee_id}/custom-fields")
@page
def update_employee_custom_fields(request: Request, employee_id: str, values: Fields) -> Response:
    """The employee page's custom fields form, as a PATCH of `custom_fields` (sensitive ones kept
    unless a new value or a clear is given)."""
    with console_work(request, values) as work:
        refused = refused_unless_admin(request, work)
        if refused:
            return refused
        employee = employee_service.get_employee(work.session, employee_id)  # another company's: 404
        entity = CustomFieldEntity.EMPLOYEE
        given, errors = submitted_values(work.session, entity, values, employee.custom_fields)
        if not errors:
            try:
                patch = EmployeePatch(custom_fields=given)
                employee_service.update_employee(work.session, work.actor, employee_id, patch)
            except ValidationFailed as exc:
                work.session.rollback()
                found = (exc.errors or {}).items()
                errors = {path.removeprefix("custom_fields."): messages[0] for path, messages in found}
        if errors:
            return _employee(request, work, employee_id, 422, "", errors)
    return redirect(f"{MOUNT_PATH}/employees/{employee_id}?saved=updated")


@router.get("/employees/{employee_id}")
@page
def employee_page(request: Request, employee_id: str) -> Response:
    with console_work(request) as work:
        return _employee(request, work, employee_id)


@router.get("/employees/{employee_id}/edit")
@page
def edit_employee_page(request: Request, employee_id: str) -> Response:
    with console_work(request) as work:
        refused = refused_unless_admin(request, work)
        if refused:
            return refused
        employee = employee_service.get_employee(work.session, employee_id)
        return _employee_form(request, work, _values_of(employee), employee=employee)


@router.post("/employees/{employee_id}")
@page
def update_employee(request: Request, employee_id: str, values: Fields) -> Response:
    with console_work(request, values) as work:
        refused = refused_unless_admin(request, work)
        if refused:
            return refused
        employee = employee_service.get_employee(work.session, employee_id)  # another company's: 404
        shown = {**values, "email": employee.email}
        patch, errors = validated(
            EmployeePatch, {name: values.get(name, "") for name in _FIELD_NAMES - {"email"}}
        )
        if errors:
            return _employee_form(request, work, shown, errors, 422, employee)
        try:
            employee_service.update_employee(work.session, work.actor, employee_id, patch)
        except NotFound:
            raise
        except (ValidationFailed, Conflict) as exc:
            work.session.rollback()
            return _employee_form(
                request, work, shown, _domain_errors(exc, "form"), exc.status_code, employee
            )
    return redirect(f"{MOUNT_PATH}/employees/{employee_id}?saved=updated")


@router.post("/employees/{employee_id}/delete")
@page
def delete_employee(request: Request, employee_id: str, csrf_token: FormText = "") -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        refused = refused_unless_admin(request, work)
        if refused:
            return refused
        try:
            employee_service.delete_employee(work.session, work.actor, employee_id)
        except Conflict as exc:  # they still hold devices: the API's reason, nothing changed
            work.session.rollback()
            return _employee(request, work, employee_id, 409, exc.message)
    return redirect(f"{MOUNT_PATH}/employees?deleted=1")


# --- departments -----------------------------------------------------------------------------------


def _departments(
    request: Request,
    work: ConsoleWork,
    status: int = 200,
    values: Mapping[str, str] | None = None,
    errors: Mapping[str, str] | None = None,
) -> Response:
    number = _whole(request.query_params.get("page"), 1)
    records, result = department_service.list_departments(
        work.session, work.actor, PageParams(page=number, per_page=PER_PAGE_CHOICES[0])
    )
    return render(
        request,
        "departments.html",
        status,
        user=work.user,
        nav="departments",
        listing=_paged(records, result, number),
        values=values or {},
        errors=errors or {},
        deleted=request.query_params.get("deleted"),
    )


@router.get("/departments")
@page
def departments_page(request: Request) -> Response:
    with console_work(request) as work:
        return _departments(request, work)


def employee_id_by_email(session: Session, email: str) -> str | None:
    """The id of the company's employee whose work email is `email` (any case), found by the
    employee list's own search."""
    wanted = email.strip().lower()
    if not wanted:
        return None
    filters = employee_service.resolve_filters(session, country=None, department_id=None, search=wanted)
    records, _ = employee_service.list_employees(session, PageParams(page=1, per_page=10), filters)
    return next((str(record.id) for record in records if record.email.lower() == wanted), None)


NO_SUCH_EMPLOYEE = "No employee of this company has this email: check it on the Employees page."


def _head_id(session: Session, email: str) -> tuple[str | None, dict[str, str]]:
    if not email:
        return None, {}
    found = employee_id_by_email(session, email)
    return found, ({} if found else {"head": NO_SUCH_EMPLOYEE})


@router.post("/departments")
@page
def create_department(request: Request, values: Fields) -> Response:
    with console_work(request, values) as work:
        refused = refused_unless_admin(request, work)
        if refused:
            return refused
        head_id, errors = _head_id(work.session, values.get("head", ""))
        body, invalid = validated(DepartmentCreate, {"name": values.get("name", ""), "head_id": head_id})
        errors = {**invalid, **errors}
        if errors:
            return _departments(request, work, 422, values, errors)
        try:
            department = department_service.create_department(work.session, work.actor, body)
        except (ValidationFailed, Conflict) as exc:
            work.session.rollback()
            return _departments(request, work, exc.status_code, values, _domain_errors(exc, "name"))
    return redirect(f"{MOUNT_PATH}/departments/{department.id}?saved=created")


def _department(
    request: Request,
    work: ConsoleWork,
    department_id: str,
    status: int = 200,
    values: Mapping[str, str] | None = None,
    errors: Mapping[str, str] | None = None,
) -> Response:
    department = department_service.get_department(work.session, work.actor, department_id)
    head_email = next((member.email for member in department.members if member.id == department.head.id), "")
    if department.head.id is not None and not head_email:
        head = employee_service.get_employee(work.session, str(department.head.id))
        head_email = head.email
    return render(
        request,
        "department.html",
        status,
        user=work.user,
        nav="departments",
        department=department,
        values=values or {"name": department.name, "head": head_email},
        errors=errors or {},
        saved=request.query_params.get("saved"),
    )


@router.get("/departments/{department_id}")
@page
def department_page(request: Request, department_id: str) -> Response:
    with console_work(request) as work:
        return _department(request, work, department_id)


def _change_department(
    request: Request,
    work: ConsoleWork,
    department_id: str,
    patch: dict[str, Any],
    values: Mapping[str, str] | None = None,
    errors: Mapping[str, str] | None = None,
) -> Response | None:
    """Apply `patch` through the department service; the page again (with the reasons beside the
    fields, nothing changed) when refused, None when done."""
    current = department_service.get_department(work.session, work.actor, department_id)  # 404 first
    body, invalid = validated(DepartmentPatch, patch)
    errors = {**invalid, **(errors or {})}
    status = 422
    if not errors:
        try:
            department_service.update_department(work.session, work.actor, department_id, body)
            return None
        except NotFound:
            raise
        except (ValidationFailed, Conflict) as exc:
            work.session.rollback()
            errors, status = _domain_errors(exc, "name"), exc.status_code
    return _department(request, work, str(current.id), status, values, errors)


@router.post("/departments/{department_id}")
@page
def update_department(request: Request, department_id: str, values: Fields) -> Response:
    with console_work(request, values) as work:
        refused = refused_unless_admin(request, work)
        if refused:
            return refused
        department_service.get_department(work.session, work.actor, department_id)  # 404 before anything
        head_id, errors = _head_id(work.session, values.get("head", ""))
        patch = {"name": values.get("name", ""), "head_id": head_id}
        shown = _change_department(request, work, department_id, patch, values, errors)
        if shown is not None:
            return shown
    return redirect(f"{MOUNT_PATH}/departments/{department_id}?saved=updated")


def _member_ids(work: ConsoleWork, department_id: str) -> list[str]:
    department = department_service.get_department(work.session, work.actor, department_id)
    return [str(member.id) for member in department.members]


@router.post("/departments/{department_id}/members")
@page
def add_member(request: Request, department_id: str, values: Fields) -> Response:
    with console_work(request, values) as work:
        refused = refused_unless_admin(request, work)
        if refused:
            return refused
        members = _member_ids(work, department_id)
        email = values.get("email", "")
        found = employee_id_by_email(work.session, email)
        errors = {} if found else {"member": NO_SUCH_EMPLOYEE if email else "Give the employee's work email."}
        if found in members:
            errors = {"member": "This employee is already a member."}
        shown = _change_department(
            request, work, department_id, {"member_ids": [*members, found or ""]}, {"member": email}, errors
        )
        if shown is not None:
            return shown
    return redirect(f"{MOUNT_PATH}/departments/{department_id}?saved=member-added")


@router.post("/departments/{department_id}/members/{employee_id}/remove")
@page
def remove_member(
    request: Request, department_id: str, employee_id: str, csrf_token: FormText = ""
) -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        refused = refused_unless_admin(request, work)
        if refused:
            return refused
        members = _member_ids(work, department_id)
        if employee_id not in members:
            raise NotFound("Member not found.")
        remaining = [member for member in members if member != employee_id]
        shown = _change_department(request, work, department_id, {"member_ids": remaining})
        if shown is not None:
            return shown
    return redirect(f"{MOUNT_PATH}/departments/{department_id}?saved=member-removed")


@router.post("/departments/{department_id}/delete")
@page
def delete_department(request: Request, department_id: str, csrf_token: FormText = "") -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        refused = refused_unless_admin(request, work)
        if refused:
            return refused
        department_service.delete_department(work.session, work.actor, department_id)
    return redirect(f"{MOUNT_PATH}/departments?deleted=1")
