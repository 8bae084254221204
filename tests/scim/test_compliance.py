"""scim2-tester's `check_server` against a served instance (uvicorn on 127.0.0.1): discovery,
create, read, list, attributes, replace, PATCH add / replace / remove and delete of Users and
Groups must report no error."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest
from scim2_client.engines.httpx2 import SyncSCIMClient
from scim2_tester import Status, check_server

from tests.factories import CompanyFactory
from tests.payments.conftest import LiveServer, live_server

__all__ = ["live_server"]

FAILED = {Status.ERROR, Status.CRITICAL}


@pytest.fixture
def scim_client(live_server: LiveServer, companies: CompanyFactory) -> Iterator[SyncSCIMClient]:
    token = companies.token(companies.create("Initech"), ["scim"]).token
    with httpx2.Client(
        base_url=f"{live_server.url}/scim/v2", headers={"Authorization": f"Bearer {token}"}, timeout=60
    ) as http:
        yield SyncSCIMClient(http)


def test_check_server_reports_no_error_for_users_and_groups(scim_client: SyncSCIMClient) -> None:
    results = check_server(scim_client, resource_types=["User", "Group"])
    failures = [
        f"{result.resource_type or ''} {result.title}: {result.reason}"
        for result in results
        if result.status in FAILED
    ]
    assert not failures, "\n".join(failures)
    checked = {(result.resource_type, result.title) for result in results if result.status == Status.SUCCESS}
    for resource_type in ("User", "Group"):
        for title in ("object_creation", "object_query", "object_replacement", "object_deletion"):
            assert (resource_type, title) in checked, (resource_type, title, checked)
    tags = {tag for result in results if result.status == Status.SUCCESS for tag in result.tags}
    assert {"discovery", "patch:add", "patch:remove", "patch:replace"} <= tags, tags
