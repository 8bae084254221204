"""What every endpoint shares: envelopes, status codes, request ids, body limits, health, OpenAPI."""

from __future__ import annotations

import re
import uuid
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from outfitter.config import Settings
from outfitter.core.errors import EMPTY_TEXT, UNKNOWN_FIELD
from outfitter.http.handlers import BODY_REQUIRED, UNREADABLE_BODY
from tests.core.test_auth import EMPLOYEE
from tests.factories import Api, assert_error


@pytest.mark.one_database
def test_unknown_route_is_404_envelope(api: Api) -> None:
    assert_error(api.get("/client/nothing-here"), 404, "No such endpoint")


@pytest.mark.one_database
def test_a_trailing_slash_is_a_404_that_says_so_never_a_redirect(api: Api) -> None:
    listed = api.get("/client/employees/")
    assert_error(listed, 404, "/api/v2/client/employees is one, without the trailing slash")
    assert "location" not in listed.headers
    created = api.post("/client/employees/", json=EMPLOYEE)
    assert_error(created, 404, "without the trailing slash")
    assert api.get("/client/employees").json()["data"]["total"] == 0
    assert_error(
        api.get("/client/no-such-thing/"),
        404,
        "/api/v2/docs lists every endpoint (all of them under /api/v2)",
    )


@pytest.mark.one_database
def test_wrong_method_is_405_envelope(api: Api) -> None:
    assert_error(api.delete("/client/countries"), 405)


@pytest.mark.one_database
@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/api/v2/docs", "/api/v2/openapi.json"])
def test_a_405_off_the_api_names_every_method_as_the_api_does(client: TestClient, path: str) -> None:
    refused = client.post(path)
    assert_error(refused, 405, "POST is not allowed here; this path takes GET, HEAD.")
    assert refused.headers["Allow"] == "GET, HEAD"
    assert client.head(path).status_code == 200


def test_head_is_the_get_without_its_body(api: Api) -> None:
    """Every GET answers HEAD too (as its 405s' Allow says): the same status and headers, no body;
    refusals the same way."""
    assert api.post("/client/employees", json=EMPLOYEE).status_code == 201
    for path in ("/client/employees", "/client/countries", "/client/equipment", "/client/events"):
        got, head = api.get(path), api.request("HEAD", path)
        assert (head.status_code, head.content) == (200, b""), path
        assert head.headers["content-type"] == got.headers["content-type"] == "application/json"
        assert head.headers["content-length"] == got.headers["content-length"] == str(len(got.content))
    unknown = api.client.head("/api/v2/client/employees", headers={"Authorization": "Bearer otf_x"})
    assert (unknown.status_code, unknown.content) == (401, b"")
    not_found = api.request("HEAD", f"/client/employees/{uuid.uuid4()}")
    assert (not_found.status_code, not_found.content) == (404, b"")
    post_only = api.request("HEAD", "/client/equipment/bulk")
    assert (post_only.status_code, post_only.headers["allow"]) == (405, "POST")


@pytest.mark.parametrize("domain", ["equipment", "employees"])
def test_head_of_an_export_reads_nothing_of_it(
    api: Api, monkeypatch: pytest.MonkeyPatch, domain: str
) -> None:
    """A HEAD of a streamed CSV export answers its head and stops: it used to read the whole export
    (a company's every row, for a link checker's HEAD), while the keep-alive connection waited."""
    from outfitter.equipment import export as equipment_export
    from outfitter.people import export as people_export

    module = {"equipment": equipment_export, "employees": people_export}[domain]
    reads: list[object] = []
    stream = module.stream_chunks

    def counted_stream(open_session: Any, read_chunk: Any, render: Any) -> Any:
        def read(session: Any, after: Any) -> Any:
            reads.append(after)
            return read_chunk(session, after)

        return stream(open_session, read, render)

    monkeypatch.setattr(module, "stream_chunks", counted_stream)
    assert api.post("/client/employees", json=EMPLOYEE).status_code == 201
    assert api.post("/client/equipment", json={"title": "Kept"}).status_code == 201
    head = api.request("HEAD", f"/client/{domain}/export")
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-type"] == "text/csv; charset=utf-8"
    assert head.headers["content-disposition"].startswith(f'attachment; filename="{domain}-')
    assert reads == []
    got = api.get(f"/client/{domain}/export")  # the GET still reads and sends it all
    assert got.status_code == 200 and len(got.text.splitlines()) == 2 and reads == [None]


@pytest.mark.one_database
def test_malformed_json_is_400_and_writes_nothing(api: Api) -> None:
    response = api.request(
        "POST",
        "/client/employees",
        content=b'{"first_name": "Ada",',
        headers={"Content-Type": "application/json"},
    )
    assert_error(response, 400, "not valid JSON")
    assert api.get("/client/employees").json()["data"]["total"] == 0


@pytest.mark.one_database
def test_a_list_or_text_where_an_object_belongs_is_named_so_without_class_names(api: Api) -> None:
    for path, body, field in (
        ("/client/employees/bulk", {"employees": [[[EMPLOYEE]]]}, "employees"),
        ("/client/departments", [{"name": "Ops"}], "body"),
        ("/client/equipment", {"title": "x", "specs": "16GB"}, "specs"),
    ):
        errors = assert_error(api.post(path, json=body), 422)["errors"]
        messages = [message for key, found in errors.items() if key.startswith(field) for message in found]
        assert "Input should be a JSON object." in messages, errors
        assert "instance of" not in str(errors), errors


@pytest.mark.one_database
def test_non_json_body_is_415(api: Api) -> None:
    response = api.request(
        "POST",
        "/client/employees",
        content=b"first_name=Ada",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert_error(response, 415, "application/json")


@pytest.mark.one_database
def test_a_body_where_no_endpoint_takes_one_is_a_404_or_405_whatever_its_type(client: TestClient) -> None:
    """The body's type is judged only where an endpoint would read the body: an unknown path is a
    404, a method the path does not have a 405 with its Allow (a CSV sent to an import with PUT is
    not "must be JSON"), with or without a token."""
    as_text = {"Content-Type": "text/plain"}
    assert_error(client.post("/api/v2/nope", content=b"x", headers=as_text), 404)
    as_csv = {"Content-Type": "text/csv"}
    refused = client.put("/api/v2/client/equipment/import", content=b"title\nx\n", headers=as_csv)
    assert_error(refused, 405, "PUT")
    assert refused.headers["Allow"] == "POST"
    refused = client.patch("/api/v2/client/employees/import", content=b"x", headers=as_text)
    assert_error(refused, 405)
    assert refused.headers["Allow"] == "POST"
    refused = client.put("/api/v2/client/equipment", content=b"x", headers=as_text)
    assert_error(refused, 405)
    assert refused.headers["Allow"] == "GET, HEAD, POST"
    # where the endpoint exists, the type is still checked first, before the token
    assert_error(client.post("/api/v2/client/equipment", content=b"x", headers=as_text), 415, "JSON")


def _typed(schema: dict[str, Any]) -> bool:
    """Whether a query parameter's schema admits no empty string: an id or a time (format), a
    number, a boolean, an enum, a named type, or a pattern that "" does not match."""
    if "pattern" in schema and re.search(schema["pattern"], "") is None:
        return True
    return any(
        "format" in branch
        or "enum" in branch
        or "$ref" in branch
        or branch.get("type") in ("integer", "boolean")
        for branch in schema.get("anyOf", [schema])
    )


def test_an_empty_query_value_is_a_422_where_its_type_admits_none_and_no_filter_elsewhere(
    client: TestClient, api: Api
) -> None:
    """Every GET's query parameters, each sent empty: an id, a time, a number or an enum is a 422
    naming it (what the document declares, Schemathesis's negative check); a text filter is the
    answer without it, and a cursor the first page of a walk."""
    document = client.get("/api/v2/openapi.json").json()
    typed = 0
    for path, item in document["paths"].items():
        operation = item.get("get")
        if operation is None or "{" in path or not path.startswith("/api/v2/client/"):
            continue
        for parameter in operation.get("parameters", []):
            if parameter["in"] != "query" or parameter.get("required"):
                continue
            name, route = parameter["name"], path.removeprefix("/api/v2")
            answer = api.get(route, **{name: ""})
            if _typed(parameter["schema"]):
                typed += 1
                assert f"query.{name}" in assert_error(answer, 422)["errors"], (route, name)
            else:  # an empty cursor is a walk's first page: the answer to `limit` alone
                without = api.get(route, **({"limit": 15} if name == "cursor" else {}))
                assert answer.status_code == 200, (route, name, answer.text)
                assert answer.content == without.content, (route, name)
    assert typed >= 40


@pytest.mark.one_database
def test_body_over_one_mebibyte_is_413(api: Api) -> None:
    big = {**EMPLOYEE, "address": "x" * (1024 * 1024 + 10)}
    response = api.post("/client/employees", json=big)
    assert_error(response, 413, "larger than the limit")
    assert response.content == orjson.dumps(response.json())  # written as every answer is: compact


@pytest.mark.one_database
def test_streamed_body_over_the_limit_is_413(api: Api) -> None:
    def chunks():  # no Content-Length: the limit is enforced while reading
        for _ in range(300):
            yield b"x" * 4096

    response = api.request(
        "POST", "/client/employees", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert_error(response, 413)


def test_an_id_that_is_no_uuid_is_named_in_words_a_person_can_act_on(api: Api) -> None:
    """Not pydantic's "Input should be a valid UUID, invalid length: found 3"."""
    give_an_id = "Give an id as the API gives them: a UUID such as 0192f4e6-7c1a-7d3e-9b2a-5e8f1c3d4a6b."
    assert assert_error(api.get("/client/events", subject_id="abc"), 422)["errors"] == {
        "query.subject_id": [give_an_id]
    }
    created = api.post("/client/equipment", {"title": "Dock", "status": "Assigned", "assignee_id": "nobody"})
    assert assert_error(created, 422)["errors"] == {"assignee_id": [give_an_id]}
    moved = api.post("/client/equipment/bulk-move", {"equipment_ids": ["x"], "status": "In_Storage"})
    assert assert_error(moved, 422)["errors"] == {"equipment_ids.0": [give_an_id]}


@pytest.mark.one_database
def test_an_unknown_field_or_a_blank_value_is_named_in_words_a_person_can_act_on(api: Api) -> None:
    """Not pydantic's "Extra inputs are not permitted", nor "at least 1 character" for three spaces."""
    path = f"/client/employees/{api.post('/client/employees', EMPLOYEE).json()['data']['id']}"
    refused = assert_error(api.patch(path, {"email": "new@example.com"}), 422)
    assert refused["errors"] == {"email": [UNKNOWN_FIELD]}
    refused = assert_error(api.patch(path, {"first_name": "   "}), 422)
    assert refused["errors"] == {"first_name": [EMPTY_TEXT]}


@pytest.mark.one_database
@pytest.mark.parametrize(
    "path",
    ["/client/employees", "/client/departments", "/client/equipment/bulk", "/client/webhook-endpoints"],
)
def test_no_body_or_one_that_is_not_utf8_is_a_400_saying_so(api: Api, path: str) -> None:
    as_json = {"Content-Type": "application/json"}
    assert_error(api.request("POST", path, content=b"", headers=as_json), 400, BODY_REQUIRED)
    latin1 = '{"name": "caf\u00e9", "first_name": "Jos\u00e9"}'.encode("latin-1")
    assert_error(api.request("POST", path, content=latin1, headers=as_json), 400, UNREADABLE_BODY)
    for encoding in ("utf-16", "utf-16-be", "utf-32", "utf-32-le"):  # Python's parser reads these
        other = '{"name": "caf\u00e9", "first_name": "Jos\u00e9"}'.encode(encoding)
        assert_error(api.request("POST", path, content=other, headers=as_json), 400, UNREADABLE_BODY)
    refused = api.request("POST", path, content=b"", headers=as_json | {"Authorization": "Bearer otf_x"})
    assert_error(refused, 401)  # the token first, as for any input


@pytest.mark.one_database
def test_validation_error_is_422_with_errors_by_field_path(api: Api) -> None:
    body = assert_error(api.post("/client/employees", json={**EMPLOYEE, "email": "not-an-email"}), 422)
    assert list(body["errors"]) == ["email"]
    assert "email" in body["message"]


@pytest.mark.one_database
def test_request_id_is_generated_or_echoed_when_sane(api: Api) -> None:
    generated = api.get("/client/countries").headers["x-request-id"]
    assert len(generated) == 32
    assert (
        api.get(
            "/client/countries",
        ).headers["x-request-id"]
        != generated
    )
    echoed = api.request("GET", "/client/countries", headers={"X-Request-ID": "client-abc.123"})
    assert echoed.headers["x-request-id"] == "client-abc.123"
    insane = api.request("GET", "/client/countries", headers={"X-Request-ID": "bad id with spaces"})
    assert insane.headers["x-request-id"] != "bad id with spaces"
    assert (
        assert_error(api.get("/client/nothing"), 404) and api.get("/client/nothing").headers["x-request-id"]
    )


@pytest.mark.one_database
def test_health_and_readiness_use_the_envelope(client: TestClient, api: Api) -> None:
    health = client.get("/healthz")
    assert health.status_code == 200 and health.json() == {
        "success": True,
        "message": "Service is up.",
        "data": {"status": "ok"},
    }
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {
        "success": True,
        "message": "Service is ready.",
        "data": {"database": "ok", "migrations": "current", "redis": "not configured", "worker": "ok"},
    }


@pytest.mark.one_database
def test_openapi_documents_success_and_error_responses(client: TestClient, api: Api) -> None:
    document = client.get("/api/v2/openapi.json").json()
    assets = document["paths"]["/api/v2/client/assets"]["get"]
    assert {"200", "401", "403", "422", "429"} <= set(assets["responses"])
    assert "/api/v2/client/assets/{asset_id}" in document["paths"]
    assert client.get("/api/v2/docs").status_code == 200


def test_path_ids_that_are_not_uuids_are_404_not_422(api: Api) -> None:
    assert_error(api.get(f"/client/assets/{uuid.uuid4().hex[:7]}", country_id="NG", currency_code="NGN"), 404)


@pytest.mark.one_database
def test_an_unexpected_error_is_a_500_envelope_without_internals(settings: Settings, engine: Engine) -> None:
    from outfitter.app import create_app

    app = create_app(settings)

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("secret internals: password=hunter2")

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom", headers={"X-Request-ID": "trace-me"})
    body = assert_error(response, 500, "trace-me")
    assert "hunter2" not in response.text and "Traceback" not in response.text
    assert response.headers["x-request-id"] == "trace-me"
    assert set(body) == {"success", "message", "data"}
