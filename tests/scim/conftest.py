"""SCIM fixtures: a company's `scim` token as an identity provider holds it, beside its API token."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.factories import Api, CompanyFactory

SCIM_MEDIA_TYPE = "application/scim+json"
USER_URN = "urn:ietf:params:scim:schemas:core:2.0:User"
ENTERPRISE_URN = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
GROUP_URN = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH_URN = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
ERROR_URN = "urn:ietf:params:scim:api:messages:2.0:Error"
SEARCH_URN = "urn:ietf:params:scim:api:messages:2.0:SearchRequest"


@dataclass
class Scim:
    """Calls /scim/v2 as an identity provider would: the scim token, bodies as application/scim+json."""

    client: TestClient
    token: str
    headers: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.headers = {"Authorization": f"Bearer {self.token}", "Accept": SCIM_MEDIA_TYPE}

    def request(self, method: str, path: str, body: Any = None, **kwargs: Any) -> httpx.Response:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        if body is not None:
            headers["Content-Type"] = SCIM_MEDIA_TYPE
            kwargs["content"] = json.dumps(body)
        return self.client.request(method, f"/scim/v2{path}", headers=headers, **kwargs)

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.request("GET", path, params=params or None)

    def post(self, path: str, body: Any, **kwargs: Any) -> httpx.Response:
        return self.request("POST", path, body, **kwargs)

    def put(self, path: str, body: Any, **kwargs: Any) -> httpx.Response:
        return self.request("PUT", path, body, **kwargs)

    def patch(self, path: str, operations: list[dict[str, Any]], **kwargs: Any) -> httpx.Response:
        return self.request("PATCH", path, {"schemas": [PATCH_URN], "Operations": operations}, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("DELETE", path, **kwargs)


def scim_of(companies: CompanyFactory, api: Api) -> Scim:
    return Scim(api.client, companies.token(api, ["scim"]).token)


@pytest.fixture
def scim(companies: CompanyFactory, api: Api) -> Scim:
    """The SCIM client of `api`'s company."""
    return scim_of(companies, api)


@pytest.fixture
def other_scim(companies: CompanyFactory, other_api: Api) -> Scim:
    return scim_of(companies, other_api)


def user_body(user_name: str, **extra: Any) -> dict[str, Any]:
    """A User as Okta sends it by default."""
    body: dict[str, Any] = {
        "schemas": [USER_URN],
        "userName": user_name,
        "name": {"givenName": "Ada", "familyName": "Lovelace"},
        "emails": [{"primary": True, "value": user_name, "type": "work"}],
        "addresses": [{"country": "NG", "type": "work"}],
        "displayName": "Ada Lovelace",
        "locale": "en-US",
        "active": True,
    }
    body.update(extra)
    return body


def assert_scim_error(response: httpx.Response, status: int, scim_type: str | None = None) -> dict[str, Any]:
    """A SCIM Error message: its schema, the status as a string, a detail, the scimType."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(SCIM_MEDIA_TYPE)
    body: dict[str, Any] = response.json()
    assert body["schemas"] == [ERROR_URN]
    assert body["status"] == str(status)
    assert isinstance(body["detail"], str) and body["detail"]
    assert body.get("scimType") == scim_type, body
    return body
