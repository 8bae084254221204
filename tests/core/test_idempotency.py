"""Idempotency-Key on POST: a retry replays the first answer and creates nothing new."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from datetime import timedelta
from typing import Any

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select, text, update
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.config import Settings
from outfitter.db.base import utcnow
from outfitter.models import ApiToken, Employee, IdempotencyRecord
from outfitter.tenants.tokens import hash_token
from tests.core.test_auth import EMPLOYEE
from tests.factories import Api, CompanyFactory, assert_error
from tests.people.helpers import employee_body


def test_same_key_and_body_replays_the_first_answer(api: Api) -> None:
    headers = {"Idempotency-Key": "create-ada-1"}
    first = api.post("/client/employees", json=EMPLOYEE, headers=headers)
    assert first.status_code == 201, first.text
    again = api.post("/client/employees", json=EMPLOYEE, headers=headers)
    assert again.status_code == first.status_code
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert api.get("/client/employees").json()["data"]["total"] == 1


def test_same_key_with_another_body_is_409(api: Api) -> None:
    headers = {"Idempotency-Key": "create-2"}
    assert api.post("/client/employees", json=EMPLOYEE, headers=headers).status_code == 201
    other = {**EMPLOYEE, "email": "bola@example.com"}
    assert_error(api.post("/client/employees", json=other, headers=headers), 409, "different request")


def _upload(api: Api, key: str, boundary: str, csv: str, quoted: bool = False) -> httpx.Response:
    """A CSV sent as a form, as curl and generated clients send it: each with a boundary of its own."""
    body = (
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="file"; filename="people.csv"\r\n'
        "Content-Type: text/csv\r\n\r\n"
        f"{csv}\r\n"
        f"--{boundary}--\r\n"
    ).encode()
    parameter = f'"{boundary}"' if quoted else boundary
    headers = {"Idempotency-Key": key, "Content-Type": f"multipart/form-data; boundary={parameter}"}
    return api.request("POST", "/client/employees/import", content=body, headers=headers)


def test_an_upload_retried_with_its_key_is_replayed_whatever_its_boundary(api: Api) -> None:
    """A client draws a new multipart boundary for every request: the retry of an import with its
    key was a 409 "different request", so a client whose import timed out could not learn whether
    it ran. The boundary is not part of what the key stands for; the file and its fields are."""
    csv = "first_name,last_name,email,country_id,phone,address\nAda,Obi,ada@acme.io,NG,+234 801 234,Lagos\n"
    first = _upload(api, "import-1", "x-boundary-aaaa", csv)
    assert first.status_code == 200, first.text
    again = _upload(api, "import-1", "x-boundary-bbbb", csv, quoted=True)  # as some clients write it
    assert again.status_code == 200, again.text
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert api.get("/client/employees").json()["data"]["total"] == 1
    another_file = csv.replace("ada@acme.io", "bola@acme.io")
    assert_error(_upload(api, "import-1", "x-boundary-cccc", another_file), 409, "different request")


def test_keys_are_private_to_the_token_that_used_them(api: Api, other_api: Api) -> None:
    headers = {"Idempotency-Key": "shared-name"}
    assert api.post("/client/employees", json=EMPLOYEE, headers=headers).status_code == 201
    response = other_api.post("/client/employees", json=EMPLOYEE, headers=headers)
    assert response.status_code == 201
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


def test_the_query_string_is_part_of_the_request(api: Api, db: Session) -> None:
    """A dry run and the real import are two requests: one key cannot answer both."""
    content = (
        "first_name,last_name,email,country_id,phone,address\nAda,Obi,ada@acme.io,NG,+2348000000000,Lagos\n"
    )
    headers = {"Content-Type": "text/csv", "Idempotency-Key": "import-1"}

    def post(**params: str) -> httpx.Response:
        return api.request(
            "POST", "/client/employees/import", content=content, headers=headers, params=params
        )

    dry = post(dry_run="true")
    assert dry.status_code == 200 and dry.json()["data"]["dry_run"] is True, dry.text
    assert_error(post(), 409, "different request")
    assert _count(db, Employee) == 0
    assert post(dry_run="true").headers["idempotent-replayed"] == "true"


# --- a crash or a killed backend mid-request leaves the key retryable (PostgreSQL) ---------------


def _count(db: Session, model: type[Any]) -> int:
    total = db.scalar(select(func.count()).select_from(model)) or 0
    db.rollback()
    return total


@contextmanager
def _server_process(database_url: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """The app served by uvicorn in a process of its own, which the test can kill as a crash would."""
    with closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = (
        "import sys, uvicorn\n"
        "from outfitter.app import create_app\n"
        "from outfitter.config import Settings\n"
        "app = create_app(Settings(database_url=sys.argv[1], rate_limit='off'))\n"
        "uvicorn.run(app, host='127.0.0.1', port=int(sys.argv[2]), log_level='warning')\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script, database_url, str(port)])
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: _answers(url), "the server process did not start")
        yield process, url
    finally:
        process.kill()
        process.wait()


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _wait_for(condition: Callable[[], object], failure: str) -> Any:
    deadline = time.monotonic() + 30
    while not (found := condition()):
        assert time.monotonic() < deadline, failure
        time.sleep(0.02)
    return found


def _backend_waiting_to_insert_employee(engine: Engine) -> int | None:
    with engine.connect() as connection:
        pid = connection.scalar(
            text(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO employees%'"
            )
        )
    return int(pid) if pid is not None else None


@contextmanager
def _employees_locked(engine: Engine) -> Iterator[None]:
    """Reads of employees go on; an INSERT into it waits until the block ends."""
    with engine.connect() as connection, connection.begin():
        connection.execute(text("LOCK TABLE employees IN SHARE MODE"))
        yield


def test_a_crash_mid_request_leaves_the_key_retryable_and_the_retry_writes_once(
    postgres_only: None, api: Api, db: Session, engine: Engine, database_url: str
) -> None:
    headers = {"Authorization": f"Bearer {api.token}", "Idempotency-Key": "hire-after-crash"}
    body = employee_body(email="crash@acme.io")
    with _server_process(database_url) as (process, url), _employees_locked(engine):

        def send() -> None:
            with contextlib.suppress(httpx.HTTPError):  # the server dies before it answers
                httpx.post(f"{url}/api/v2/client/employees", json=body, headers=headers, timeout=60)

        sent = threading.Thread(target=send)
        sent.start()
        backend = _wait_for(
            lambda: _backend_waiting_to_insert_employee(engine), "the request never got there"
        )
        process.kill()  # the server dies mid-request: nothing after this line of its runs
        process.wait()
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": backend})
        sent.join()
    assert _count(db, Employee) == 0

    retried = api.post("/client/employees", body, headers={"Idempotency-Key": "hire-after-crash"})
    assert retried.status_code == 201, retried.text
    assert retried.json()["data"]["email"] == "crash@acme.io"
    again = api.post("/client/employees", body, headers={"Idempotency-Key": "hire-after-crash"})
    assert again.headers.get("idempotent-replayed") == "true" and again.json() == retried.json()
    assert _count(db, Employee) == 1


def test_a_killed_backend_leaves_the_key_retryable(
    postgres_only: None, api: Api, db: Session, engine: Engine
) -> None:
    body = employee_body(email="killed@acme.io")
    answers: list[httpx.Response] = []
    with _employees_locked(engine):
        sent = threading.Thread(
            target=lambda: answers.append(
                api.post("/client/employees", body, headers={"Idempotency-Key": "k1"})
            )
        )
        sent.start()
        backend = _wait_for(
            lambda: _backend_waiting_to_insert_employee(engine), "the request never got there"
        )
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": backend})
        sent.join()
    assert_error(answers[0], 503)
    retried = api.post("/client/employees", body, headers={"Idempotency-Key": "k1"})
    assert retried.status_code == 201, retried.text
    assert _count(db, Employee) == 1


def test_two_concurrent_requests_with_one_key_write_once(
    postgres_only: None, api: Api, db: Session, engine: Engine
) -> None:
    """The second request waits on the first's claim (the key's unique index), then replays the
    answer the first committed: one employee, two identical answers."""
    body = employee_body(email="twice@acme.io")
    answers: list[httpx.Response] = []

    def send() -> None:
        answers.append(api.post("/client/employees", body, headers={"Idempotency-Key": "same"}))

    with _employees_locked(engine):
        first = threading.Thread(target=send)
        first.start()
        _wait_for(lambda: _backend_waiting_to_insert_employee(engine), "the first never got there")
        second = threading.Thread(target=send)  # while the first is truly in flight
        second.start()
        _wait_for(lambda: not second.is_alive() or _waiting_backends(engine) == 2, "no second")
        assert second.is_alive(), answers[0].text  # it waits for the first's outcome
    first.join()
    second.join()
    created, replayed = answers
    assert created.status_code == 201 and "idempotent-replayed" not in created.headers, created.text
    assert replayed.status_code == 201 and replayed.headers["idempotent-replayed"] == "true"
    assert replayed.json() == created.json()
    assert _count(db, Employee) == 1


def _waiting_backends(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(
            connection.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock'"
                )
            )
            or 0
        )


def test_a_claim_committed_before_a_crash_expires_after_its_lease(api: Api, db: Session) -> None:
    """A request that calls another system commits its claim first; if it then dies, the key is
    'still being processed' (409, Retry-After) only until the claim's lease ends."""
    from outfitter.core.errors import RETRY_AFTER_SECONDS
    from outfitter.http.idempotency import CLAIM_LEASE, request_fingerprint

    raw = json.dumps(employee_body(email="lease@acme.io")).encode()
    fingerprint = request_fingerprint("POST", "/api/v2/client/employees", b"", raw)
    db.add(IdempotencyRecord(token_hash=hash_token(api.token), key="leased", request_hash=fingerprint))
    db.commit()

    def post() -> httpx.Response:
        headers = {"Content-Type": "application/json", "Idempotency-Key": "leased"}
        return api.request("POST", "/client/employees", content=raw, headers=headers)

    busy = post()
    assert_error(busy, 409, "still being processed")
    # Most requests end within milliseconds: a retry is asked for soon, not at the lease's end.
    assert int(busy.headers["retry-after"]) == RETRY_AFTER_SECONDS
    db.execute(update(IdempotencyRecord).values(created_at=utcnow() - CLAIM_LEASE - timedelta(seconds=1)))
    db.commit()
    taken_over = post()
    assert taken_over.status_code == 201, taken_over.text
    replayed = post()
    assert replayed.headers["idempotent-replayed"] == "true" and replayed.json() == taken_over.json()
    assert _count(db, Employee) == 1


def test_a_stored_answer_is_not_replayed_to_a_revoked_or_expired_token(
    api: Api, companies: CompanyFactory
) -> None:
    """A replay is a request of the token like any other: once the token is revoked (or expired),
    the same key and body get the 401 every request gets, never the stored answer."""
    from outfitter.tenants.tokens import revoke_token

    headers = {"Idempotency-Key": "before-revocation"}
    first = api.post("/client/employees", json=EMPLOYEE, headers=headers)
    assert first.status_code == 201, first.text
    assert api.post("/client/employees", json=EMPLOYEE, headers=headers).json() == first.json()
    expiring, other = companies.token(api), {**EMPLOYEE, "email": "grace@example.com"}
    assert expiring.post("/client/employees", json=other, headers=headers).status_code == 201
    with Session(companies.engine) as session, session.begin():
        revoke_token(session, api.token_id)
        session.execute(
            update(ApiToken)
            .where(ApiToken.id == expiring.token_id)
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
    refused = api.post("/client/employees", json=EMPLOYEE, headers=headers)
    assert_error(refused, 401, "revoked")
    assert "idempotent-replayed" not in refused.headers and "Ada" not in refused.text
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert_error(expiring.post("/client/employees", json=other, headers=headers), 401, "expired")


def test_replays_count_against_the_rate_limit(settings: Settings, engine: Engine) -> None:
    """Every request of a token counts, a replayed one too: over the limit, the same key is a 429
    with Retry-After, not the stored answer again."""
    with TestClient(create_app(settings.model_copy(update={"rate_limit": "3/minute"}))) as client:
        api = CompanyFactory(engine, client).create("Retrying Ltd")
        headers = {"Idempotency-Key": "retried"}
        first = api.post("/client/employees", json=EMPLOYEE, headers=headers)
        assert first.status_code == 201 and first.headers["ratelimit-remaining"] == "2"
        replayed = api.post("/client/employees", json=EMPLOYEE, headers=headers)
        assert replayed.headers["idempotent-replayed"] == "true"
        assert replayed.headers["ratelimit-remaining"] == "1" and replayed.json() == first.json()
        assert (
            api.post("/client/employees", json=EMPLOYEE, headers=headers).headers["ratelimit-remaining"]
            == "0"
        )
        refused = api.post("/client/employees", json=EMPLOYEE, headers=headers)
        assert_error(refused, 429, "Rate limit of 3 requests")
        assert int(refused.headers["retry-after"]) >= 1 and "idempotent-replayed" not in refused.headers
