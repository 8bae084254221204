"""Small factories for test data, and `Api`: an HTTP client bound to one company's token."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from outfitter.catalog.importer import import_catalog, load_catalog_file
from outfitter.http.unit_of_work import JsonAnswer
from outfitter.tenants.tokens import create_company, issue_token

DEMO_CATALOG = Path(__file__).parents[1] / "src" / "outfitter" / "demo" / "catalog.json"
T = TypeVar("T")


def all_at_once(calls: Sequence[Callable[[], T]], timeout: float = 120) -> list[T | Exception | None]:
    """Each call in a thread of its own, all released together by a barrier: what each returned
    or raised (None for one still running after `timeout`)."""
    barrier = threading.Barrier(len(calls))
    results: list[T | Exception | None] = [None] * len(calls)

    def run(index: int) -> None:
        barrier.wait()
        try:
            results[index] = calls[index]()
        except Exception as exc:  # the caller decides what a failure means
            results[index] = exc

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    return results


@dataclass
class Api:
    """Calls the API as one company's client would: every request carries its bearer token."""

    client: TestClient
    token: str
    company_id: uuid.UUID
    token_id: uuid.UUID
    headers: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.headers = {"Authorization": f"Bearer {self.token}"}

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        return self.client.request(method, f"/api/v2{path}", headers=headers, **kwargs)

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.request("GET", path, params=params or None)

    def post(self, path: str, json: Any = None, **kwargs: Any) -> httpx.Response:
        return self.request("POST", path, json=json, **kwargs)

    def patch(self, path: str, json: Any = None, **kwargs: Any) -> httpx.Response:
        return self.request("PATCH", path, json=json, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("DELETE", path, **kwargs)


class CompanyFactory:
    def __init__(self, engine: Engine, client: TestClient) -> None:
        self.engine = engine
        self.client = client

    def create(self, name: str = "Acme Ltd", scopes: list[str] | None = None) -> Api:
        with Session(self.engine) as session, session.begin():
            company = create_company(session, name)
            issued = issue_token(session, company.id, scopes)
            company_id, token_id = company.id, issued.record.id
        return Api(self.client, issued.token, company_id, token_id)

    def token(self, api: Api, scopes: list[str] | None = None, expires_in_days: int | None = None) -> Api:
        """Another token of the same company."""
        with Session(self.engine) as session, session.begin():
            issued = issue_token(session, api.company_id, scopes, expires_in_days)
            token_id = issued.record.id
        return Api(self.client, issued.token, api.company_id, token_id)


def load_demo_catalog(engine: Engine) -> None:
    with Session(engine) as session, session.begin():
        import_catalog(session, load_catalog_file(DEMO_CATALOG))


def assert_rendered_as(response: httpx.Response, model: Any) -> None:
    """An answer rendered by orjson (core.schemas.Rendered) is, byte for byte, what the route's
    response `model` renders for the same content."""
    assert response.content == JsonAnswer(model, response.status_code, True)(response.json()).body


def assert_error(response: httpx.Response, status: int, fragment: str | None = None) -> dict[str, Any]:
    """The error envelope: success false, a readable message, data null."""
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["success"] is False
    assert body["data"] is None
    assert isinstance(body["message"], str) and body["message"]
    if fragment is not None:
        assert fragment.lower() in body["message"].lower(), body["message"]
    return body


@contextmanager
def counting_statements(app: FastAPI) -> Iterator[list[str]]:
    """The SQL of every statement the app sends while inside, through either driver: SQLAlchemy's
    engine (the unit of work) and, on PostgreSQL, asyncpg (the read-only hot paths, db.reads)."""
    statements: list[str] = []

    def on_cursor(_connection: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        statements.append(statement)

    engine = app.state.engine
    reads = app.state.reads
    event.listen(engine, "before_cursor_execute", on_cursor)
    if reads is not None:
        reads.statement_listeners.append(statements.append)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", on_cursor)
        if reads is not None:
            reads.statement_listeners.remove(statements.append)


def walk_cursor(api: Api, path: str, limit: int = 2, **params: Any) -> list[dict[str, Any]]:
    """Every record of a list, page by page in cursor mode, checking each page's shape."""
    records: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        query = {**params, "limit": limit, **({"cursor": cursor} if cursor else {})}
        response = api.get(path, **query)
        assert response.status_code == 200, response.text
        page = response.json()["data"]
        assert set(page) == {"data", "next_cursor", "limit"} and page["limit"] == limit
        assert len(page["data"]) <= limit
        records += page["data"]
        cursor = page["next_cursor"]
        if cursor is None:
            return records
        assert len(page["data"]) == limit
