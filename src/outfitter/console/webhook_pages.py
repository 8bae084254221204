"""The Integrations pages for webhook endpoints: the list and a new endpoint (its secret shown
once), an endpoint with its deliveries (ping, rotate the secret, disable or enable), and a
delivery with its payload, every attempt's answer and a replay. Admins change; viewers read.

Registering resolves the URL's host (the SSRF check of `webhooks.service.check_url`), which talks
to DNS: as the API's route does, the request checks the user in one short transaction, resolves
with none open, then writes in another.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from pydantic import ValidationError

from outfitter.console import integrations
from outfitter.console.integration_pages import admin_only
from outfitter.console.pages import FormText, page, render
from outfitter.console.web import MOUNT_PATH, ConsoleWork, console_work, redirect
from outfitter.core.errors import Conflict, ValidationFailed
from outfitter.events.service import SUBJECT_TYPES
from outfitter.models import EventType
from outfitter.webhooks import service as webhooks
from outfitter.webhooks.schemas import WebhookEndpointCreate

router = APIRouter(include_in_schema=False)

WEBHOOKS_PATH = f"{MOUNT_PATH}/integrations/webhooks"
Checked = Annotated[list[str], Form()]
SAVED = {
    "ping": "Ping queued: the worker sends it within seconds.",
    "disabled": "Disabled: nothing is sent to it until it is enabled again.",
    "enabled": "Enabled: its pending deliveries go out again.",
    "replayed": "Queued again: the worker sends it within seconds, with the same webhook-id.",
}


def type_groups() -> list[tuple[str, list[str]]]:
    """The event types by subject, for the form's checkboxes."""
    return [
        (subject, [member.value for member in EventType if member.subject_type == subject])
        for subject in SUBJECT_TYPES
    ]


def _list_page(request: Request, work: ConsoleWork, status: int = 200, **context: Any) -> Response:
    return render(
        request,
        "integrations_webhooks.html",
        status,
        user=work.user,
        nav="integrations",
        tab="webhooks",
        endpoints=integrations.list_endpoints(work.session),
        type_groups=type_groups(),
        form=context.pop("form", {"url": "", "description": "", "event_types": []}),
        **context,
    )


def _endpoint_page(
    request: Request, work: ConsoleWork, endpoint_id: str, status: int = 200, **context: Any
) -> Response:
    endpoint = webhooks.get_endpoint(work.session, endpoint_id)
    page_number = _page_number(request.query_params.get("page"))
    found, last_page = integrations.deliveries(work.session, endpoint_id, page_number)
    return render(
        request,
        "integrations_webhook.html",
        status,
        user=work.user,
        nav="integrations",
        tab="webhooks",
        endpoint=endpoint,
        deliveries=found,
        page_number=page_number,
        last_page=last_page,
        saved=SAVED.get(request.query_params.get("saved") or ""),
        **context,
    )


def _page_number(value: str | None) -> int:
    return int(value) if value and value.isdigit() and 0 < int(value) <= 100_000 else 1


def _field_errors(exc: ValidationError) -> dict[str, str]:
    errors: dict[str, str] = {}
    for error in exc.errors():
        name = str(error["loc"][0]) if error["loc"] else "url"
        errors.setdefault(name, error["msg"].rstrip(".") + ".")
    return errors


@router.get("/integrations/webhooks")
@page
def webhooks_page(request: Request) -> Response:
    with console_work(request) as work:
        return _list_page(request, work)


@router.post("/integrations/webhooks")
@page
def create_webhook(
    request: Request,
    url: FormText = "",
    description: FormText = "",
    event_type: Checked = [],  # noqa: B006  (FastAPI copies a form default)
    csrf_token: FormText = "",
) -> Response:
    form = {"url": url, "description": description, "event_types": event_type}
    checks = {"csrf_token": csrf_token}
    with console_work(request, checks) as work:
        refused = admin_only(request, work)
        if refused:
            return refused
        try:
            body = WebhookEndpointCreate(
                url=url, description=description.strip() or None, event_types=event_type
            )
        except ValidationError as exc:
            return _list_page(request, work, 422, errors=_field_errors(exc), form=form)
    try:  # no transaction open: this resolves the host
        webhooks.check_url(body.url, request.app.state.settings)
        problem = None
    except ValidationFailed as exc:
        problem = (exc.errors or {}).get("url", [exc.message])[0]
    with console_work(request, checks) as work:
        refused = admin_only(request, work)
        if refused:
            return refused
        if problem:
            return _list_page(request, work, 422, errors={"url": problem}, form=form)
        try:
            created = integrations.create_endpoint(work.session, work.actor, body)
        except Conflict as exc:
            return _list_page(request, work, 409, errors={"url": exc.message}, form=form)
        return _endpoint_page(request, work, str(created.id), 201, secret=created.secret, created=True)


@router.get("/integrations/webhooks/{endpoint_id}")
@page
def webhook_page(request: Request, endpoint_id: str) -> Response:
    with console_work(request) as work:
        return _endpoint_page(request, work, endpoint_id)


@router.post("/integrations/webhooks/{endpoint_id}/rotate")
@page
def rotate_secret(request: Request, endpoint_id: str, csrf_token: FormText = "") -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        refused = admin_only(request, work)
        if refused:
            return refused
        rotated = integrations.rotate_secret(work.session, work.actor, endpoint_id)
        return _endpoint_page(request, work, endpoint_id, secret=rotated.secret)


@router.post("/integrations/webhooks/{endpoint_id}/ping")
@page
def ping(request: Request, endpoint_id: str, csrf_token: FormText = "") -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        refused = admin_only(request, work)
        if refused:
            return refused
        try:
            integrations.ping(work.session, work.actor, endpoint_id)
        except Conflict as exc:
            return _endpoint_page(request, work, endpoint_id, 409, error=_console_words(exc.message))
    return redirect(f"{WEBHOOKS_PATH}/{endpoint_id}?saved=ping")


@router.post("/integrations/webhooks/{endpoint_id}/enabled")
@page
def set_enabled(
    request: Request, endpoint_id: str, enabled: FormText = "", csrf_token: FormText = ""
) -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        refused = admin_only(request, work)
        if refused:
            return refused
        integrations.set_enabled(work.session, work.actor, endpoint_id, enabled == "yes")
    return redirect(f"{WEBHOOKS_PATH}/{endpoint_id}?saved={'enabled' if enabled == 'yes' else 'disabled'}")


@router.get("/integrations/webhooks/{endpoint_id}/deliveries/{delivery_id}")
@page
def delivery_page(request: Request, endpoint_id: str, delivery_id: str) -> Response:
    with console_work(request) as work:
        return _delivery_page(request, work, endpoint_id, delivery_id)


def _delivery_page(
    request: Request,
    work: ConsoleWork,
    endpoint_id: str,
    delivery_id: str,
    status: int = 200,
    error: str = "",
) -> Response:
    endpoint = webhooks.get_endpoint(work.session, endpoint_id)
    detail = integrations.delivery_detail(work.session, endpoint_id, delivery_id)
    return render(
        request,
        "integrations_delivery.html",
        status,
        user=work.user,
        nav="integrations",
        tab="webhooks",
        endpoint=endpoint,
        detail=detail,
        payload=json.dumps(detail.payload, indent=2, ensure_ascii=False),
        saved=SAVED.get(request.query_params.get("saved") or ""),
        error=error,
    )


@router.post("/integrations/webhooks/{endpoint_id}/deliveries/{delivery_id}/replay")
@page
def replay(request: Request, endpoint_id: str, delivery_id: str, csrf_token: FormText = "") -> Response:
    with console_work(request, {"csrf_token": csrf_token}) as work:
        refused = admin_only(request, work)
        if refused:
            return refused
        try:
            integrations.replay(work.session, work.actor, endpoint_id, delivery_id)
        except Conflict as exc:
            message = _console_words(exc.message)
            return _delivery_page(request, work, endpoint_id, delivery_id, 409, message)
    return redirect(f"{WEBHOOKS_PATH}/{endpoint_id}/deliveries/{delivery_id}?saved=replayed")


def _console_words(message: str) -> str:
    """The service's 409 speaks to API clients; here the button is Enable."""
    return message.replace("enable it first (PATCH with enabled true)", "enable it first (Enable, above)")
