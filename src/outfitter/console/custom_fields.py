"""The custom fields' settings page: the company's fields, with forms to define, change and delete
them (a record's values are custom_values.py's). Each calls the custom fields service the API's
endpoints call, in the signed-in user's unit of work."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError

from outfitter.console.pages import page, render
from outfitter.console.people import Fields, field_errors, pydantic_errors
from outfitter.console.web import MOUNT_PATH, ConsoleWork, console_work, error_page, redirect
from outfitter.core.errors import Conflict, NotFound, ValidationFailed
from outfitter.customfields import service
from outfitter.customfields.schemas import CustomFieldCreate, CustomFieldPatch, ValueMigration
from outfitter.customfields.values import MULTI_SEPARATOR, check_value
from outfitter.models import CustomFieldEntity, CustomFieldType, EquipmentType

router = APIRouter(include_in_schema=False)

ONLY_ADMINS = "Only an admin can change custom fields."
PATH = f"{MOUNT_PATH}/settings/custom-fields"


# --- the settings page --------------------------------------------------------------------------


def _settings(
    request: Request,
    work: ConsoleWork,
    status: int = 200,
    errors: dict[str, str] | None = None,
    values: dict[str, str] | None = None,
    failed: str = "",
) -> Response:
    definitions = service.all_definitions(work.session)
    return render(
        request,
        "custom_fields.html",
        status,
        user=work.user,
        nav="custom_fields",
        definitions=definitions,
        entities=list(CustomFieldEntity),
        types=list(CustomFieldType),
        device_types=list(EquipmentType),
        migrations=list(ValueMigration),
        errors=errors or {},
        values=values or {},
        failed=failed,  # the definition whose change was refused (its form shows the errors)
        saved=request.query_params.get("saved"),
    )


@router.get("/settings/custom-fields")
@page
def custom_fields_page(request: Request) -> Response:
    with console_work(request) as work:
        return _settings(request, work)


def _listed(text: str) -> list[str]:
    return [part.strip() for part in text.replace(MULTI_SEPARATOR, ",").split(",") if part.strip()]


def _rules(values: dict[str, str], type_: str) -> dict[str, Any]:
    """The form's rules as the API's body: empty fields left out, lists from commas, the default
    read as the field's type reads a CSV cell."""
    body: dict[str, Any] = {"label": values.get("label", "")}
    for name in ("pattern", "minimum", "maximum"):
        if values.get(name):
            body[name] = values[name]
    if values.get("choices"):
        body["choices"] = _listed(values["choices"])
    if values.get("device_types"):
        body["device_types"] = _listed(values["device_types"])
    body["required"] = values.get("required") == "yes"
    body["sensitive"] = values.get("sensitive") == "yes"
    if values.get("default"):
        rules = SimpleNamespace(
            key="default",
            type=type_,
            pattern=None,
            minimum=None,
            maximum=None,
            choices=body.get("choices", []),
        )
        try:
            body["default"] = check_value(rules, values["default"], from_text=True)
        except ValueError:
            body["default"] = values["default"]  # the service says what is wrong with it
    return body


@router.post("/settings/custom-fields")
@page
def create_custom_field(request: Request, values: Fields) -> Response:
    with console_work(request, values) as work:
        if not work.user.is_admin:
            return error_page(request, 403, ONLY_ADMINS, work.user)
        body = {"entity": values.get("entity"), "key": values.get("key"), "type": values.get("type")}
        try:
            created = CustomFieldCreate.model_validate(body | _rules(values, values.get("type", "")))
        except ValidationError as exc:
            return _settings(request, work, 422, pydantic_errors(exc), values)
        try:
            service.create_definition(work.session, work.actor, created)
        except (ValidationFailed, Conflict) as exc:
            work.session.rollback()
            return _settings(request, work, exc.status_code, field_errors(exc.errors, exc.message), values)
    return redirect(f"{PATH}?saved=created")


@router.post("/settings/custom-fields/{field_id}")
@page
def update_custom_field(request: Request, field_id: str, values: Fields) -> Response:
    with console_work(request, values) as work:
        if not work.user.is_admin:
            return error_page(request, 403, ONLY_ADMINS, work.user)
        current = service.get_definition(work.session, field_id)  # another company's: 404
        changes = _rules(values, current.type) | {"migrate": values.get("migrate") or "refuse"}
        try:
            patch = CustomFieldPatch.model_validate(changes)
            service.update_definition(work.session, work.actor, field_id, patch)
        except ValidationError as exc:
            return _settings(request, work, 422, pydantic_errors(exc), values, str(current.id))
        except NotFound:
            raise
        except (ValidationFailed, Conflict) as exc:
            work.session.rollback()
            errors = field_errors(exc.errors, exc.message)
            return _settings(request, work, exc.status_code, errors, values, str(current.id))
    return redirect(f"{PATH}?saved=updated")


@router.post("/settings/custom-fields/{field_id}/delete")
@page
def delete_custom_field(request: Request, field_id: str, values: Fields) -> Response:
    with console_work(request, values) as work:
        if not work.user.is_admin:
            return error_page(request, 403, ONLY_ADMINS, work.user)
        service.delete_definition(work.session, work.actor, field_id)
    return redirect(f"{PATH}?saved=deleted")
