"""The rules of webhook endpoints and their delivery log. Nothing here sends anything: ping and
retry only queue a delivery, which a worker sends once the request has committed."""

from __future__ import annotations

import base64
import secrets
from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.config import Settings
from outfitter.core.errors import Conflict, ValidationFailed
from outfitter.core.tracing import current_trace_id
from outfitter.db.base import new_id, utcnow
from outfitter.db.keyset import (
    ListParams,
    ListResult,
    PageParams,
    PageResult,
    list_page,
    newest_first,
    paginate,
)
from outfitter.db.tenancy import company_of
from outfitter.models import PING_EVENT_TYPE, Company, DeliveryStatus, WebhookDelivery, WebhookEndpoint
from outfitter.outbox import webhook_payload
from outfitter.webhooks.repository import DeliveryRepository, EndpointRepository
from outfitter.webhooks.schemas import (
    WebhookDeliveryOut,
    WebhookEndpointCreate,
    WebhookEndpointOut,
    WebhookEndpointPatch,
    WebhookEndpointWithSecret,
)
from outfitter.webhooks.urls import UnsafeUrl, check_for_registration

SECRET_BYTES = 32
ROTATION_OVERLAP = timedelta(hours=24)
MAX_ENDPOINTS_PER_COMPANY = 50  # each one multiplies the delivery rows every write adds


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def check_url(url: str, settings: Settings) -> None:
    """Refuse an unsafe URL (422 on `url`). Resolving the host talks to DNS: call it with no
    database transaction open."""
    try:
        check_for_registration(url, settings)
    except UnsafeUrl as exc:
        raise ValidationFailed.field("url", str(exc)) from None


def _present(endpoint: WebhookEndpoint) -> WebhookEndpointOut:
    return WebhookEndpointOut.model_validate(endpoint)


def _with_secret(endpoint: WebhookEndpoint) -> WebhookEndpointWithSecret:
    return WebhookEndpointWithSecret.model_validate(endpoint)


def list_endpoints(session: Session, params: PageParams) -> tuple[list[WebhookEndpointOut], PageResult[Any]]:
    page = paginate(session, EndpointRepository(session).newest_first(), params)
    return [_present(endpoint) for endpoint in page.items], page


def get_endpoint(session: Session, endpoint_id: str) -> WebhookEndpointOut:
    return _present(EndpointRepository(session).get(endpoint_id))


def create_endpoint(session: Session, body: WebhookEndpointCreate) -> WebhookEndpointWithSecret:
    """Register an endpoint whose URL the route has checked (`check_url`)."""
    repository = EndpointRepository(session)
    # The company's row, locked, serialises its creates: two racing past the count would exceed
    # the cap (on SQLite the write transaction already runs alone).
    session.execute(select(Company.id).where(Company.id == company_of(session)).with_for_update()).one()
    if len(session.scalars(select(WebhookEndpoint.id)).all()) >= MAX_ENDPOINTS_PER_COMPANY:
        raise Conflict(
            f"A company may register at most {MAX_ENDPOINTS_PER_COMPANY} webhook endpoints: "
            "delete one first, or give one endpoint several event types."
        )
    endpoint = repository.add(
        WebhookEndpoint(
            company_id=company_of(session),
            url=body.url,
            event_types=[str(type_) for type_ in dict.fromkeys(body.event_types)],
            description=body.description or None,
            enabled=True,
            secret=new_secret(),
            concurrency=body.concurrency,
        )
    )
    session.flush()
    return _with_secret(endpoint)


def update_endpoint(session: Session, endpoint_id: str, body: WebhookEndpointPatch) -> WebhookEndpointOut:
    """Change an endpoint; a new URL was checked by the route (`check_url`)."""
    changes = body.model_fields_set
    nulls: dict[str, list[str]] = {
        name: ["May not be null."]
        for name in ("url", "event_types", "enabled", "concurrency")
        if name in changes and getattr(body, name) is None
    }
    if nulls:
        raise ValidationFailed.fields(nulls)
    endpoint = EndpointRepository(session).get(endpoint_id, for_update=True)
    if body.url is not None:
        endpoint.url = body.url
    if body.event_types is not None:
        endpoint.event_types = [str(type_) for type_ in dict.fromkeys(body.event_types)]
    if "description" in changes:
        endpoint.description = body.description or None
    if body.concurrency is not None:
        endpoint.concurrency = body.concurrency  # the workers read it with each claim
    if body.enabled is not None and body.enabled != endpoint.enabled:
        endpoint.enabled = body.enabled
        # Re-enabled: a fresh start for the 5-day rule; its pending deliveries go out again.
        endpoint.disabled_reason = None if body.enabled else "Disabled by the client."
        endpoint.failing_since = None
    endpoint.updated_at = utcnow()
    session.flush()
    return _present(endpoint)


def delete_endpoint(session: Session, endpoint_id: str) -> WebhookEndpointOut:
    """Deletes the endpoint and its delivery log; nothing more is sent to it."""
    repository = EndpointRepository(session)
    endpoint = repository.get(endpoint_id, for_update=True)
    answer = _present(endpoint)
    session.delete(endpoint)
    session.flush()
    return answer


def rotate_secret(session: Session, endpoint_id: str) -> WebhookEndpointWithSecret:
    """A new secret; for 24 h every delivery carries a signature with each, so a receiver can
    switch whenever it likes within that day. Rotating again replaces the older one at once."""
    endpoint = EndpointRepository(session).get(endpoint_id, for_update=True)
    now = utcnow()
    endpoint.previous_secret = endpoint.secret
    endpoint.previous_secret_expires_at = now + ROTATION_OVERLAP
    endpoint.secret = new_secret()
    endpoint.updated_at = now
    session.flush()
    return _with_secret(endpoint)


def _require_enabled(endpoint: WebhookEndpoint) -> None:
    if not endpoint.enabled:
        raise Conflict(
            "The webhook endpoint is disabled: enable it first (PATCH with enabled true). "
            f"It was disabled because: {endpoint.disabled_reason or 'unknown'}"
        )


def ping(session: Session, endpoint_id: str) -> WebhookDeliveryOut:
    """Queue a `ping` delivery to this endpoint alone (a worker sends it at once). A ping is no
    activity-log event: it has no `events` row, only its delivery."""
    endpoint = EndpointRepository(session).get(endpoint_id)
    _require_enabled(endpoint)
    now = utcnow()
    event_id = new_id()
    data = {"endpoint_id": str(endpoint.id), "url": endpoint.url}
    delivery = WebhookDelivery(
        company_id=endpoint.company_id,
        endpoint_id=endpoint.id,
        event_id=event_id,
        event_type=PING_EVENT_TYPE,
        payload=webhook_payload(event_id, PING_EVENT_TYPE, now, data),
        status=DeliveryStatus.PENDING,
        attempts=0,
        round_started_at=now,
        round_attempts=0,
        next_attempt_at=now,
        created_at=now,
        trace_id=current_trace_id.get(),
    )
    DeliveryRepository(session).add(delivery)
    session.flush()
    return WebhookDeliveryOut.model_validate(delivery)


def list_deliveries(
    session: Session, endpoint_id: str, status: DeliveryStatus | None, params: ListParams
) -> tuple[list[WebhookDeliveryOut], ListResult[Any]]:
    endpoint = EndpointRepository(session).get(endpoint_id)
    statement = DeliveryRepository(session).of_endpoint(endpoint.id, status)
    page = list_page(session, statement, newest_first(WebhookDelivery), params)
    return [WebhookDeliveryOut.model_validate(delivery) for delivery in page.items], page


def retry_delivery(session: Session, endpoint_id: str, delivery_id: str) -> WebhookDeliveryOut:
    """Due now, with a fresh retry schedule; the same `webhook-id`, so a receiver that already has
    it can tell. A delivery being sent right now keeps its worker's claim."""
    endpoint = EndpointRepository(session).get(endpoint_id)
    delivery = DeliveryRepository(session).get_of_endpoint(endpoint.id, delivery_id)
    _require_enabled(endpoint)
    now = utcnow()
    delivery.status = DeliveryStatus.PENDING
    delivery.round_started_at = now
    delivery.round_attempts = 0
    delivery.next_attempt_at = now
    session.flush()
    return WebhookDeliveryOut.model_validate(delivery)
