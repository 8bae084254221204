"""Bulk actions on devices (move to a status, assign, archive) with a preview, and the CSV import
with its progress: both through the services the API's endpoints call (`bulk.check_move` and
`bulk.move_devices`, `imports.import_equipment`), admins only.

A bulk action names its devices by the rows selected, or by the list's filter ("all N matching").
The preview runs the move's own checks (nothing written) and shows how many devices will move and
which the API refuses, with its reason per row; Apply moves the others, all or nothing, provided
they are still the ones previewed (a digest of their ids travels with the form): what moves is
never more than what the preview said.

The import's progress is streamed in its own answer (`progress <rows>` lines, then the result's
HTML): no state between requests, so any number of server processes serve it.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse
from starlette.datastructures import FormData, QueryParams, UploadFile

from outfitter.console.devices import DeviceQuery, EmployeeChoice, employee_choices, resolve_filters
from outfitter.console.pages import page, render
from outfitter.console.web import MOUNT_PATH, ConsoleWork, console_work, error_page, redirect, templates
from outfitter.core.errors import Conflict, ValidationFailed
from outfitter.csvio.reader import MAX_IMPORT_BYTES, MAX_IMPORT_ROWS
from outfitter.db.tenancy import parse_uuid
from outfitter.equipment import bulk, imports
from outfitter.equipment.repository import UNKNOWN_DEVICE, EquipmentRepository
from outfitter.equipment.schemas import EquipmentBulkMove
from outfitter.models import EquipmentStatus

router = APIRouter(include_in_schema=False)
logger = logging.getLogger(__name__)

IMPORT_PATH = f"{MOUNT_PATH}/devices/import"
ADMIN_ONLY = "Only an admin can change devices."
MAX_BULK = bulk.MAX_BULK_EQUIPMENT
ACTIONS = {
    EquipmentStatus.UNASSIGNED: "Move to Unassigned",
    EquipmentStatus.IN_STORAGE: "Move to In storage",
    EquipmentStatus.SOLD: "Move to Sold",
    EquipmentStatus.ASSIGNED: "Assign to an employee",
    EquipmentStatus.ARCHIVED: "Archive",
}
CHANGED = (
    "The devices this action names changed since the preview (moved, added or removed by someone "
    "else): here is the preview again; check it and apply."
)


async def _bulk_form(request: Request) -> FormData:
    """The bulk form: up to a page of selected ids (100) and a handful of fields."""
    return await request.form(max_files=0, max_fields=MAX_BULK + 20)


BulkForm = Annotated[FormData, Depends(_bulk_form)]


@dataclass
class Refused:
    device_id: str
    title: str
    status: str
    reason: str


@dataclass
class Preview:
    """What a bulk action would do: the devices that move, those refused and why."""

    action: EquipmentStatus
    scope: str  # "selected" or "matching"
    view: str  # the list's filter, as its query string
    selected: list[str]
    movable: list[uuid.UUID] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    error: str = ""  # why nothing can be previewed (no device named, too many)
    assignee_id: str = ""
    assignee_error: str = ""
    notice: str = ""

    @property
    def digest(self) -> str:
        return _digest(self.movable)

    @property
    def needs_assignee(self) -> bool:
        return self.action == EquipmentStatus.ASSIGNED and (not self.assignee_id or bool(self.assignee_error))


def _digest(ids: list[uuid.UUID]) -> str:
    return hashlib.sha256(",".join(sorted(map(str, ids))).encode()).hexdigest()[:32]


def _named_ids(work: ConsoleWork, preview: Preview) -> list[str]:
    """The ids the action names: the rows selected, or every device matching the filter (read
    as the API's export reads the filter, newest first); `preview.error` says when none or too many."""
    if preview.scope == "matching":
        query = DeviceQuery.parse(QueryParams(preview.view))
        filters = resolve_filters(work.session, query)
        rows = EquipmentRepository(work.session).chunk(filters, None, MAX_BULK + 1)
        if len(rows) > MAX_BULK:
            preview.error = (
                f"More than {MAX_BULK:,} devices match this filter; a bulk action takes at most "
                f"{MAX_BULK:,} at once. Narrow the filter (by status, type, country or a search) "
                "and apply it in parts."
            )
            return []
        ids = [str(row.id) for row in rows]
    else:
        ids = list(dict.fromkeys(preview.selected))
    if not ids and not preview.error:
        preview.error = (
            "No device is named: tick the rows to change, or choose all the devices matching the filter."
        )
    return ids


def build_preview(work: ConsoleWork, preview: Preview) -> Preview:
    """Run the move's checks for the named devices (nothing is written) and sort them into those
    that move and those refused, with the API's reason for each."""
    ids = _named_ids(work, preview)
    if not ids:
        return preview
    unknown = [text for text in ids if parse_uuid(text) is None]
    candidates = [parsed for text in ids if (parsed := parse_uuid(text)) is not None]
    assignee = parse_uuid(preview.assignee_id) if preview.assignee_id else None
    if preview.action == EquipmentStatus.ASSIGNED and assignee is None:
        if preview.assignee_id:
            preview.assignee_error = "Choose an employee from the list."
        preview.assignee_id = ""
        return preview
    reasons: dict[uuid.UUID, str] = {}
    for _ in range(2):  # once more without the unknown ids, which stop the checks before the moves'
        if not candidates:
            break
        body = EquipmentBulkMove(equipment_ids=candidates, status=preview.action, assignee_id=assignee)
        try:
            bulk.check_move(work.session, body)
            break
        except ValidationFailed as exc:
            errors = exc.errors or {}
            if "assignee_id" in errors:
                preview.assignee_error = errors["assignee_id"][0]
                return preview
            gone = _by_index(candidates, errors)
            reasons.update(gone)
            candidates = [device for device in candidates if device not in gone]
        except Conflict as exc:
            refused = _by_index(candidates, exc.errors or {})
            reasons.update(refused)
            candidates = [device for device in candidates if device not in refused]
            break
    preview.movable = candidates
    details = EquipmentRepository(work.session).details(list(reasons))
    preview.refused = [Refused(text, "", "", UNKNOWN_DEVICE) for text in unknown]
    for device_id, reason in reasons.items():
        row = details.get(device_id)
        if row is None:
            preview.refused.append(Refused(str(device_id), "", "", reason))
        else:
            preview.refused.append(Refused(str(device_id), row.title, str(row.status), reason))
    return preview


def _by_index(ids: list[uuid.UUID], errors: dict[str, list[str]]) -> dict[uuid.UUID, str]:
    """`equipment_ids.<i>` errors as the reason for each device."""
    found: dict[uuid.UUID, str] = {}
    for path, messages in errors.items():
        index = path.removeprefix("equipment_ids.")
        if index.isdigit() and int(index) < len(ids):
            found[ids[int(index)]] = messages[0]
    return found


def _preview_of(form: FormData) -> Preview | str:
    """The form as a Preview, or what is wrong with its action."""
    action = str(form.get("action") or "")
    if action not in set(ACTIONS):
        return "Choose an action from the list."
    scope = "matching" if form.get("scope") == "matching" else "selected"
    return Preview(
        action=EquipmentStatus(action),
        scope=scope,
        view=str(form.get("view") or "")[:2000],
        selected=[str(value)[:64] for value in form.getlist("id")][:MAX_BULK],
        assignee_id=str(form.get("assignee_id") or "")[:64],
    )


@router.post("/devices/bulk")
@page
def bulk_action(request: Request, form: BulkForm) -> Response:
    fields = {"csrf_token": str(form.get("csrf_token") or "")}
    with console_work(request, fields) as work:
        if not work.user.is_admin:
            return error_page(request, 403, ADMIN_ONLY, work.user)
        preview = _preview_of(form)
        if isinstance(preview, str):
            return error_page(request, 422, preview, work.user)
        assignee_q = str(form.get("assignee_q") or "")[:200]
        employees = (
            employee_choices(work.session, assignee_q) if preview.action == EquipmentStatus.ASSIGNED else []
        )
        build_preview(work, preview)
        apply = form.get("step") == "apply" and not form.get("find")
        if not apply or preview.error or preview.needs_assignee:
            status = 422 if preview.error else 200
            return _rendered_again(request, work, preview, employees, assignee_q, status)
        if preview.digest != str(form.get("expect") or "") or not preview.movable:
            preview.notice = CHANGED if preview.movable else "No device can make this move: nothing changed."
            return _rendered_again(request, work, preview, employees, assignee_q, 409)
        body = EquipmentBulkMove(
            equipment_ids=preview.movable,
            status=preview.action,
            assignee_id=parse_uuid(preview.assignee_id) if preview.assignee_id else None,
        )
        try:
            bulk.move_devices(work.session, work.actor, body)
        except (Conflict, ValidationFailed):  # someone else moved one between the check and the move
            work.session.rollback()
            preview.notice = CHANGED
            return _rendered_again(request, work, preview, employees, assignee_q, 409)
        moved = len(preview.movable)
    done = urlencode([("moved", str(moved)), ("to", preview.action.value)])
    back = preview.view + "&" if preview.view else ""
    return redirect(f"{MOUNT_PATH}/devices?{back}{done}")


def _rendered_again(
    request: Request,
    work: ConsoleWork,
    preview: Preview,
    employees: list[EmployeeChoice],
    assignee_q: str,
    status: int,
) -> Response:
    return render(
        request,
        "device_bulk.html",
        status,
        user=work.user,
        nav="devices",
        preview=preview,
        actions=ACTIONS,
        employees=employees,
        assignee_q=assignee_q,
    )


# --- the CSV import -----------------------------------------------------------------------------------


@dataclass
class ImportOutcome:
    dry_run: bool
    count: int = 0
    errors: list[tuple[str, str, str]] = field(default_factory=list)  # (line, column, message)
    message: str = ""

    @property
    def ok(self) -> bool:
        return not self.errors and not self.message


def _import_errors(exc: ValidationFailed) -> list[tuple[str, str, str]]:
    """`rows.<line>.<column>` keys as (line, column, message) rows of a table."""
    rows: list[tuple[str, str, str]] = []
    for path, messages in (exc.errors or {}).items():
        parts = path.split(".", 2)
        line = parts[1] if len(parts) > 1 and parts[0] == "rows" else ""
        column = parts[2] if len(parts) > 2 else ""
        rows.extend((line, column, message) for message in messages)
    return rows


def run_import(
    request: Request, csrf_token: str, data: bytes, dry_run: bool, progress: Any = None
) -> ImportOutcome:
    """The API's importer in the user's unit of work: what it created (would create), or its
    errors by row, with nothing written."""
    outcome = ImportOutcome(dry_run)
    with console_work(request, {"csrf_token": csrf_token}) as work:
        try:
            result = imports.import_equipment(
                work.session, work.actor, data, dry_run=dry_run, progress=progress
            )
            outcome.count = int(result["count"])
        except ValidationFailed as exc:
            work.session.rollback()
            outcome.errors = _import_errors(exc)
        except Conflict as exc:
            work.session.rollback()
            outcome.message = exc.message
    return outcome


def _import_page(
    request: Request, work: ConsoleWork, outcome: ImportOutcome | None, status: int = 200
) -> Response:
    return render(
        request,
        "device_import.html",
        status,
        user=work.user,
        nav="devices",
        outcome=outcome,
        max_rows=MAX_IMPORT_ROWS,
        max_mib=MAX_IMPORT_BYTES // (1024 * 1024),
        columns=imports.COLUMNS,
    )


@router.get("/devices/import")
@page
def import_page(request: Request) -> Response:
    with console_work(request) as work:
        if not work.user.is_admin:
            return error_page(request, 403, ADMIN_ONLY, work.user)
        return _import_page(request, work, None)


async def _import_form(request: Request) -> FormData:
    return await request.form(max_files=1, max_fields=5, max_part_size=MAX_IMPORT_BYTES)


ImportForm = Annotated[FormData, Depends(_import_form)]


@router.post("/devices/import")
@page
def import_devices(request: Request, form: ImportForm) -> Response:
    csrf_token = str(form.get("csrf_token") or "")
    dry_run = form.get("mode") != "import"
    upload = form.get("file")
    with console_work(request, {"csrf_token": csrf_token}) as work:
        if not work.user.is_admin:
            return error_page(request, 403, ADMIN_ONLY, work.user)
        if not isinstance(upload, UploadFile) or not upload.filename:
            outcome = ImportOutcome(dry_run, message="Choose a CSV file to import.")
            return _import_page(request, work, outcome, 422)
    data = upload.file.read()
    if request.headers.get("x-console-progress") == "stream":
        return StreamingResponse(_streamed(request, csrf_token, data, dry_run), media_type="text/plain")
    outcome = run_import(request, csrf_token, data, dry_run)
    with console_work(request, {"csrf_token": csrf_token}) as work:
        return _import_page(request, work, outcome, 200 if outcome.ok else 422)


def _streamed(request: Request, csrf_token: str, data: bytes, dry_run: bool) -> Iterator[str]:
    """`total <rows>`, `progress <rows read>` lines as the importer reads the rows (a thread of its
    own runs it), then `result` and the outcome's HTML."""
    total = max(1, data.count(b"\n"))
    step = max(1, total // 50)
    events: queue.Queue[tuple[str, str]] = queue.Queue()
    done = 0

    def advance(rows: int) -> None:
        nonlocal done
        done += rows
        if done % step == 0:
            events.put(("progress", str(done)))

    def work() -> None:
        try:
            outcome = run_import(request, csrf_token, data, dry_run, advance)
        except Exception:  # the stream must end: said as a message, the error logged
            outcome = ImportOutcome(
                dry_run, message="The import failed on our side: nothing was written. Try again."
            )
            logger.exception("console import failed")
        html = templates.get_template("device_import_result.html").render(outcome=outcome)
        events.put(("result", html))

    threading.Thread(target=work, name="console-import", daemon=True).start()
    yield f"total {total}\n"
    while True:
        kind, value = events.get()
        if kind == "progress":
            yield f"progress {value}\n"
        else:
            yield f"result\n{value}"
            return
