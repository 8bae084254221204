"""Equipment endpoints. HTTP only: parse, call the service, wrap the answer."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from outfitter.core.schemas import (
    Envelope,
    Rendered,
    UuidText,
    error_responses,
    ok,
    render_as,
    rendered_ok,
)
from outfitter.csvio.reader import CsvBody, DryRun, ImportResult, csv_request_body, import_message
from outfitter.csvio.writer import CSV_RESPONSE, csv_response
from outfitter.customfields.filters import custom_parameters
from outfitter.customfields.schemas import IncludeSensitive
from outfitter.customfields.service import export_fields
from outfitter.db.keyset import ListParams
from outfitter.db.reads import ReadPlan
from outfitter.equipment import bulk, export, imports, service
from outfitter.equipment.repository import EquipmentFilters, EquipmentSort
from outfitter.equipment.schemas import (
    EquipmentBulkCreate,
    EquipmentBulkMove,
    EquipmentCreate,
    EquipmentListEnvelope,
    EquipmentOut,
    EquipmentPatch,
    TypeFilter,
)
from outfitter.http.openapi import id_path
from outfitter.http.pagination import Listing, SyncListing
from outfitter.http.unit_of_work import ReadAccess, ReadOnlyAccess, UnitOfWorkRoute, WriteAccess
from outfitter.models import CustomFieldEntity, EquipmentStatus

router = APIRouter(prefix="/client", tags=["equipment"], route_class=UnitOfWorkRoute)

FETCHED = "Equipment fetched successfully."
EquipmentId = Annotated[str, id_path("The equipment's id")]


def _page_answer_plan(
    filters: ReadPlan[EquipmentFilters], pagination: ListParams, sort: EquipmentSort | None = None
) -> ReadPlan[Rendered]:
    """Counters (or the cursor) inside `data` and beside `success`: clients of either shape work.
    Rendered by orjson to the response model's bytes (tests/core/test_hot_reads.py), not validated
    against it again: the plan built it for that model."""
    records, page = yield from service.list_plan((yield from filters), pagination, sort)
    return Rendered(render_as(EquipmentListEnvelope, {**ok(page.body(records), FETCHED), **page.counters()}))


async def _list_query(
    request: Request,
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
    q: Annotated[
        str | None,
        Query(
            max_length=200,
            description="Search: part of the serial number, the name (title), or the assignee's name or "
            "email, in any case",
        ),
    ] = None,
    location_id: Annotated[
        UuidText | None, Query(description="Only devices at this location or anywhere beneath it")
    ] = None,
    home_location_id: Annotated[
        UuidText | None, Query(description="Only devices whose home is this location or beneath it")
    ] = None,
) -> dict[str, Any]:
    """The list's filters, shared by the list and the export; `service.resolve_filters` checks them."""
    return {
        "status": status,
        "type": type,
        "memory": memory,
        "storage": storage,
        "country": country,
        "serial_number": serial_number,
        "q": q,
        "custom": custom_parameters(request.query_params),
        "location_id": location_id,
        "home_location_id": home_location_id,
    }


ListQuery = Annotated[dict[str, Any], Depends(_list_query)]


@router.get(
    "/equipment",
    response_model=EquipmentListEnvelope,
    responses=error_responses(422),
    summary="List the company's equipment (Archived only with status=Archived, or with updated_since)",
)
async def list_equipment(
    reads: ReadOnlyAccess,
    pagination: SyncListing,
    query: ListQuery,
    sort: Annotated[
        EquipmentSort | None,
        Query(
            description="The order: created_at, updated_at, name or status; `-` first for descending "
            "(default -created_at). The id breaks ties."
        ),
    ] = None,
) -> Rendered:
    """A page of the company's devices, newest first (or in `sort` order), filtered by status, type, memory,
    storage, country, serial numbers, a search `q`, or custom fields (`cf_imei=...`; `cf_price__gte=...` and
    `__lte`, `__gt`, `__lt` for numbers and dates; an unknown field is 422). Archived devices appear only
    with `status=Archived` (or in an `updated_since` walk)."""
    return await reads.run(_page_answer_plan(service.filters_plan(**query), pagination, sort))


@router.get(
    "/equipment/export",
    response_model=None,
    response_class=StreamingResponse,
    responses={**CSV_RESPONSE, **error_responses(422)},
    summary="The equipment list as a CSV file (the list's filters), streamed",
)
def export_equipment(
    client: ReadAccess, query: ListQuery, include_sensitive: IncludeSensitive = False
) -> StreamingResponse:
    """The equipment list as a CSV file (UTF-8, a header row, one row per device), with the list's filters,
    streamed whatever its size; a column per custom field (`custom_fields.imei`), the sensitive ones only
    with `include_sensitive=true` and a token holding the custom_fields:sensitive scope."""
    filters = service.resolve_filters(client.session, **query)  # a bad filter is a 422, before any byte
    public, sensitive = export_fields(
        client.session, client.actor, CustomFieldEntity.DEVICE, include_sensitive
    )
    chunks = export.equipment_chunks(client.sessions_after(), filters, public, sensitive)
    columns = (*export.COLUMNS, *(f"custom_fields.{key}" for key in (*public, *sensitive)))
    return csv_response(f"equipment-{datetime.now(UTC):%Y-%m-%d}.csv", columns, chunks)


@router.get(
    "/equipment/in-storage",
    response_model=EquipmentListEnvelope,
    responses=error_responses(422),
    summary="List the company's equipment held in storage",
)
async def list_equipment_in_storage(reads: ReadOnlyAccess, pagination: Listing) -> Rendered:
    """A page of the company's devices with status In_Storage, newest first."""
    filters = service.filters_plan(status=EquipmentStatus.IN_STORAGE)
    return await reads.run(_page_answer_plan(filters, pagination))


@router.post(
    "/equipment",
    status_code=201,
    response_model=Envelope[EquipmentOut],
    responses=error_responses(409, 422),
    summary="Register equipment the company already owns (source External)",
)
def create_equipment(client: WriteAccess, body: EquipmentCreate) -> Rendered:
    """Register a device the company already owns (source External) with status Unassigned, In_Storage or
    Assigned (Assigned needs `assignee_id`). A serial number already in the company is 409."""
    equipment = service.create_equipment(client.session, client.actor, body)
    return rendered_ok(equipment, "Equipment created successfully.")


@router.post(
    "/equipment/bulk",
    status_code=201,
    response_model=Envelope[list[EquipmentOut]],
    responses=error_responses(409, 422),
    summary="Register up to 1,000 devices at once, all or nothing, answered in order",
)
def create_equipment_in_bulk(client: WriteAccess, body: EquipmentBulkCreate) -> Rendered:
    """Register up to 1,000 devices in one request, all or nothing: every item is checked first and every
    problem is reported at its path (`equipment.3.serial_number`). Answers the devices in the order given."""
    items = [(f"equipment.{index}", item) for index, item in enumerate(body.equipment)]
    devices = bulk.register_devices(client.session, client.actor, items)
    return rendered_ok(devices, f"{len(devices)} equipment created successfully.")


@router.post(
    "/equipment/bulk-move",
    response_model=Envelope[list[EquipmentOut]],
    responses=error_responses(409, 422),
    summary="Move up to 1,000 devices to one status, all or nothing (409 lists those that cannot)",
)
def move_equipment_in_bulk(client: WriteAccess, body: EquipmentBulkMove) -> dict[str, Any]:
    """Move up to 1,000 devices to one status, all or nothing. 422 for ids that are unknown or given twice;
    409 listing every device that cannot make the move (the status table of docs/equipment.md, or a device
    a pending transaction reserves, naming its tx_ref)."""
    devices = bulk.move_devices(client.session, client.actor, body)
    return ok(devices, f"{len(devices)} equipment moved to {body.status} successfully.")


@router.get(
    "/equipment/{equipmentId}",
    response_model=Envelope[EquipmentOut],
    responses=error_responses(404),
    summary="Retrieve one equipment with its extended fields (archived ones too)",
)
async def get_equipment(equipmentId: EquipmentId, reads: ReadOnlyAccess) -> Rendered:
    """One device with its extended fields and its full history, Archived ones included. Another company's
    device is 404, as an unknown one."""
    answer = ok(await reads.run(service.detail_plan(equipmentId)), FETCHED)
    return Rendered(render_as(Envelope[EquipmentOut], answer))


@router.patch(
    "/equipment/{equipmentId}",
    response_model=Envelope[EquipmentOut],
    responses=error_responses(404, 409, 422),
    summary="Edit equipment fields, move its status or change its assignee",
)
def update_equipment(equipmentId: EquipmentId, client: WriteAccess, body: EquipmentPatch) -> dict[str, Any]:
    """Edit a device's fields, move its status or change its assignee. A move the status table refuses is
    409, and so is any move of a device a pending transaction (storage onboarding or offboarding)
    reserves, naming its tx_ref. Archived devices cannot change (409)."""
    equipment = service.update_equipment(client.session, client.actor, equipmentId, body)
    return ok(equipment, "Equipment updated successfully.")


@router.delete(
    "/equipment/{equipmentId}",
    response_model=Envelope[EquipmentOut],
    responses=error_responses(404, 409),
    summary="Archive one equipment (a second delete is 404; one a pending transaction reserves, 409)",
)
def delete_equipment(equipmentId: EquipmentId, client: WriteAccess) -> dict[str, Any]:
    """Archive a device (it stays readable with GET). A second delete is 404; a device a pending transaction
    reserves is 409 naming its tx_ref."""
    equipment = service.archive_equipment(client.session, client.actor, equipmentId)
    return ok(equipment, "Equipment deleted successfully.")


@router.post(
    "/equipment/import",
    response_model=Envelope[ImportResult],
    responses=error_responses(409, 422),
    openapi_extra=csv_request_body(imports.EXAMPLE),
    summary="Create equipment from a CSV file (up to 10 MiB and 10,000 rows), all or nothing",
)
def import_equipment(client: WriteAccess, data: CsvBody, dry_run: DryRun = False) -> dict[str, Any]:
    """Register devices from a CSV file whose header names the create body's fields (up to 10 MiB and 10,000
    rows), all or nothing; every problem is reported at its row (`rows.12.serial_number`). `dry_run=true`
    checks without writing."""
    result = imports.import_equipment(client.session, client.actor, data, dry_run=dry_run)
    return ok(result, import_message(result, "equipment", "equipment"))
