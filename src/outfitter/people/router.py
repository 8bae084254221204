"""People endpoints. HTTP only: parse, call the service, wrap the answer."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from outfitter.core.schemas import Envelope, UuidText, counted, error_responses, list_envelope, ok
from outfitter.csvio.reader import CsvBody, DryRun, ImportResult, csv_request_body, import_message
from outfitter.csvio.writer import CSV_RESPONSE, csv_response
from outfitter.customfields.filters import custom_parameters
from outfitter.customfields.schemas import IncludeSensitive
from outfitter.customfields.service import export_fields
from outfitter.http.openapi import id_path
from outfitter.http.pagination import SyncListing
from outfitter.http.unit_of_work import ReadAccess, UnitOfWorkRoute, WriteAccess
from outfitter.models import CustomFieldEntity
from outfitter.people import bulk, departments, export, imports, service
from outfitter.people.schemas import (
    DepartmentChange,
    DepartmentCreate,
    DepartmentOut,
    DepartmentPatch,
    EmployeeBulkCreate,
    EmployeeChange,
    EmployeeCreate,
    EmployeeOut,
    EmployeePatch,
)

router = APIRouter(prefix="/client", tags=["people"], route_class=UnitOfWorkRoute)

UserId = Annotated[str, id_path("The employee's id", alias="userId")]
DepartmentId = Annotated[str, id_path("The department's id", alias="departmentId")]


async def _list_query(
    request: Request,
    country: Annotated[str | None, Query(description="Country id, name or two-letter code")] = None,
    department_id: Annotated[
        UuidText | None, Query(description="Only active members of this department")
    ] = None,
    search: Annotated[
        str | None, Query(max_length=200, description="Part of the first name, last name or email, any case")
    ] = None,
) -> dict[str, Any]:
    """The list's filters, shared by the list and the export; `service.resolve_filters` checks them."""
    return {
        "country": country,
        "department_id": department_id,
        "search": search,
        "custom": custom_parameters(request.query_params),
    }


ListQuery = Annotated[dict[str, Any], Depends(_list_query)]


@router.get(
    "/employees",
    response_model=list_envelope(EmployeeOut, EmployeeChange),
    responses=error_responses(422),
    summary="List employees, newest first (or the changes since `updated_since`)",
)
def list_employees(client: ReadAccess, pagination: SyncListing, query: ListQuery) -> dict[str, object]:
    """A page of the company's employees, newest first, filtered by country, department, a search of first
    name, last name and email, or custom fields (`cf_badge=...`; ranges for numbers and dates)."""
    filters = service.resolve_filters(client.session, **query)
    records, page = service.list_employees(client.session, pagination, filters)
    return ok(page.body(records), "Employees fetched successfully.")


@router.get(
    "/employees/export",
    response_model=None,
    response_class=StreamingResponse,
    responses={**CSV_RESPONSE, **error_responses(422)},
    summary="The employee list as a CSV file (the list's filters), streamed",
)
def export_employees(
    client: ReadAccess, query: ListQuery, include_sensitive: IncludeSensitive = False
) -> StreamingResponse:
    """The employee list as a CSV file (UTF-8, a header row, one row per employee), with the list's filters,
    streamed whatever its size; a column per custom field (`custom_fields.badge`), the sensitive ones only
    with `include_sensitive=true` and a token holding the custom_fields:sensitive scope."""
    filters = service.resolve_filters(client.session, **query)  # a bad filter is a 422, before any byte
    public, sensitive = export_fields(
        client.session, client.actor, CustomFieldEntity.EMPLOYEE, include_sensitive
    )
    chunks = export.employee_chunks(client.sessions_after(), filters, public, sensitive)
    columns = (*export.COLUMNS, *(f"custom_fields.{key}" for key in (*public, *sensitive)))
    return csv_response(f"employees-{datetime.now(UTC):%Y-%m-%d}.csv", columns, chunks)


@router.post(
    "/employees",
    status_code=201,
    response_model=Envelope[EmployeeOut],
    responses=error_responses(409, 422),
    summary="Create an employee",
)
def create_employee(body: EmployeeCreate, client: WriteAccess) -> dict[str, object]:
    """Create an employee. `country_id` takes a country's id, name or code; an email already used in the
    company is 409."""
    employee = service.create_employee(client.session, client.actor, body)
    return ok(employee, "Employee created successfully.")


@router.post(
    "/employees/bulk",
    status_code=201,
    response_model=Envelope[list[EmployeeOut] | list[list[EmployeeOut]]],
    responses=error_responses(409, 422),
    summary="Create up to 1,000 employees at once, all or nothing",
)
def create_employees_in_bulk(body: EmployeeBulkCreate, client: WriteAccess) -> dict[str, object]:
    """Create up to 1,000 employees in one request, all or nothing: an array of arrays of employees, or a
    flat array. Every item is checked first and every problem is reported at its path
    (`employees.0.3.email`)."""
    created, count = bulk.create_employees(client.session, client.actor, body.employees)
    return ok(created, f"{counted(count, 'employee', 'employees')} created successfully.")


@router.get(
    "/employees/{userId}",
    response_model=Envelope[EmployeeOut],
    responses=error_responses(404),
    summary="Retrieve an employee with departments, equipment and orders",
)
def get_employee(user_id: UserId, client: ReadAccess) -> dict[str, object]:
    """One employee with their departments, the equipment assigned to them and their orders."""
    return ok(service.get_employee(client.session, user_id), "Employee fetched successfully.")


@router.patch(
    "/employees/{userId}",
    response_model=Envelope[EmployeeOut],
    responses=error_responses(404, 422),
    summary="Update an employee's listed fields",
)
def update_employee(user_id: UserId, body: EmployeePatch, client: WriteAccess) -> dict[str, object]:
    """Change an employee's fields; null clears a nullable one. Another company's employee is 404."""
    employee = service.update_employee(client.session, client.actor, user_id, body)
    return ok(employee, "Employee updated successfully.")


@router.delete(
    "/employees/{userId}",
    response_model=Envelope[EmployeeOut],
    responses=error_responses(404, 409),
    summary="Offboard (delete) an employee who holds no Assigned equipment",
)
def delete_employee(user_id: UserId, client: WriteAccess) -> dict[str, object]:
    """Offboard an employee: refused with 409 while they hold Assigned equipment (offboard the devices
    first). Answers the record as it was."""
    employee = service.delete_employee(client.session, client.actor, user_id)
    return ok(employee, "Employee deleted successfully.")


@router.get(
    "/departments",
    response_model=list_envelope(DepartmentOut, DepartmentChange),
    responses=error_responses(422),
    summary="List departments, newest first (or the changes since `updated_since`)",
)
def list_departments(client: ReadAccess, pagination: SyncListing) -> dict[str, object]:
    """A page of the company's departments, newest first, with their heads, members and member and device
    counts."""
    records, page = departments.list_departments(client.session, client.actor, pagination)
    return ok(page.body(records), "Departments fetched successfully.")


@router.post(
    "/departments",
    status_code=201,
    response_model=Envelope[DepartmentOut],
    responses=error_responses(409, 422),
    summary="Create a department",
)
def create_department(body: DepartmentCreate, client: WriteAccess) -> dict[str, object]:
    """Create a department with an optional head and members (employees of the company). A name already used
    is 409."""
    department = departments.create_department(client.session, client.actor, body)
    return ok(department, "Department created successfully.")


@router.get(
    "/departments/{departmentId}",
    response_model=Envelope[DepartmentOut],
    responses=error_responses(404),
    summary="Retrieve a department with its members",
)
def get_department(department_id: DepartmentId, client: ReadAccess) -> dict[str, object]:
    """One department with its head and its members."""
    department = departments.get_department(client.session, client.actor, department_id)
    return ok(department, "Department fetched successfully.")


@router.patch(
    "/departments/{departmentId}",
    response_model=Envelope[DepartmentOut],
    responses=error_responses(404, 409, 422),
    summary="Update a department: name, head, members",
)
def update_department(
    department_id: DepartmentId, body: DepartmentPatch, client: WriteAccess
) -> dict[str, Any]:
    """Rename a department, change its head, or replace its members (`member_ids` is the whole new set)."""
    department = departments.update_department(client.session, client.actor, department_id, body)
    return ok(department, "Department updated successfully.")


@router.delete(
    "/departments/{departmentId}",
    response_model=Envelope[DepartmentOut],
    responses=error_responses(404),
    summary="Delete a department; its memberships end",
)
def delete_department(department_id: DepartmentId, client: WriteAccess) -> dict[str, object]:
    """Delete a department; its memberships end, the employees stay."""
    department = departments.delete_department(client.session, client.actor, department_id)
    return ok(department, "Department deleted successfully.")


@router.post(
    "/employees/import",
    response_model=Envelope[ImportResult],
    responses=error_responses(409, 422),
    openapi_extra=csv_request_body(imports.EXAMPLE),
    summary="Create employees from a CSV file (up to 10 MiB and 10,000 rows), all or nothing",
)
def import_employees(client: WriteAccess, data: CsvBody, dry_run: DryRun = False) -> dict[str, Any]:
    """Create employees from a CSV file whose header names the create body's fields (up to 10 MiB and 10,000
    rows), all or nothing; every problem is reported at its row. `dry_run=true` checks without writing."""
    result = imports.import_employees(client.session, client.actor, data, dry_run=dry_run)
    return ok(result, import_message(result, "employee", "employees"))
