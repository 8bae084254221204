"""Equipment endpoints. HTTP only: parse, call the service, wrap the answer."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from outfitter.core.openapi import id_path
from outfitter.core.pagination import PageParams, Pagination
from outfitter.core.reads import ReadPlan
from outfitter.core.schemas import Envelope, error_responses, ok
from outfitter.core.unit_of_work import ReadOnlyAccess, UnitOfWorkRoute, WriteAccess
from outfitter.equipment import service
from outfitter.equipment.repository import EquipmentFilters
from outfitter.equipment.schemas import (
    EquipmentCreate,
    EquipmentOut,
    EquipmentPageEnvelope,
    EquipmentPatch,
    TypeFilter,
)
from outfitter.models import EquipmentStatus

router = APIRouter(prefix="/client", tags=["equipment"], route_class=UnitOfWorkRoute)

FETCHED = "Equipment fetched successfully."
EquipmentId = Annotated[str, id_path("The equipment's id")]


def _page_answer_plan(
    filters: ReadPlan[EquipmentFilters], pagination: PageParams
) -> ReadPlan[dict[str, Any]]:
    """Counters inside `data` and beside `success`: clients of either shape work."""
    records, page = yield from service.list_plan((yield from filters), pagination)
    return {**ok(page.body(records), FETCHED), **page.counters()}


@router.get(
    "/equipment",
    response_model=EquipmentPageEnvelope,
    responses=error_responses(422),
    summary="List the company's equipment (Archived only with status=Archived)",
)
async def list_equipment(
    reads: ReadOnlyAccess,
    pagination: Pagination,
    status: Annotated[EquipmentStatus | None, Query(description="Only this status")] = None,
    type: Annotated[
        TypeFilter | None, Query(description="Laptop/Workstation also matches Laptop and Workstation")
    ] = None,
    memory: Annotated[
        str | None, Query(max_length=50, description="RAM, e.g. 16GB (case and spaces ignored)")
    ] = None,
    storage: Annotated[str | None, Query(max_length=50, description="Storage, e.g. 512 GB")] = None,
    country: Annotated[str | None, Query(max_length=100, description="Country name or code")] = None,
    serial_number: Annotated[
        str | None, Query(max_length=10_000, description="Serial numbers separated by commas, exact")
    ] = None,
) -> dict[str, Any]:
    filters = service.filters_plan(
        status=status,
        type=type,
        memory=memory,
        storage=storage,
        country=country,
        serial_number=serial_number,
    )
    return await reads.run(_page_answer_plan(filters, pagination))


@router.get(
    "/equipment/in-storage",
    response_model=EquipmentPageEnvelope,
    responses=error_responses(422),
    summary="List the company's equipment held in storage",
)
async def list_equipment_in_storage(reads: ReadOnlyAccess, pagination: Pagination) -> dict[str, Any]:
    filters = service.filters_plan(status=EquipmentStatus.IN_STORAGE)
    return await reads.run(_page_answer_plan(filters, pagination))


@router.post(
    "/equipment",
    status_code=201,
    response_model=Envelope[EquipmentOut],
    responses=error_responses(409, 422),
    summary="Register equipment the company already owns (source External)",
)
def create_equipment(client: WriteAccess, body: EquipmentCreate) -> dict[str, Any]:
    equipment = service.create_equipment(client.session, client.auth, body)
    return ok(equipment, "Equipment created successfully.")


@router.get(
    "/equipment/{equipmentId}",
    response_model=Envelope[EquipmentOut],
    responses=error_responses(404),
    summary="Retrieve one equipment with its extended fields (archived ones too)",
)
async def get_equipment(equipmentId: EquipmentId, reads: ReadOnlyAccess) -> dict[str, Any]:
    return ok(await reads.run(service.detail_plan(equipmentId)), FETCHED)


@router.patch(
    "/equipment/{equipmentId}",
    response_model=Envelope[EquipmentOut],
    responses=error_responses(404, 409, 422),
    summary="Edit equipment fields, move its status or change its assignee",
)
def update_equipment(equipmentId: EquipmentId, client: WriteAccess, body: EquipmentPatch) -> dict[str, Any]:
    equipment = service.update_equipment(client.session, client.auth, equipmentId, body)
    return ok(equipment, "Equipment updated successfully.")


@router.delete(
    "/equipment/{equipmentId}",
    response_model=Envelope[EquipmentOut],
    responses=error_responses(404),
    summary="Archive one equipment (a second delete is 404)",
)
def delete_equipment(equipmentId: EquipmentId, client: WriteAccess) -> dict[str, Any]:
    equipment = service.archive_equipment(client.session, client.auth, equipmentId)
    return ok(equipment, "Equipment deleted successfully.")
