"""Custom field endpoints. HTTP only: parse, call the service, wrap the answer."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from outfitter.core.schemas import Envelope, Page, error_responses, ok
from outfitter.customfields import service
from outfitter.customfields.schemas import (
    CustomFieldCreate,
    CustomFieldOut,
    CustomFieldPatch,
    SensitiveValuesOut,
)
from outfitter.http.openapi import id_path
from outfitter.http.pagination import Pagination
from outfitter.http.unit_of_work import ReadAccess, UnitOfWorkRoute, WriteAccess
from outfitter.models import CustomFieldEntity

router = APIRouter(prefix="/client", tags=["custom fields"], route_class=UnitOfWorkRoute)

FieldId = Annotated[str, id_path("The custom field's id", alias="fieldId")]
EquipmentId = Annotated[str, id_path("The equipment's id")]
UserId = Annotated[str, id_path("The employee's id", alias="userId")]
EntityFilter = Annotated[
    CustomFieldEntity | None, Query(description="Only the fields of devices or of employees")
]


@router.get(
    "/custom-fields",
    response_model=Envelope[Page[CustomFieldOut]],
    responses=error_responses(422),
    summary="List the company's custom fields, newest first",
)
def list_custom_fields(
    client: ReadAccess, pagination: Pagination, entity: EntityFilter = None
) -> dict[str, object]:
    """A page of the fields the company defined for its devices and employees, newest first."""
    records, page = service.list_definitions(client.session, entity, pagination)
    return ok(page.body(records), "Custom fields fetched successfully.")


@router.post(
    "/custom-fields",
    status_code=201,
    response_model=Envelope[CustomFieldOut],
    responses=error_responses(409, 422),
    summary="Define a custom field for devices or employees",
)
def create_custom_field(body: CustomFieldCreate, client: WriteAccess) -> dict[str, object]:
    """Define a field (key, label, type and its rules); records then read and write its value in
    `custom_fields`. A key already defined for the same kind of record is 409."""
    return ok(
        service.create_definition(client.session, client.actor, body), "Custom field created successfully."
    )


@router.get(
    "/custom-fields/{fieldId}",
    response_model=Envelope[CustomFieldOut],
    responses=error_responses(404),
    summary="Retrieve a custom field",
)
def get_custom_field(field_id: FieldId, client: ReadAccess) -> dict[str, object]:
    """One field's definition."""
    return ok(service.get_definition(client.session, field_id), "Custom field fetched successfully.")


@router.patch(
    "/custom-fields/{fieldId}",
    response_model=Envelope[CustomFieldOut],
    responses=error_responses(404, 409, 422),
    summary="Change a custom field; values it would break are refused (409) or migrated as asked",
)
def update_custom_field(field_id: FieldId, body: CustomFieldPatch, client: WriteAccess) -> dict[str, object]:
    """Change a field's label, type, rules, choices, default, sensitivity or device types. When records hold
    values the change would break, the answer is 409 saying how many and why, unless `migrate` is `convert`
    (convert what can be, clear the rest) or `clear`."""
    answer, summary = service.update_definition(client.session, client.actor, field_id, body)
    return ok(answer, f"Custom field updated successfully ({summary}).")


@router.delete(
    "/custom-fields/{fieldId}",
    response_model=Envelope[CustomFieldOut],
    responses=error_responses(404),
    summary="Delete a custom field and clear its values (its events stay in the activity log)",
)
def delete_custom_field(field_id: FieldId, client: WriteAccess) -> dict[str, object]:
    """Delete a field and clear its values from every record. The activity log keeps its history."""
    answer, cleared = service.delete_definition(client.session, client.actor, field_id)
    return ok(answer, f"Custom field deleted successfully ({cleared} values cleared).")


@router.get(
    "/equipment/{equipmentId}/sensitive-fields",
    response_model=Envelope[SensitiveValuesOut],
    responses=error_responses(403, 404),
    summary="A device's sensitive custom fields (needs the custom_fields:sensitive scope)",
)
def get_equipment_sensitive_fields(equipmentId: EquipmentId, client: ReadAccess) -> dict[str, object]:
    """The values of a device's sensitive fields, which no other answer, export or webhook carries."""
    answer = service.sensitive_values(client.session, client.actor, CustomFieldEntity.DEVICE, equipmentId)
    return ok(answer, "Sensitive fields fetched successfully.")


@router.get(
    "/employees/{userId}/sensitive-fields",
    response_model=Envelope[SensitiveValuesOut],
    responses=error_responses(403, 404),
    summary="An employee's sensitive custom fields (needs the custom_fields:sensitive scope)",
)
def get_employee_sensitive_fields(user_id: UserId, client: ReadAccess) -> dict[str, object]:
    """The values of an employee's sensitive fields, which no other answer, export or webhook carries."""
    answer = service.sensitive_values(client.session, client.actor, CustomFieldEntity.EMPLOYEE, user_id)
    return ok(answer, "Sensitive fields fetched successfully.")
