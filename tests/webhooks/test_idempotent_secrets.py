"""A webhook endpoint's secret is answered once (on create and on rotation). An Idempotency-Key
retry of either replays it to the token that sent it, but the stored answer is encrypted with a key
derived from that token, which the database never holds: no secret at rest (docs/api.md)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

import httpx
from sqlalchemy import Engine, select, text, update
from sqlalchemy.orm import Session

from outfitter.config import Settings
from outfitter.db.base import utcnow
from outfitter.http.idempotency import CLAIM_LEASE
from outfitter.models import IdempotencyRecord, WebhookEndpoint
from tests.factories import Api
from tests.webhooks.receiver import Receiver


def _stored_answers(db: Session) -> list[bytes]:
    answers = [body for body in db.scalars(select(IdempotencyRecord.response_body)) if body is not None]
    db.rollback()
    return answers


def test_a_webhook_secret_is_never_stored_in_an_idempotency_record(
    api: Api, private_ok: Settings, receiver: Receiver, db: Session
) -> None:
    create = {"Idempotency-Key": "endpoint-1"}
    created = api.post("/client/webhook-endpoints", {"url": receiver.url}, headers=create)
    assert created.status_code == 201, created.text
    endpoint = created.json()["data"]
    rotate = {"Idempotency-Key": "rotate-1"}
    rotated = api.post(f"/client/webhook-endpoints/{endpoint['id']}/rotate-secret", headers=rotate)
    assert rotated.status_code == 200, rotated.text
    secrets = [endpoint["secret"], rotated.json()["data"]["secret"]]
    assert secrets[0] != secrets[1] and all(secret.startswith("whsec_") for secret in secrets)

    stored = _stored_answers(db)
    assert len(stored) == 2
    for body in stored:
        assert b"whsec_" not in body and b'"secret"' not in body and b"success" not in body
        for secret in secrets:
            assert secret.removeprefix("whsec_").encode() not in body

    # The token that sent them gets each answer back, secret included, once more per retry.
    again = api.post("/client/webhook-endpoints", {"url": receiver.url}, headers=create)
    assert again.headers["idempotent-replayed"] == "true" and again.json() == created.json()
    again = api.post(f"/client/webhook-endpoints/{endpoint['id']}/rotate-secret", headers=rotate)
    assert again.headers["idempotent-replayed"] == "true" and again.json() == rotated.json()


def test_two_claimants_of_one_key_after_its_lease_create_one_endpoint(
    postgres_only: None, api: Api, private_ok: Settings, receiver: Receiver, db: Session, engine: Engine
) -> None:
    """Registering an endpoint checks its URL outside any transaction, so its claim of the key is
    committed first. If the request outlives the claim's lease, a retry takes the claim over and
    both run; the answer is stored only while the claim is pending, so exactly one commits."""
    answers: list[httpx.Response] = []

    def send() -> None:
        headers = {"Idempotency-Key": "slow-endpoint"}
        answers.append(api.post("/client/webhook-endpoints", {"url": receiver.url}, headers=headers))

    with engine.connect() as lock, lock.begin():
        lock.execute(text("LOCK TABLE webhook_endpoints IN SHARE MODE"))  # writes wait, reads go on
        first = threading.Thread(target=send)
        first.start()
        _wait_for(lambda: _waiting(engine) == 1, "the first request never got to its write")
        with engine.begin() as connection:  # the first outlives its lease
            expired = utcnow() - CLAIM_LEASE - timedelta(seconds=1)
            connection.execute(update(IdempotencyRecord).values(created_at=expired))
        second = threading.Thread(target=send)
        second.start()
        _wait_for(lambda: _waiting(engine) == 2 or not second.is_alive(), "the second never got there")
        assert second.is_alive(), answers[0].text  # it took the claim over and runs too
    first.join()
    second.join()
    assert sorted(answer.status_code for answer in answers) == [201, 409], [a.text for a in answers]
    refused = next(answer for answer in answers if answer.status_code == 409)
    assert "answered meanwhile" in refused.json()["message"]
    created = next(answer for answer in answers if answer.status_code == 201)
    assert api.get("/client/webhook-endpoints").json()["data"]["total"] == 1
    replayed = api.post(
        "/client/webhook-endpoints", {"url": receiver.url}, headers={"Idempotency-Key": "slow-endpoint"}
    )
    assert replayed.headers["idempotent-replayed"] == "true" and replayed.json() == created.json()
    assert len(db.scalars(select(WebhookEndpoint.id)).all()) == 1


def _waiting(engine: Engine) -> int:
    with engine.connect() as connection:
        query = (
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return int(connection.scalar(text(query)) or 0)


def _wait_for(condition: Callable[[], object], failure: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, failure
        time.sleep(0.02)
