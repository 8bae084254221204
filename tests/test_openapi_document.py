"""The served OpenAPI document, walked whole: every operation described, with an example that its
own schema accepts; Idempotency-Key declared on every POST the middleware keys; one money type (but
the initiate answer's JSON numbers, which the interface fixes); every id a UUID; the older initiate
paths deprecated, saying which path to use instead."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import jsonschema_rs
import pytest
from fastapi.testclient import TestClient

from outfitter.core.schemas import MONEY_SCHEMA
from outfitter.payments.presenters import MONEY_FIELDS
from outfitter.payments.schemas import INITIATE_AMOUNT_SCHEMA
from tests.factories import Api

MONEY_NAMES = re.compile(r"(^|_)(amount|price|fee|balance|insurance)(_after)?$")
ID_NAMES = re.compile(r"(^|_)ids?$|Id$")
# References that take a country's id, name or two-letter code (or a currency's code): not UUIDs.
NOT_UUIDS = {"country_id", "employee_country_id", "currency_id"}
CURRENT_INITIATE = "/api/v2/client/transactions/initiate"
INITIATED = "TransactionInitiatedOut"
AMOUNT_FIELDS = (*MONEY_FIELDS, "total_amount")
INITIATE_PATHS = {
    CURRENT_INITIATE,
    "/api/v2/clients/transactions/initiate",
    "/api/v2/transactions/initiate",
    "/api/v2/client/transactions/onboard-from-storage/initiate",
    "/api/v2/client/transactions/offboard/initiate",
}


@pytest.fixture
def document(client: TestClient) -> dict[str, Any]:
    served: dict[str, Any] = client.get("/api/v2/openapi.json").json()
    return served


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            yield path, method, operation


def validator(document: dict[str, Any], schema: dict[str, Any]) -> Any:
    """A JSON Schema 2020-12 validator of `schema`, its `#/components/...` references resolved."""
    return jsonschema_rs.validator_for({**schema, "components": document["components"]})


def properties(node: Any, where: str = "") -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Every (location, name, schema) of an object property anywhere in `node`."""
    if isinstance(node, dict):
        for name, member in (node.get("properties") or {}).items():
            yield where, name, member
        for key, value in node.items():
            yield from properties(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from properties(value, f"{where}/{index}")


def branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The non-null alternatives of a schema (`X | None` is an anyOf of X and null)."""
    found = [branch for branch in schema.get("anyOf", [schema]) if branch.get("type") != "null"]
    return [
        item
        for branch in found
        for item in ([branch["items"]] if branch.get("type") == "array" else [branch])
    ]


@pytest.mark.one_database
def test_every_operation_has_a_description_and_an_example_its_schema_accepts(
    document: dict[str, Any],
) -> None:
    missing: list[str] = []
    invalid: list[str] = []
    for path, method, operation in operations(document):
        name = f"{method.upper()} {path}"
        if len((operation.get("description") or "").strip()) < 20:
            missing.append(f"{name}: no description")
        contents = [("request", operation.get("requestBody", {}).get("content", {}))]
        contents += [
            (code, answer.get("content", {}))
            for code, answer in operation["responses"].items()
            if code < "300"
        ]
        examples = 0
        for where, content in contents:
            for media_type, media in content.items():
                if "example" not in media:
                    if media_type == "application/json":
                        missing.append(f"{name}: no example of its {where} {media_type}")
                    continue
                examples += 1
                errors = [
                    str(error)[:200]
                    for error in validator(document, media["schema"]).iter_errors(media["example"])
                ]
                if errors:
                    invalid.append(f"{name} {where}: {errors}")
        if not examples:
            missing.append(f"{name}: no example at all")
    assert not missing, "\n".join(missing)
    assert not invalid, "\n".join(invalid)


@pytest.mark.one_database
def test_a_hand_written_body_example_is_kept(document: dict[str, Any]) -> None:
    body = document["paths"]["/api/v2/client/employees"]["post"]["requestBody"]["content"]["application/json"]
    assert body["example"]["first_name"] == "Ada" and body["example"]["country_id"] == "NG"


@pytest.mark.one_database
def test_every_post_that_takes_a_token_declares_the_idempotency_key(document: dict[str, Any]) -> None:
    posts = 0
    for path, method, operation in operations(document):
        headers = {p["name"]: p for p in operation.get("parameters", []) if p["in"] == "header"}
        if method == "post" and operation.get("security"):
            posts += 1
            key = headers.get("Idempotency-Key")
            assert key is not None, path
            assert key["required"] is False and key["schema"] == {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
            }
            success = next(answer for code, answer in operation["responses"].items() if code < "300")
            assert "Idempotent-Replayed" in success["headers"], path
        else:  # a GET, or the gateways' webhook: the middleware keys none of them
            assert "Idempotency-Key" not in headers, (method, path)
    assert posts >= 15


@pytest.mark.one_database
def test_the_older_initiate_paths_are_deprecated_and_name_the_path_to_use(document: dict[str, Any]) -> None:
    deprecated = {
        path: operation for path, method, operation in operations(document) if operation.get("deprecated")
    }
    assert set(deprecated) == {"/api/v2/transactions/initiate", "/api/v2/clients/transactions/initiate"}
    for operation in deprecated.values():
        assert f"POST {CURRENT_INITIATE} instead" in operation["description"]
        assert operation["summary"] == f"Deprecated: use POST {CURRENT_INITIATE}"
    assert not document["paths"][CURRENT_INITIATE]["post"].get("deprecated")


@pytest.mark.one_database
def test_money_is_one_decimal_string_type_everywhere_but_the_initiate_answer(
    document: dict[str, Any],
) -> None:
    """One exception, which the interface fixes: the initiate answer gives its amounts as JSON
    numbers, documented as such. Any other number-typed money field fails."""
    schemas = document["components"]["schemas"]
    initiated = schemas[INITIATED]["properties"]
    numbers = {name for name in initiated if MONEY_NAMES.search(name)}
    assert numbers == set(AMOUNT_FIELDS)
    for name in numbers:
        assert initiated[name].items() >= INITIATE_AMOUNT_SCHEMA.items(), name
        assert (initiated[name]["type"], initiated[name]["format"]) == ("number", "decimal"), name
        assert schemas["TransactionOut"]["properties"][name].items() >= MONEY_SCHEMA.items(), name
    # The exception's component is the initiate answer only: every initiate answers it, nothing else does.
    answering = {
        path
        for path, _, operation in operations(document)
        if f"#/components/schemas/{INITIATED}Envelope" in str(operation["responses"])
    }
    assert answering == INITIATE_PATHS
    assert str(document).count(f"#/components/schemas/{INITIATED}'") == 1  # from its envelope only

    rest = copy.deepcopy(document)
    for name in numbers:
        del rest["components"]["schemas"][INITIATED]["properties"][name]
    money = [(where, name, schema) for where, name, schema in properties(rest) if MONEY_NAMES.search(name)]
    assert len(money) >= 20
    for where, name, schema in money:
        for branch in branches(schema):
            assert branch["type"] == "string" and "pattern" in branch, (where, name, schema)
            if "/components/schemas/" in where and "Out" in where:  # every answer: the one Money schema
                assert {key: branch[key] for key in MONEY_SCHEMA} == MONEY_SCHEMA, (where, name)
    # A number type, not the word (the custom field type `number` is an enum value, a string).
    assert '"type": "number"' not in str(rest).replace("'", '"'), "a JSON number is documented somewhere"


@pytest.mark.one_database
def test_every_id_is_documented_as_a_uuid(document: dict[str, Any]) -> None:
    ids = [(where, name, schema) for where, name, schema in properties(document) if ID_NAMES.search(name)]
    for path, _, operation in operations(document):
        ids += [
            (path, p["name"], p["schema"])
            for p in operation.get("parameters", [])
            if ID_NAMES.search(p["name"])
        ]
    assert len(ids) >= 40
    for where, name, schema in ids:
        if name in NOT_UUIDS:
            continue
        for branch in branches(schema):
            if "$ref" not in branch:
                assert branch.get("format") == "uuid", (where, name, schema)
    schemas = document["components"]["schemas"]
    by_employee, flat = schemas["InitiateRequest"]["properties"]["orders"]["anyOf"]
    assert by_employee["propertyNames"] == {"format": "uuid"}  # keyed by employee id
    assert flat["items"] == {"$ref": "#/components/schemas/FlatPricingOrder"}  # or a flat list of lines
    assert schemas["FlatPricingOrder"]["properties"]["employee_id"]["format"] == "uuid"
    storage = schemas["StorageInitiateRequest"]["properties"]["orders"]
    assert storage["propertyNames"] == {"format": "uuid"}
    assert storage["additionalProperties"]["items"]["anyOf"] == [
        {"type": "string", "format": "uuid"},
        {"$ref": "#/components/schemas/StorageDevice"},
    ]


@pytest.mark.one_database
def test_bulk_employee_items_are_typed(document: dict[str, Any]) -> None:
    employees = document["components"]["schemas"]["EmployeeBulkCreate"]["properties"]["employees"]
    item = {"$ref": "#/components/schemas/EmployeeCreate"}
    assert employees["anyOf"] == [  # flat first: a generated client's natural call is a list of employees
        {"type": "array", "items": item},
        {"type": "array", "items": {"type": "array", "items": item, "minItems": 1}},
    ]
    assert "'items': {}" not in str(document)  # no list[Any] left anywhere


@pytest.mark.one_database
def test_every_operation_declares_the_400_any_request_can_get(document: dict[str, Any]) -> None:
    """Several Authorization headers, or a request line too long to read, is a 400 on any path
    (tests/core/test_auth.py): a client generated from the document must expect it on a GET too."""
    for path, method, operation in operations(document):
        answer = operation["responses"].get("400")
        assert answer is not None, (method, path)
        assert answer["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorEnvelope"
        }


@pytest.mark.one_database
def test_fields_the_server_refuses_as_null_are_not_nullable_in_the_document(document: dict[str, Any]) -> None:
    """Schemathesis sent what the document allowed and the server refused (422): each is closed."""
    schemas = document["components"]["schemas"]
    for schema, field in [
        ("EquipmentPatch", "title"),
        ("DepartmentPatch", "name"),
        ("DepartmentPatch", "member_ids"),
    ]:
        documented = schemas[schema]["properties"][field]
        assert "anyOf" not in documented and documented.get("type") != "null", (schema, field, documented)
    # {"employees": [[]]} is refused: test_bulk_employee_items_are_typed names the inner minItems


@pytest.mark.one_database
@pytest.mark.parametrize("resource", ["employees", "equipment"])
def test_the_documented_csv_example_is_a_file_the_import_takes(
    document: dict[str, Any], api: Api, resource: str
) -> None:
    """Schemathesis posts the document's example: it was an empty body, which the import refuses."""
    operation = document["paths"][f"/api/v2/client/{resource}/import"]["post"]
    example = operation["requestBody"]["content"]["text/csv"]["example"]
    answer = api.post(
        f"/client/{resource}/import",
        content=example.encode(),
        headers={"Content-Type": "text/csv"},
        params={"dry_run": "true"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"] == {"dry_run": True, "count": 2, "ids": []}


@pytest.mark.one_database
def test_the_quickstart_calls_operations_the_document_has(document: dict[str, Any]) -> None:
    """docs/quickstart.md, the first hour: each call it shows is an operation of the document, and
    it gives the facts a newcomer looked for (which id to pay with, where the data is)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    guide = (root / "docs" / "quickstart.md").read_text(encoding="utf-8")
    templates = [re.sub(r"\{[^}]+\}", "[^/]+", path) for path in document["paths"]]
    called = re.findall(r"(/api/v2/client/[A-Za-z0-9_{}/.-]+)", guide)
    assert len(called) >= 6
    for path in called:
        concrete = re.sub(r"\b[A-Z][A-Z_]+_ID\b", "x", path)
        assert any(re.fullmatch(f"(/api/v2)?{template}", concrete) for template in templates), path
    for fact in ("asset_pricing.id", "~/.local/share/outfitter/", "make reset", "updated_since", "secret"):
        assert fact in guide, fact
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert "~/.local/share/outfitter/" in readme and "docs/quickstart.md" in readme
