"""A webhook endpoint's secret is answered once (on create and on rotation). An Idempotency-Key
retry of either replays it to the token that sent it, but the stored answer is encrypted with a key
derived from that token, which the database never holds: no secret at rest (docs/api.md)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.config import Settings
from outfitter.models import IdempotencyRecord
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
