"""Small factories of the custom field tests: a field defined through the API, a device made with values."""

from __future__ import annotations

from typing import Any

from tests.factories import Api


def define(api: Api, key: str, type: str = "text", entity: str = "device", **rules: Any) -> dict[str, Any]:
    body = {"entity": entity, "key": key, "label": key.replace("_", " ").title(), "type": type, **rules}
    response = api.post("/client/custom-fields", body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()["data"]
    return created


def device(api: Api, title: str = "Phone", **fields: Any) -> dict[str, Any]:
    response = api.post("/client/equipment", {"title": title, **fields})
    assert response.status_code == 201, response.text
    made: dict[str, Any] = response.json()["data"]
    return made


def errors_of(response: Any, status: int = 422) -> dict[str, list[str]]:
    assert response.status_code == status, response.text
    errors: dict[str, list[str]] = response.json()["errors"]
    return errors
