"""Every query of the webhooks domain. No company filter here: the bound session adds it."""

from __future__ import annotations

import uuid

from sqlalchemy import Select

from outfitter.core.errors import NotFound
from outfitter.db.tenancy import CompanyRepository
from outfitter.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint


class EndpointRepository(CompanyRepository[WebhookEndpoint]):
    model = WebhookEndpoint
    label = "Webhook endpoint"

    def newest_first(self) -> Select[WebhookEndpoint]:
        return self.select().order_by(WebhookEndpoint.created_at.desc(), WebhookEndpoint.id.desc())


class DeliveryRepository(CompanyRepository[WebhookDelivery]):
    model = WebhookDelivery
    label = "Webhook delivery"

    def of_endpoint(self, endpoint_id: uuid.UUID, status: DeliveryStatus | None) -> Select[WebhookDelivery]:
        statement = self.select().where(WebhookDelivery.endpoint_id == endpoint_id)
        if status is not None:
            statement = statement.where(WebhookDelivery.status == status)
        return statement.order_by(WebhookDelivery.created_at.desc(), WebhookDelivery.id.desc())

    def get_of_endpoint(self, endpoint_id: uuid.UUID, delivery_id: str) -> WebhookDelivery:
        delivery = self.get(delivery_id, for_update=True)
        if delivery.endpoint_id != endpoint_id:
            # Another endpoint's delivery is not found under this one, like an unknown id.
            raise NotFound.record(self.label)
        return delivery
