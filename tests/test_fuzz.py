"""No request a client can send gets a 500: Schemathesis generates requests for every operation in
the OpenAPI document (valid and invalid shapes) and sends them with a real token."""

from __future__ import annotations

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.generation import GenerationMode

from tests.factories import Api

# Per operation, on one database (tests/conftest.py); random, so each run draws others, and the
# contract's runs (tests/test_contract.py) send valid and invalid requests to every operation too.
EXAMPLES_PER_OPERATION = 12


# SQLite: the contract's valid requests run on PostgreSQL (tests/test_contract.py), so each storage
# gets generated data that reaches it.
@pytest.mark.runs_long
@pytest.mark.one_database("sqlite")
def test_generated_requests_never_get_a_server_error(app: FastAPI, api: Api, demo_catalog: None) -> None:
    schema = schemathesis.openapi.from_asgi("/api/v2/openapi.json", app)
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 6

    for operation in operations:
        strategy = operation.as_strategy(GenerationMode.POSITIVE) | operation.as_strategy(
            GenerationMode.NEGATIVE
        )

        @given(case=strategy, use_token=st.booleans())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def check(case: schemathesis.Case, use_token: bool) -> None:
            headers = dict(api.headers) if use_token else {}
            response = case.call(headers=headers)
            if response.status_code >= 500:
                failures.append(
                    f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:200]}"
                )
            content_type = (response.headers.get("content-type") or [""])[0]  # each header a list
            if response.status_code == 200 and content_type.startswith("text/csv"):
                return  # an export's file (decisions 15), the one answer that is not the envelope
            assert isinstance(response.json().get("success"), bool), f"{case.method} {case.formatted_path}"

        check()
    assert failures == []
