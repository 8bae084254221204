"""The Integrations pages' work: the company's API tokens, webhook endpoints and SCIM settings,
changed through the services the CLI and the API call (`tenants.tokens`, `webhooks.service`,
`scim.settings`), each change followed by its event in the same transaction.

Nothing here mints, signs or sends: a token is `tokens.issue_token`'s, a secret
`webhooks.service`'s, and a ping or a replay only queues a delivery for the worker, as the API's
endpoints do. `api_tokens` is not a company-owned table (the token lookup finds the company), so
its queries here name the actor's company themselves; every other table is scoped by the bound
session.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.catalog.reference import find_country
from outfitter.console.operator import actions as operator_actions
from outfitter.core.errors import NotFound
from outfitter.db.base import utcnow
from outfitter.db.keyset import PageParams, PageResult
from outfitter.db.tenancy import parse_uuid
from outfitter.events.schemas import ApiTokenOut, ScimSettingsOut
from outfitter.models import ApiToken, EventType, ScimSettings, WebhookAttempt
from outfitter.outbox import as_event_data, record_event
from outfitter.scim.settings import change_settings, settings_of
from outfitter.tenants import tokens
from outfitter.tenants.actor import Actor
from outfitter.webhooks import service as webhooks
from outfitter.webhooks.repository import DeliveryRepository, EndpointRepository
from outfitter.webhooks.schemas import (
    WebhookDeliveryOut,
    WebhookEndpointCreate,
    WebhookEndpointOut,
    WebhookEndpointPatch,
    WebhookEndpointWithSecret,
)

TOKEN_LABEL = "API token"
# What an admin may choose; the CLI takes any number of days up to tokens.MAX_TOKEN_DAYS.
EXPIRY_CHOICES = (30, 90, 365)
DELIVERIES_PER_PAGE = 25


# --- API tokens ----------------------------------------------------------------------------------


def token_out(record: ApiToken) -> ApiTokenOut:
    return ApiTokenOut.model_validate(record)  # the row's scope_list as `scopes`


@dataclass(frozen=True)
class TokenRow:
    token: ApiTokenOut
    state: str  # "live", or why not ("revoked", "expired")


def list_tokens(session: Session, company_id: uuid.UUID, scim_only: bool = False) -> list[TokenRow]:
    """The company's tokens, newest first, live and not (a revoked one stays listed)."""
    statement = select(ApiToken).where(ApiToken.company_id == company_id)
    if scim_only:
        statement = statement.where(ApiToken.scopes == "scim")
    now = utcnow()
    rows = []
    for record in session.scalars(statement.order_by(ApiToken.created_at.desc(), ApiToken.id.desc())):
        why_not = tokens.token_is_live(record, now)
        state = "live" if why_not is None else "revoked" if record.revoked_at else "expired"
        rows.append(TokenRow(token_out(record), state))
    return rows


def create_token(
    session: Session, actor: Actor, name: str, scopes: list[str], expires_in_days: int | None
) -> tokens.IssuedToken:
    """A new token of the actor's company (`issue_token`'s rules; ValueError says what is wrong)
    and its `api_token.created` event, as an operator's (operator.actions). The plain token exists
    only in the answer."""
    if not scopes:
        raise ValueError("Choose at least one scope.")
    return operator_actions.issue_token(
        session, actor.company_id, scopes, expires_in_days, name or None, actor.name
    )


def revoke_token(session: Session, actor: Actor, token_id: str) -> ApiTokenOut:
    """Revoke one of the company's tokens (404 for another company's); `api_token.revoked` when
    it was live, nothing when it was revoked already."""
    parsed = parse_uuid(token_id)
    record = (
        session.scalar(select(ApiToken).where(ApiToken.id == parsed, ApiToken.company_id == actor.company_id))
        if parsed
        else None
    )
    if record is None:
        raise NotFound.record(TOKEN_LABEL)
    operator_actions.revoke_token(session, record.id, actor.name)
    return token_out(record)


# --- webhook endpoints -------------------------------------------------------------------------------


def _endpoint_data(endpoint: WebhookEndpointOut) -> dict[str, Any]:
    """An endpoint as the API answers it, never with its secret."""
    return as_event_data(WebhookEndpointOut, endpoint.model_dump(exclude={"secret"}))


def list_endpoints(session: Session) -> list[WebhookEndpointOut]:
    found, _page = webhooks.list_endpoints(session, PageParams(1, webhooks.MAX_ENDPOINTS_PER_COMPANY))
    return found


def create_endpoint(session: Session, actor: Actor, body: WebhookEndpointCreate) -> WebhookEndpointWithSecret:
    """Register an endpoint whose URL was checked (`webhooks.service.check_url`, with no transaction
    open), and its `webhook_endpoint.created` event."""
    endpoint = webhooks.create_endpoint(session, body)
    record_event(
        session, EventType.WEBHOOK_ENDPOINT_CREATED, endpoint.id, _endpoint_data(endpoint), actor=actor.name
    )
    return endpoint


def set_enabled(session: Session, actor: Actor, endpoint_id: str, enabled: bool) -> WebhookEndpointOut:
    """Disable or enable an endpoint as the API's PATCH does; an event only when it changed."""
    before = webhooks.get_endpoint(session, endpoint_id)
    endpoint = webhooks.update_endpoint(session, endpoint_id, WebhookEndpointPatch(enabled=enabled))
    if before.enabled != endpoint.enabled:
        record_event(
            session,
            EventType.WEBHOOK_ENDPOINT_UPDATED,
            endpoint.id,
            _endpoint_data(endpoint),
            actor=actor.name,
        )
    return endpoint


def rotate_secret(session: Session, actor: Actor, endpoint_id: str) -> WebhookEndpointWithSecret:
    endpoint = webhooks.rotate_secret(session, endpoint_id)
    record_event(
        session,
        EventType.WEBHOOK_ENDPOINT_SECRET_ROTATED,
        endpoint.id,
        _endpoint_data(endpoint),
        actor=actor.name,
    )
    return endpoint


def ping(session: Session, actor: Actor, endpoint_id: str) -> WebhookDeliveryOut:
    """Queue a ping (409 for a disabled endpoint) and record who asked for it."""
    delivery = webhooks.ping(session, endpoint_id)
    endpoint = webhooks.get_endpoint(session, endpoint_id)
    record_event(
        session, EventType.WEBHOOK_ENDPOINT_PINGED, endpoint.id, _endpoint_data(endpoint), actor=actor.name
    )
    return delivery


def replay(session: Session, actor: Actor, endpoint_id: str, delivery_id: str) -> WebhookDeliveryOut:
    """Queue a delivery again, now (the API's retry: the same `webhook-id` and body)."""
    delivery = webhooks.retry_delivery(session, endpoint_id, delivery_id)
    record_event(
        session,
        EventType.WEBHOOK_DELIVERY_REPLAYED,
        delivery.id,
        delivery.model_dump(mode="json"),
        actor=actor.name,
    )
    return delivery


@dataclass(frozen=True)
class DeliveryDetail:
    delivery: WebhookDeliveryOut
    payload: dict[str, Any]
    attempts: list[WebhookAttempt]


def deliveries(session: Session, endpoint_id: str, page: int) -> tuple[list[WebhookDeliveryOut], int]:
    """A page of the endpoint's deliveries, newest first, and the number of pages."""
    found, result = webhooks.list_deliveries(
        session, endpoint_id, None, PageParams(page, DELIVERIES_PER_PAGE)
    )
    return found, result.last_page if isinstance(result, PageResult) else 1


def delivery_detail(session: Session, endpoint_id: str, delivery_id: str) -> DeliveryDetail:
    """One delivery of the endpoint (404 under another endpoint, as the API's retry answers), with
    its payload as sent and every attempt, oldest first. Read without a row lock."""
    endpoint = EndpointRepository(session).get(endpoint_id)
    delivery = DeliveryRepository(session).get(delivery_id)
    if delivery.endpoint_id != endpoint.id:
        raise NotFound.record(DeliveryRepository.label)
    attempts = session.scalars(
        select(WebhookAttempt)
        .where(WebhookAttempt.delivery_id == delivery.id)
        .order_by(WebhookAttempt.attempted_at, WebhookAttempt.id)
    ).all()
    payload: Any = delivery.payload
    return DeliveryDetail(
        WebhookDeliveryOut.model_validate(delivery),
        payload if isinstance(payload, dict) else {},
        list(attempts),
    )


# --- SCIM ----------------------------------------------------------------------------------------------


def scim_settings(session: Session, company_id: uuid.UUID) -> ScimSettings:
    return settings_of(session, company_id)


def change_scim_settings(
    session: Session, actor: Actor, offboard_retrieval: bool, default_country: str
) -> ScimSettings:
    """`scim.settings.change_settings` (ValueError names a bad country) and its event, when
    something changed."""
    if default_country.strip() and find_country(session, default_country) is None:
        # Checked before anything is set: the form's other value is not saved without it.
        raise ValueError(f"unknown country {default_country!r}: give a name or a two-letter code")
    before = settings_of(session, actor.company_id)
    was = (before.offboard_retrieval, before.default_country)
    settings = change_settings(session, actor.company_id, offboard_retrieval, default_country)
    if (settings.offboard_retrieval, settings.default_country) != was:
        settings.updated_at = utcnow()
        session.flush()
        data = as_event_data(ScimSettingsOut, settings)
        record_event(session, EventType.SCIM_SETTINGS_UPDATED, actor.company_id, data, actor=actor.name)
    return settings
