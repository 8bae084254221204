"""The input guard (http.middleware.InputGuardMiddleware, decisions §12): JSON nested too deep,
NUL characters and lone surrogates, refused with a 422 naming the field before any endpoint runs.

Each once made a 500: a 5,000-deep body holding "\\u0000" overflowed the recursive NUL walk, and a
lone surrogate reached the database driver, which cannot encode it."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from outfitter.http.input_guard import MAX_JSON_DEPTH, nested_too_deep
from outfitter.models.events import Event
from tests.factories import Api, assert_error
from tests.people.helpers import create_employee

DEPTH_MESSAGE = f"Arrays and objects must not be nested more than {MAX_JSON_DEPTH} levels deep."
SURROGATE_MESSAGE = "Must not contain a lone surrogate (\\ud800 to \\udfff): send valid Unicode text."
JSON = {"Content-Type": "application/json"}


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


@pytest.mark.one_database
@pytest.mark.parametrize(
    "path",
    ["/api/v2/client/departments", "/api/v2/no/such/path", "/api/v2/webhooks/payments/sandbox"],
)
@pytest.mark.parametrize("inner", ['"\\u0000"', '"\\ud800"', "1"], ids=["nul", "surrogate", "plain"])
def test_a_body_nested_5000_deep_is_422_for_any_caller(client: TestClient, path: str, inner: str) -> None:
    response = client.post(path, content=nested(5000, inner), headers=JSON)
    assert assert_error(response, 422)["errors"] == {"body": [DEPTH_MESSAGE]}


@pytest.mark.one_database
def test_objects_nested_too_deep_inside_a_field_are_422(api: Api) -> None:
    body = '{"title": "MacBook", "specs": ' + '{"a": ' * 2000 + "1" + "}" * 2000 + "}"
    response = api.request("POST", "/client/equipment", content=body, headers=JSON)
    assert assert_error(response, 422)["errors"] == {"body": [DEPTH_MESSAGE]}
    assert api.get("/client/equipment").json()["data"]["total"] == 0


@pytest.mark.one_database
def test_the_depth_limit_is_exact_and_strings_do_not_count(api: Api) -> None:
    """64 levels reach the endpoint (which names the field); 65 do not. Brackets inside strings
    are text, not nesting."""
    at_limit = '{"name": ' + nested(MAX_JSON_DEPTH - 1) + "}"
    response = api.request("POST", "/client/departments", content=at_limit, headers=JSON)
    assert "name" in assert_error(response, 422)["errors"]
    over = '{"name": ' + nested(MAX_JSON_DEPTH) + "}"
    response = api.request("POST", "/client/departments", content=over, headers=JSON)
    assert assert_error(response, 422)["errors"] == {"body": [DEPTH_MESSAGE]}
    brackets = api.post("/client/departments", {"name": "[" * 40 + '{\\"' * 40})
    assert brackets.status_code == 201, brackets.text
    assert brackets.json()["data"]["name"] == "[" * 40 + '{\\"' * 40


@pytest.mark.one_database
def test_unpaired_brackets_are_malformed_json_400_not_too_deep(api: Api) -> None:
    response = api.request("POST", "/client/departments", content="[}" * 100, headers=JSON)
    assert_error(response, 400, "not valid JSON")


@pytest.mark.one_database
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/client/departments", '{"name": NaN}'),
        ("/client/equipment", '{"title": "t", "purchase_price": Infinity}'),
        ("/client/equipment", '{"title": "t", "purchase_price": -Infinity}'),
        ("/client/employees/bulk", '{"employees": [[{"first_name": NaN}]]}'),
    ],
)
def test_nan_and_infinity_are_not_json_400(api: Api, db: Session, path: str, body: str) -> None:
    """RFC 8259 has no NaN or Infinity; Python's parser reads them, the service does not."""
    answer = assert_error(api.request("POST", path, content=body, headers=JSON), 400)
    assert answer["message"] == (
        "The request body is not valid JSON: NaN, Infinity and -Infinity are not JSON numbers."
    )
    assert db.scalar(select(func.count()).select_from(Event)) == 0  # every create writes one


@pytest.mark.one_database
def test_nan_and_infinity_inside_strings_are_text(api: Api) -> None:
    created = api.post("/client/departments", {"name": "NaN Infinity"})
    assert created.status_code == 201 and created.json()["data"]["name"] == "NaN Infinity"


@pytest.mark.one_database
def test_an_integer_longer_than_python_reads_is_a_400_before_the_token(api: Api, client: TestClient) -> None:
    """5,000 digits is valid JSON but more than Python parses (4,300): it was FastAPI's vague "There
    was an error parsing the body", with or without a token. A run of digits in a string is text."""
    body = '{"first_name": ' + "9" * 5000 + "}"
    message = "The request body holds a number of more than 4,300 digits; no field takes one."
    for answer in (
        api.request("POST", "/client/employees", content=body, headers=JSON),
        client.post("/api/v2/client/employees", content=body, headers=JSON),  # no token
        api.request(
            "POST", "/client/equipment/bulk-move", content='{"status": -' + "1" * 4301 + "}", headers=JSON
        ),
    ):
        assert assert_error(answer, 400)["message"] == message
    as_text = api.post("/client/departments", {"name": "9" * 5000})  # a string: judged as text, 422
    assert "name" in assert_error(as_text, 422)["errors"]


# (path, body, the field the error names) for each of the three initiates; EMPLOYEE is the id.
INITIATES = [
    (
        "/client/transactions/initiate",
        '{"payment_method": "Card", "employee_country_id": "NG", '
        '"orders": {"EMPLOYEE": [{"asset_pricing_id": "x", "quantity": 1}]}}',
        "orders.\ufffd",
    ),
    (
        "/client/transactions/onboard-from-storage/initiate",
        '{"payment_method": "Card", "employee_country_id": "NG", "orders": {"EMPLOYEE": ["x"]}}',
        "orders.\ufffd",
    ),
    (
        "/client/transactions/offboard/initiate",
        '{"payment_method": "Card", "employee_country_id": "NG", '
        '"orders": [{"employee_id": "EMPLOYEE", "equipment_id": "x"}]}',
        "orders.0.employee_id",
    ),
]


@pytest.mark.one_database
@pytest.mark.parametrize(("path", "body", "field"), INITIATES, ids=["initiate", "from-storage", "offboard"])
def test_a_lone_surrogate_as_employee_id_is_422_naming_the_field(
    api: Api, path: str, body: str, field: str
) -> None:
    response = api.request("POST", path, content=body.replace("EMPLOYEE", "\\ud800"), headers=JSON)
    error = assert_error(response, 422)
    assert error["errors"] == {field: [SURROGATE_MESSAGE]}
    assert error["message"] == f"{field}: {SURROGATE_MESSAGE}"
    assert api.get("/client/transactions").json()["data"]["total"] == 0


@pytest.mark.one_database
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"name": "Re\\uDBFFsearch"}', "name"),
        ('{"name": "Research \\udc00"}', "name"),
        ('{"na\\ud800me": "Research"}', "na\ufffdme"),
        # Raw bytes of an encoded surrogate: Python's JSON decoder lets them through too.
        (b'{"name": "Re\xed\xa0\x80search"}', "name"),
    ],
)
def test_a_lone_surrogate_in_a_body_is_422(api: Api, body: str | bytes, field: str) -> None:
    response = api.request("POST", "/client/departments", content=body, headers=JSON)
    assert assert_error(response, 422)["errors"] == {field: [SURROGATE_MESSAGE]}
    assert api.get("/client/departments").json()["data"]["total"] == 0


@pytest.mark.one_database
def test_a_surrogate_pair_is_text_and_is_stored(api: Api) -> None:
    response = api.request("POST", "/client/departments", content='{"name": "R\\ud83d\\ude00"}', headers=JSON)
    assert response.status_code == 201, response.text
    assert response.json()["data"]["name"] == "R\U0001f600"


@pytest.mark.one_database
def test_a_lone_surrogate_in_a_patch_changes_nothing(api: Api) -> None:
    employee = create_employee(api)
    response = api.request(
        "PATCH", f"/client/employees/{employee['id']}", content='{"job_title": "\\ud800"}', headers=JSON
    )
    assert assert_error(response, 422)["errors"] == {"job_title": [SURROGATE_MESSAGE]}
    assert api.get(f"/client/employees/{employee['id']}").json()["data"] == employee


def test_encoded_surrogates_in_a_query_or_path_never_reach_the_database(api: Api) -> None:
    """Percent-decoding replaces invalid UTF-8 with U+FFFD, so a surrogate cannot arrive there;
    the search simply finds nothing."""
    found = api.client.get("/api/v2/client/employees?search=%ED%A0%80", headers=api.headers)
    assert found.status_code == 200, found.text
    assert found.json()["data"]["total"] == 0
    assert_error(api.client.get("/api/v2/client/employees/%ED%A0%80", headers=api.headers), 404)


def alternating(depth: int) -> str:
    """Objects and arrays in turn, `depth` levels, with brackets and escapes inside the strings."""
    document = '"\\\\"'  # a string holding one backslash: its closing quote is real
    for level in range(depth):
        document = f'[{document}, "[[\\"{{"]' if level % 2 else f'{{"k[\\"": {document}, "s": "\\\\[["}}'
    return document


@pytest.mark.one_database
@pytest.mark.parametrize(
    ("depth", "too_deep"), [(1, False), (63, False), (64, False), (65, True), (300, True)]
)
def test_the_depth_is_counted_exactly_outside_strings(depth: int, too_deep: bool) -> None:
    body = alternating(depth).encode()
    assert json.loads(body)  # valid JSON, `depth` deep
    assert nested_too_deep(body) is too_deep


@pytest.mark.one_database
@pytest.mark.parametrize(("depth", "too_deep"), [(64, False), (65, True)])
def test_strings_side_by_side_hold_their_brackets(depth: int, too_deep: bool) -> None:
    """Empty strings and strings that end where the next begins (`"[","","]["`), whose quotes the
    count drops in pairs before it drops what lies between quotes."""
    inner = '"[", "", "][", "\\"[", "", "[[[[", "]"'
    body = ("[" * depth + inner + "]" * depth).encode()
    assert json.loads(body)
    assert nested_too_deep(body) is too_deep
