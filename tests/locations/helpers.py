"""Arranging location tests through the API."""

from __future__ import annotations

from typing import Any

from tests.factories import Api


def create_location(
    api: Api, name: str, parent: dict[str, Any] | None = None, **fields: Any
) -> dict[str, Any]:
    body = {"name": name, **({"parent_id": parent["id"]} if parent else {}), **fields}
    response = api.post("/client/locations", body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def get_location(api: Api, location: dict[str, Any]) -> dict[str, Any]:
    response = api.get(f"/client/locations/{location['id']}")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def counts(location: dict[str, Any], scope: str) -> dict[str, int]:
    """A location's non-zero device counts ('here' or 'beneath'), the total included."""
    return {status: count for status, count in location["device_counts"][scope].items() if count}
