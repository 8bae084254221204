"""The webhook pages through HTTP: an endpoint registered (its secret shown once), pinged, its
deliveries sent by the worker to a real receiver, one replayed with the same body and a valid
signature, the endpoint disabled and enabled; unsafe URLs refused; another company's endpoint and
delivery a 404; an event for every change, never with the secret."""

from __future__ import annotations

import html
import re
import uuid
from typing import Any

from fastapi import FastAPI
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session
from standardwebhooks import Webhook

from outfitter.models import WebhookDelivery, WebhookEndpoint
from outfitter.worker import Worker
from tests.console.conftest import Browser, sign_up
from tests.console.test_integrations import events
from tests.factories import Api
from tests.webhooks.conftest import private_ok, receiver, register, webhook_settings, worker  # noqa: F401
from tests.webhooks.receiver import Receiver, served_document

SECRET = re.compile(r'<code id="endpoint-secret">(whsec_[A-Za-z0-9+/=]+)</code>')
DELIVERY_LINK = re.compile(r'href="(/console/integrations/webhooks/[0-9a-f-]+/deliveries/[0-9a-f-]+)"')


def drain(runner: Worker) -> None:
    """Send what is due until nothing is (the test schedule retries at once)."""
    for _ in range(10):
        if runner.run_once(jobs=False) == 0:
            return


def create_endpoint(ada: Browser, url: str, *types: str) -> Any:
    data = {"url": url, "description": "Our receiver", "event_type": list(types)}
    return ada.post("/integrations/webhooks", {**data, "csrf_token": ada.csrf("/integrations/webhooks")})


def test_an_endpoint_is_created_pinged_and_a_delivery_replayed_with_a_valid_signature(
    app: FastAPI,
    engine: Engine,
    api: Api,
    db: Session,
    private_ok: Any,  # noqa: F811
    receiver: Receiver,  # noqa: F811
    worker: Worker,  # noqa: F811
) -> None:
    served_document()  # the receiver's schemas, built before it must answer within the deadline
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    created = create_endpoint(ada, receiver.url, "webhook_endpoint.pinged", "api_token.created")
    assert created.status_code == 201, created.text
    secret = SECRET.search(created.text)
    assert secret, created.text
    endpoint = db.scalars(select(WebhookEndpoint)).one()
    db.commit()
    assert endpoint.secret == secret.group(1)  # kept in clear: signing needs it (webhooks.service)
    assert endpoint.event_types == ["webhook_endpoint.pinged", "api_token.created"]
    page_path = f"/integrations/webhooks/{endpoint.id}"
    assert secret.group(1) not in ada.get(page_path).text  # shown once
    assert receiver.url in ada.get("/integrations/webhooks").text

    pinged = ada.post(f"{page_path}/ping", {"csrf_token": ada.csrf()})
    assert pinged.status_code == 303 and pinged.headers["location"].endswith("?saved=ping")
    drain(worker)
    assert len(set(receiver.ids())) == 2  # the ping, and the event of the ping
    page = ada.get(page_path).text
    assert page.count("succeeded") == 2 and "webhook_endpoint.pinged" in page

    # The ping's delivery: its payload as sent, the receiver's answer, and a replay.
    ping_path = next(
        link.removeprefix("/console")
        for link in DELIVERY_LINK.findall(page)
        if '<span id="delivery-type">ping</span>' in ada.get(link.removeprefix("/console")).text
    )
    delivery = html.unescape(ada.get(ping_path).text)
    assert '"type": "ping"' in delivery and f'"endpoint_id": "{endpoint.id}"' in delivery
    assert "HTTP 200" in delivery and '<dd id="delivery-status">succeeded</dd>' in delivery
    replayed = ada.post(f"{ping_path}/replay", {"csrf_token": ada.csrf()})
    assert replayed.status_code == 303 and replayed.headers["location"].endswith("?saved=replayed")
    assert '<dd id="delivery-status">pending</dd>' in ada.get(ping_path).text
    drain(worker)
    pings = [r for r in receiver.received if b'"type":"ping"' in r.body]
    first, again = pings[0], pings[-1]
    assert len(pings) >= 2
    assert again.body == first.body and again.headers["webhook-id"] == first.headers["webhook-id"]
    verified = Webhook(secret.group(1)).verify(again.body, again.headers)
    assert verified["data"] == {"endpoint_id": str(endpoint.id), "url": receiver.url}
    assert ada.get(ping_path).text.count("HTTP 200") >= 2

    # Events: created, pinged, replayed; none holds the secret.
    (made,) = events(api, "webhook_endpoint.created")
    assert made["data"]["url"] == receiver.url and "secret" not in made["data"]
    assert made["actor"] == "console:ada@example.com"
    (ping_event,) = events(api, "webhook_endpoint.pinged")
    (replay_event,) = events(api, "webhook_delivery.replayed")
    assert replay_event["data"]["event_type"] == "ping" and replay_event["data"]["status"] == "pending"
    assert secret.group(1) not in str([made, ping_event, replay_event])


def test_rotate_disable_and_enable(
    app: FastAPI,
    engine: Engine,
    api: Api,
    db: Session,
    private_ok: Any,  # noqa: F811
    receiver: Receiver,  # noqa: F811
) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    first = SECRET.search(create_endpoint(ada, receiver.url).text)
    endpoint_id = db.scalars(select(WebhookEndpoint.id)).one()
    db.commit()
    path = f"/integrations/webhooks/{endpoint_id}"
    rotated = ada.post(f"{path}/rotate", {"csrf_token": ada.csrf()})
    second = SECRET.search(rotated.text)
    assert rotated.status_code == 200 and first and second and first.group(1) != second.group(1)
    assert "Secret rotated: for 24 hours" in rotated.text
    assert second.group(1) not in ada.get(path).text

    disabled = ada.post(f"{path}/enabled", {"enabled": "no", "csrf_token": ada.csrf()})
    assert disabled.headers["location"].endswith("?saved=disabled")
    page = ada.get(path).text
    assert "disabled: Disabled by the client." in page and ">Enable</button>" in page
    refused = ada.post(f"{path}/ping", {"csrf_token": ada.csrf()})
    assert refused.status_code == 409
    assert "The webhook endpoint is disabled: enable it first (Enable, above)." in refused.text
    ada.post(f"{path}/enabled", {"enabled": "yes", "csrf_token": ada.csrf()})
    assert ">Disable</button>" in ada.get(path).text
    kinds = [event["type"] for event in events(api, "webhook_endpoint.*")]
    assert kinds == [
        "webhook_endpoint.updated",
        "webhook_endpoint.updated",
        "webhook_endpoint.secret_rotated",
        "webhook_endpoint.created",
    ]
    assert [e["data"]["enabled"] for e in events(api, "webhook_endpoint.updated")] == [True, False]
    assert "console:ada@example.com changed webhook endpoint" in ada.get("/activity").text


def test_an_unsafe_or_bad_url_is_refused_with_a_message(
    app: FastAPI, engine: Engine, api: Api, db: Session
) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    for url, message in (
        ("http://127.0.0.1:9/hooks", "http"),
        ("", "String should have at least 1 character."),
        ("https://hooks.example.com/x", None),
    ):
        data = {"url": url, "event_type": ["not.a.type"] if message is None else []}
        answer = ada.post("/integrations/webhooks", {**data, "csrf_token": ada.csrf()})
        assert answer.status_code == 422, url
        assert 'aria-invalid="true"' in answer.text or message is None
        if message:
            assert message in answer.text
    assert db.scalars(select(WebhookEndpoint)).all() == []
    db.commit()
    assert events(api, "webhook_endpoint.*") == []


def test_another_companys_endpoint_and_delivery_are_not_found(
    app: FastAPI,
    engine: Engine,
    api: Api,
    other_api: Api,
    db: Session,
    private_ok: Any,  # noqa: F811
) -> None:
    theirs = register(other_api, "https://hooks.example.com/theirs")
    assert other_api.post(f"/client/webhook-endpoints/{theirs['id']}/ping").status_code == 202
    (their_delivery,) = other_api.get(f"/client/webhook-endpoints/{theirs['id']}/deliveries").json()["data"][
        "data"
    ]
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    mine = register(api, "https://hooks.example.com/mine")
    base = f"/integrations/webhooks/{theirs['id']}"
    delivery = f"/deliveries/{their_delivery['id']}"
    for path in (base, base + delivery, f"/integrations/webhooks/{mine['id']}{delivery}"):
        assert ada.get(path).status_code == 404, path
    for path in (f"{base}/ping", f"{base}/rotate", f"{base}/enabled", f"{base}{delivery}/replay"):
        answer = ada.post(path, {"csrf_token": ada.csrf(), "enabled": "no"})
        assert answer.status_code == 404, path
        assert "not found" in answer.text
    assert theirs["url"] not in ada.get("/integrations/webhooks").text
    assert other_api.get(f"/client/webhook-endpoints/{theirs['id']}").json()["data"]["enabled"] is True
    assert ada.get(f"/integrations/webhooks/{uuid.uuid4()}").status_code == 404


def test_deliveries_come_25_a_page_newest_first(
    app: FastAPI,
    engine: Engine,
    api: Api,
    db: Session,
    private_ok: Any,  # noqa: F811
) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    endpoint = register(api, "https://hooks.example.com/busy")
    for _ in range(26):
        assert api.post(f"/client/webhook-endpoints/{endpoint['id']}/ping").status_code == 202
    order = (WebhookDelivery.created_at.desc(), WebhookDelivery.id.desc())
    newest_first = [str(id_) for id_ in db.scalars(select(WebhookDelivery.id).order_by(*order))]
    db.commit()
    assert len(newest_first) == 26
    path = f"/integrations/webhooks/{endpoint['id']}"
    first = ada.get(path).text
    assert re.findall(r'data-delivery="([0-9a-f-]+)"', first) == newest_first[:25]
    assert f'href="/console{path}?page=2">Older deliveries' in first
    second = ada.get(f"{path}?page=2").text
    assert re.findall(r'data-delivery="([0-9a-f-]+)"', second) == newest_first[25:]
    assert "Page 2 of 2" in second and "Older deliveries" not in second
