"""Idempotency-Key on POST: a retry replays the first answer and creates nothing new."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.models import IdempotencyRecord
from tests.core.test_auth import EMPLOYEE
from tests.factories import Api, assert_error


def test_same_key_and_body_replays_the_first_answer(api: Api) -> None:
    headers = {"Idempotency-Key": "create-ada-1"}
    first = api.post("/client/employees", json=EMPLOYEE, headers=headers)
    assert first.status_code in (200, 201), first.text
    again = api.post("/client/employees", json=EMPLOYEE, headers=headers)
    assert again.status_code == first.status_code
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert api.get("/client/employees").json()["data"]["total"] == 1


def test_same_key_with_another_body_is_409(api: Api) -> None:
    headers = {"Idempotency-Key": "create-2"}
    assert api.post("/client/employees", json=EMPLOYEE, headers=headers).status_code in (200, 201)
    other = {**EMPLOYEE, "email": "bola@example.com"}
    assert_error(api.post("/client/employees", json=other, headers=headers), 409, "different request body")


def test_keys_are_private_to_the_token_that_used_them(api: Api, other_api: Api) -> None:
    headers = {"Idempotency-Key": "shared-name"}
    assert api.post("/client/employees", json=EMPLOYEE, headers=headers).status_code in (200, 201)
    response = other_api.post("/client/employees", json=EMPLOYEE, headers=headers)
    assert response.status_code in (200, 201)
    assert "idempotent-replayed" not in response.headers
    assert other_api.get("/client/employees").json()["data"]["total"] == 1


def test_a_failed_validation_is_replayed_too_and_a_401_is_not_stored(api: Api, db: Session) -> None:
    headers = {"Idempotency-Key": "bad-1"}
    bad = {**EMPLOYEE, "email": "nope"}
    assert_error(api.post("/client/employees", json=bad, headers=headers), 422)
    assert api.post("/client/employees", json=bad, headers=headers).headers["idempotent-replayed"] == "true"
    unauthorised = api.client.post(
        "/api/v2/client/employees",
        json=EMPLOYEE,
        headers={"Idempotency-Key": "k", "Authorization": "Bearer otf_x"},
    )
    assert_error(unauthorised, 401)
    stored = db.scalars(select(IdempotencyRecord.key)).all()
    assert stored == ["bad-1"]  # the 422 is kept for its replay; the 401 left nothing


def test_overlong_key_is_400(api: Api) -> None:
    assert_error(api.post("/client/employees", json=EMPLOYEE, headers={"Idempotency-Key": "k" * 201}), 400)
