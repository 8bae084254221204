"""Webhook endpoint endpoints. HTTP only: parse, call the service, wrap the answer."""

from __future__ import annotations

from typing import Annotated, TypeVar

from fastapi import APIRouter, Query, Request

from outfitter.core.schemas import Envelope, Page, error_responses, list_envelope, ok
from outfitter.http.openapi import id_path
from outfitter.http.pagination import Listing, Pagination
from outfitter.http.unit_of_work import ReadAccess, UnitOfWork, UnitOfWorkRoute, WriteAccess
from outfitter.models import DeliveryStatus
from outfitter.webhooks import service
from outfitter.webhooks.schemas import (
    WebhookDeliveryOut,
    WebhookEndpointCreate,
    WebhookEndpointOut,
    WebhookEndpointPatch,
    WebhookEndpointWithSecret,
)

router = APIRouter(prefix="/client/webhook-endpoints", tags=["webhooks"], route_class=UnitOfWorkRoute)

EndpointId = Annotated[str, id_path("The webhook endpoint's id", alias="endpointId")]
DeliveryId = Annotated[str, id_path("The delivery's id", alias="deliveryId")]
StatusFilter = Annotated[DeliveryStatus | None, Query(description="Only deliveries in this status")]


BodyT = TypeVar("BodyT", WebhookEndpointCreate, WebhookEndpointPatch)


def _checked(work: UnitOfWork, body: BodyT, request: Request) -> BodyT:
    """The body once its URL, if it gives one, is safe to send to (422 on `url` otherwise).
    Resolving the host talks to DNS: the request's reads end first, so no transaction is open
    meanwhile (end_reads refuses after a write)."""
    if body.url is not None:
        work.end_reads()
        service.check_url(body.url, request.app.state.settings)
    return body


@router.get(
    "",
    response_model=Envelope[Page[WebhookEndpointOut]],
    responses=error_responses(422),
    summary="List webhook endpoints, newest first",
)
def list_webhook_endpoints(client: ReadAccess, pagination: Pagination) -> dict[str, object]:
    """A page of the company's webhook endpoints, newest first (secrets are never shown here)."""
    records, page = service.list_endpoints(client.session, pagination)
    return ok(page.body(records), "Webhook endpoints fetched successfully.")


@router.post(
    "",
    status_code=201,
    response_model=Envelope[WebhookEndpointWithSecret],
    responses=error_responses(409, 422),
    summary="Register a webhook endpoint; the answer shows its signing secret (only here and on rotation)",
)
def create_webhook_endpoint(
    body: WebhookEndpointCreate, request: Request, client: WriteAccess
) -> dict[str, object]:
    """Register an https URL to receive the company's events (all of them, or the `event_types` given). The
    answer is the only one, with rotation, that shows the signing secret: keep it."""
    endpoint = service.create_endpoint(client.session, _checked(client, body, request))
    return ok(endpoint, "Webhook endpoint created successfully. Store its secret: it is not shown again.")


@router.get(
    "/{endpointId}",
    response_model=Envelope[WebhookEndpointOut],
    responses=error_responses(404),
    summary="Retrieve a webhook endpoint",
)
def get_webhook_endpoint(endpoint_id: EndpointId, client: ReadAccess) -> dict[str, object]:
    """One webhook endpoint, without its secret."""
    return ok(service.get_endpoint(client.session, endpoint_id), "Webhook endpoint fetched successfully.")


@router.patch(
    "/{endpointId}",
    response_model=Envelope[WebhookEndpointOut],
    responses=error_responses(404, 422),
    summary="Change a webhook endpoint's url, event types, description, enabled or concurrency",
)
def update_webhook_endpoint(
    endpoint_id: EndpointId, body: WebhookEndpointPatch, request: Request, client: WriteAccess
) -> dict[str, object]:
    """Change an endpoint's URL, event types, description or concurrency, or disable and enable it."""
    endpoint = service.update_endpoint(client.session, endpoint_id, _checked(client, body, request))
    return ok(endpoint, "Webhook endpoint updated successfully.")


@router.delete(
    "/{endpointId}",
    response_model=Envelope[WebhookEndpointOut],
    responses=error_responses(404),
    summary="Delete a webhook endpoint and its delivery log",
)
def delete_webhook_endpoint(endpoint_id: EndpointId, client: WriteAccess) -> dict[str, object]:
    """Delete an endpoint and its delivery log; nothing more is sent to it."""
    return ok(service.delete_endpoint(client.session, endpoint_id), "Webhook endpoint deleted successfully.")


@router.post(
    "/{endpointId}/rotate-secret",
    response_model=Envelope[WebhookEndpointWithSecret],
    responses=error_responses(404),
    summary="Replace the signing secret; for 24 h deliveries carry both signatures",
)
def rotate_webhook_secret(endpoint_id: EndpointId, client: WriteAccess) -> dict[str, object]:
    """Replace the endpoint's signing secret. For 24 hours deliveries carry signatures with both secrets, so
    a receiver can switch without losing any."""
    endpoint = service.rotate_secret(client.session, endpoint_id)
    return ok(endpoint, "Secret rotated: deliveries carry the old and new signatures for 24 hours.")


@router.post(
    "/{endpointId}/ping",
    status_code=202,
    response_model=Envelope[WebhookDeliveryOut],
    responses=error_responses(404, 409),
    summary="Queue a `ping` event to this endpoint now",
)
def ping_webhook_endpoint(endpoint_id: EndpointId, client: WriteAccess) -> dict[str, object]:
    """Queue a `ping` event to this endpoint now, to test a receiver."""
    return ok(service.ping(client.session, endpoint_id), "Ping queued: it is sent within seconds.")


@router.get(
    "/{endpointId}/deliveries",
    response_model=list_envelope(WebhookDeliveryOut),
    responses=error_responses(404, 422),
    summary="The endpoint's deliveries, newest first",
)
def list_webhook_deliveries(
    endpoint_id: EndpointId, client: ReadAccess, pagination: Listing, status: StatusFilter = None
) -> dict[str, object]:
    """A page of the endpoint's deliveries, newest first, with its status, attempts and last answer."""
    records, page = service.list_deliveries(client.session, endpoint_id, status, pagination)
    return ok(page.body(records), "Webhook deliveries fetched successfully.")


@router.post(
    "/{endpointId}/deliveries/{deliveryId}/retry",
    status_code=202,
    response_model=Envelope[WebhookDeliveryOut],
    responses=error_responses(404, 409),
    summary="Queue one delivery again, now, with a fresh retry schedule",
)
def retry_webhook_delivery(
    endpoint_id: EndpointId, delivery_id: DeliveryId, client: WriteAccess
) -> dict[str, object]:
    """Queue one delivery again, now, with a fresh retry schedule."""
    return ok(service.retry_delivery(client.session, endpoint_id, delivery_id), "Delivery queued again.")
