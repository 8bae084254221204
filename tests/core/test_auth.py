"""Bearer tokens: every way a token can be wrong, scopes, and tenancy of the catalog endpoints."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from outfitter.db.base import utcnow
from outfitter.models import ApiToken, IdempotencyRecord
from outfitter.tenants.tokens import hash_token
from tests.factories import Api, CompanyFactory, assert_error

EMPLOYEE = {
    "first_name": "Ada",
    "last_name": "Obi",
    "email": "ada@example.com",
    "country_id": "NG",
    "phone": "+2348000000000",
    "address": "1 Marina, Lagos",
}


def test_missing_token_is_401_with_www_authenticate(client: TestClient, engine: Engine) -> None:
    response = client.get("/api/v2/client/countries")
    assert_error(response, 401, "Authorization: Bearer")
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", ["Basic abc", "Bearer", "Bearer    ", "otf_abc", "Token otf_x"])
def test_malformed_authorization_header_is_401(client: TestClient, engine: Engine, header: str) -> None:
    response = client.get("/api/v2/client/countries", headers={"Authorization": header})
    assert_error(response, 401)
    assert "www-authenticate" in response.headers


def test_unknown_token_is_401(client: TestClient, api: Api) -> None:
    response = client.get("/api/v2/client/countries", headers={"Authorization": f"Bearer {api.token}x"})
    assert_error(response, 401, "Invalid token")


def test_expired_token_is_401(api: Api, engine: Engine) -> None:
    with Session(engine) as session, session.begin():
        session.execute(
            update(ApiToken)
            .where(ApiToken.id == api.token_id)
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
    assert_error(api.get("/client/countries"), 401, "expired")


def test_revoked_token_is_401_and_other_tokens_keep_working(api: Api, companies: CompanyFactory) -> None:
    from outfitter.tenants.tokens import revoke_token

    second = companies.token(api)
    with Session(companies.engine) as session, session.begin():
        revoke_token(session, api.token_id)
    assert_error(api.get("/client/countries"), 401, "revoked")
    assert second.get("/client/countries").status_code == 200


def test_token_is_stored_only_as_a_hash_and_last_use_is_kept(api: Api, engine: Engine) -> None:
    assert api.token.startswith("otf_") and len(api.token) >= 4 + 43
    assert api.get("/client/countries").status_code == 200
    with Session(engine) as session:
        record = session.get(ApiToken, api.token_id)
        assert record is not None
        assert record.token_hash == hash_token(api.token) != api.token
        assert record.last_used_at is not None


def test_read_only_token_reads_but_cannot_write(companies: CompanyFactory) -> None:
    reader = companies.create("Readers Inc", scopes=["read"])
    assert reader.get("/client/countries").status_code == 200
    response = reader.post("/client/employees", json=EMPLOYEE)
    assert_error(response, 403, "'write' scope")


def test_write_only_token_cannot_read(companies: CompanyFactory) -> None:
    writer = companies.create("Writers Inc", scopes=["write"])
    assert_error(writer.get("/client/countries"), 403, "'read' scope")


def test_expiring_token_works_until_it_expires(api: Api, companies: CompanyFactory) -> None:
    expiring = companies.token(api, expires_in_days=1)
    assert expiring.get("/client/countries").status_code == 200


def test_a_due_stamp_never_waits_for_another_request_stamping_the_token(
    postgres_only: None, api: Api, engine: Engine
) -> None:
    """The last-used stamp is best effort: while another request in flight holds the token's row
    (it stamped it and has not committed: a long import, say), the token's other requests, hot
    reads on asyncpg and reads and writes through the session, skip the stamp instead of waiting."""
    an_hour_ago = utcnow() - timedelta(hours=1)
    with engine.begin() as connection:
        connection.execute(
            update(ApiToken).where(ApiToken.id == api.token_id).values(last_used_at=an_hour_ago)
        )
    answers: dict[str, int] = {}

    def requests() -> None:
        answers["hot read"] = api.get("/client/equipment").status_code
        answers["read"] = api.get("/client/countries").status_code
        answers["write"] = api.post("/client/employees", EMPLOYEE).status_code

    with engine.connect() as in_flight:
        in_flight.execute(select(ApiToken.id).where(ApiToken.id == api.token_id).with_for_update())
        thread = threading.Thread(target=requests)
        thread.start()
        thread.join(timeout=20)
        waited = thread.is_alive()
        in_flight.rollback()  # the other request ends without stamping
    thread.join(timeout=20)
    assert not waited, "a request waited for the token's row"
    assert answers == {"hot read": 200, "read": 200, "write": 201}
    with Session(engine) as session:
        record = session.get(ApiToken, api.token_id)
        assert record is not None and record.last_used_at == an_hour_ago  # every stamp was skipped
    assert api.get("/client/countries").status_code == 200  # the row is free: the next one stamps
    with Session(engine) as session:
        record = session.get(ApiToken, api.token_id)
        assert record is not None and record.last_used_at is not None and record.last_used_at > an_hour_ago


def test_a_refused_input_is_refused_for_the_token_first(
    client: TestClient, companies: CompanyFactory, db: Session
) -> None:
    """A bad token, or a token without the scope, is told so before its input is judged, for every
    kind of refused input and on the hot paths too; an Idempotency-Key keeps nothing for it."""
    writer = companies.create("Writers Ltd")
    reader = companies.token(writer, scopes=["read"])
    refused_input = [
        ("POST", "/client/employees", {"json": {**EMPLOYEE, "email": "nope"}}),  # a hot write
        ("POST", "/client/departments", {"json": {"name": 1}}),
        ("POST", "/client/departments", {"content": b"{", "headers": {"Content-Type": "application/json"}}),
        ("GET", "/client/employees", {"params": {"per_page": "0"}}),  # a hot read
        ("GET", "/client/employees/not-an-id", {}),
    ]
    for method, path, options in refused_input:
        judged = writer.request(method, path, **options)  # a token that may send it: its input is judged
        assert judged.status_code in (400, 404, 422), (path, judged.text)
        unknown = {"Authorization": f"Bearer {writer.token}x", "Idempotency-Key": f"{method} {path}"}
        headers = {**options.get("headers", {}), **unknown}
        as_unknown = client.request(method, f"/api/v2{path}", **{**options, "headers": headers})
        assert_error(as_unknown, 401, "Invalid token")
        as_reader = reader.request(method, path, **options)
        if method == "POST":
            assert_error(as_reader, 403, "'write' scope")
        else:  # a reader may read: its input is judged
            assert (as_reader.status_code, as_reader.json()) == (judged.status_code, judged.json())
    assert db.scalars(select(IdempotencyRecord.key)).all() == []


def test_several_authorization_headers_are_400_whichever_is_valid(client: TestClient, api: Api) -> None:
    for tokens in ([api.token, "otf_other"], ["otf_other", api.token], [api.token, api.token]):
        headers = [("Authorization", f"Bearer {token}") for token in tokens]
        answer = client.get("/api/v2/client/employees", headers=headers)
        assert_error(answer, 400, "Send one Authorization header")
    assert api.get("/client/employees").status_code == 200
