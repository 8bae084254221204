"""The OpenAPI document as a contract tools can trust (docs/api.md).

Routers declare what is particular to an operation: its success model, the domain errors it
raises (`error_responses(404, 409)`), the formats of its parameters. `contract_openapi` then
completes, in one place, what every operation shares because of the middleware and the handlers
in front of it, so that no status the server can answer is missing from the document:

- 422 is always the error envelope (`http.handlers` never sends FastAPI's `{"detail": [...]}`);
  any operation can answer it, if only for a NUL character in a query parameter.
- 404 on operations with a path parameter (a malformed id is 404, never 422).
- 400 everywhere (a request line or headers that cannot be read, several Authorization headers;
  with a body, malformed JSON or Content-Length); 413 (too large) and 415 (not JSON) on
  operations that take a body; on a POST also 409 (an Idempotency-Key reused with another body).
- 401, 403 and 429 on operations that need a bearer token.
- 500 and 503 (the database is out of reach) everywhere.
- The `Idempotency-Key` header on every POST that needs a token (`http.idempotency` keys those),
  and the `Idempotent-Replayed` header of their replayed answers.
- An example of every JSON answer and body that its route does not give: built from the schema
  (`example_of`: a field's own `examples` first, then its enum, default or format), so that it
  always agrees with the schema it illustrates (a test validates each one against it).

FastAPI's own `HTTPValidationError` and `ValidationError` components, which nothing answers,
are removed, and components are named by their titles (`OrderOutPageEnvelope`, see
`core.schemas.Envelope`) rather than Pydantic's `Envelope_Page_OrderOut__`.

A parameter the service requires although its Python default is None (because an undocumented
alias may stand in for it) is marked required with `required_in_document`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Path
from fastapi.routing import APIRoute

from outfitter.core.schemas import ERROR_DESCRIPTIONS

ERROR_ENVELOPE = {"$ref": "#/components/schemas/ErrorEnvelope"}
_UNUSED_COMPONENTS = ("HTTPValidationError", "ValidationError")
_REQUIRED_IN_DOCUMENT = "x-required-in-document"
_BODY_METHODS = {"post", "put", "patch"}
_HEADERS = {
    401: {"WWW-Authenticate": "The scheme to authenticate with: Bearer"},
    429: {"Retry-After": "Seconds until the next request is allowed"},
    503: {"Retry-After": "Seconds after which to retry"},
}


IDEMPOTENCY_KEY: dict[str, Any] = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "Makes a retry safe: within 24 hours the same key and body replay the first answer "
    "(with `Idempotent-Replayed: true`); the same key with another body is 409.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 200},
    "example": "order-2024-05-01-0001",
}
_REPLAYED = {
    "description": "`true` when this is the stored answer to an earlier request with the same key",
    "schema": {"type": "string", "enum": ["true"]},
}
# Values for schemas that name no example of their own (no `examples`, enum, default or format).
_SAMPLES: dict[str, Any] = {
    "uuid": "3fa85f64-5717-4562-b3fc-2c963f66afa6",
    "date-time": "2024-05-01T09:30:00.000000Z",
    "date": "2024-05-01",
    "email": "ada.lovelace@example.com",
    "uri": "https://example.com/outfitter/webhooks",
    "binary": "",
}

# By property name, for a string with no example of its own (a test validates every example).
_NAMED_SAMPLES: dict[str, str] = {
    "message": "Done successfully.",
    "title": "MacBook Pro 14",
    "first_name": "Ada",
    "last_name": "Lovelace",
    "employee_name": "Ada Lovelace",
    "email": "ada.lovelace@example.com",
    "personal_email": "ada@example.org",
    "phone": "+234 801 234 5678",
    "address": "1 Marina, Lagos",
    "landmark": "Opposite the National Museum",
    "job_title": "Engineer",
    "employment_type": "Full-time",
    "country": "Nigeria",
    "country_code": "NG",
    "currency": "NGN",
    "currency_code": "NGN",
    "tx_ref": "OTF-3F9A1C2B7D4E5F60A1B2",
    "serial_number": "C02XK0ABJGH5",
    "make": "Apple",
    "model": "MacBook Pro 14 (M3 Pro)",
    "year": "2024",
    "type": "Laptop",
    "description": "14-inch MacBook Pro for engineering work",
    "actor": "Acme Ltd API",
    "url": "https://hooks.example.com/outfitter",
    "link": "https://outfitter.example.com/sandbox/checkout/OTF-3F9A1C2B7D4E5F60A1B2",
    "image_url": "https://images.example.com/macbook-pro-14.jpg",
    "asset_code": "APL-MBP14-M3P",
    "company": "Acme Ltd",
}


def example_of(
    schema: dict[str, Any],
    schemas: dict[str, Any],
    expanding: frozenset[str] = frozenset(),
    name: str | None = None,
) -> Any:
    """A value valid against `schema` (resolving `#/components/schemas/` references): the first of
    its `examples`, its const, first enum value or default, else one built from its type and
    format, else a sample for a property of its `name` (`title`, `email`...). Optional members of
    objects are included, so the example shows every field."""
    reference = schema.get("$ref")
    if isinstance(reference, str):
        if reference in expanding:  # a recursive schema: stop with the smallest value
            return None
        return example_of(schemas[reference.rsplit("/", 1)[1]], schemas, expanding | {reference}, name)
    if schema.get("examples"):
        return schema["examples"][0]
    if "example" in schema:
        return schema["example"]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if schema.get("default") is not None:
        return schema["default"]
    for combiner in ("anyOf", "oneOf", "allOf"):
        branches = [branch for branch in schema.get(combiner, []) if branch.get("type") != "null"]
        if branches:
            return example_of(branches[0], schemas, expanding, name)
        if combiner in schema:
            return None
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((name for name in kind if name != "null"), "null")
    if kind == "object" or "properties" in schema:
        value = {
            member_name: example_of(member, schemas, expanding, member_name)
            for member_name, member in schema.get("properties", {}).items()
        }
        extra = schema.get("additionalProperties")
        if not value and isinstance(extra, dict):
            key = example_of(schema.get("propertyNames", {"type": "string"}), schemas, expanding)
            value[key if isinstance(key, str) else "key"] = example_of(extra, schemas, expanding)
        return value
    if kind == "array":
        return [example_of(schema.get("items", {}), schemas, expanding, name)]
    if kind == "string":
        if schema.get("format") in _SAMPLES:
            return _SAMPLES[schema["format"]]
        return _NAMED_SAMPLES.get(name or "", "text").ljust(schema.get("minLength", 0), "x")
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1))
    if kind == "boolean":
        return True
    return None


def id_path(description: str, alias: str | None = None) -> Any:
    """A path id: documented as a UUID; anything else names no record and answers 404."""
    return Path(alias=alias, description=description, json_schema_extra={"format": "uuid"})


def required_in_document(*names: str) -> dict[str, Any]:
    """`openapi_extra` for query parameters that the service requires (422 when missing) but that
    are optional in the signature, because an alias kept for old clients may stand in for them."""
    return {_REQUIRED_IN_DOCUMENT: list(names)}


def operation_id(route: APIRoute) -> str:
    """The endpoint function's name (`list_equipment`), not FastAPI's name-path-method."""
    return route.name


def install_contract(app: FastAPI, *extensions: Callable[[dict[str, Any]], None]) -> None:
    """Serve the completed document; each of `extensions` then adds to it (the webhooks section)."""
    generate: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = complete(generate())
            for extend in extensions:
                extend(document)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def complete(document: dict[str, Any]) -> dict[str, Any]:
    schemas = document.get("components", {}).get("schemas", {})
    for operations in document.get("paths", {}).values():
        for method, operation in operations.items():
            _complete_operation(method, operation)
            _add_examples(operation, schemas)
    text = str(document["paths"])
    for name in _UNUSED_COMPONENTS:
        if f"#/components/schemas/{name}'" not in text:
            schemas.pop(name, None)
    _name_by_title(document)
    return document


def _name_by_title(document: dict[str, Any]) -> None:
    schemas: dict[str, Any] = document.get("components", {}).get("schemas", {})
    titles = [schema.get("title") for schema in schemas.values()]
    renames = {
        name: schema["title"]
        for name, schema in schemas.items()
        if isinstance(schema.get("title"), str)
        and schema["title"] != name
        and re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", schema["title"])
        and titles.count(schema["title"]) == 1
        and schema["title"] not in schemas
    }
    if not renames:
        return
    document["components"]["schemas"] = {renames.get(name, name): schema for name, schema in schemas.items()}
    prefix = "#/components/schemas/"

    def rewrite(node: Any) -> None:
        if isinstance(node, dict):
            reference = node.get("$ref")
            if isinstance(reference, str) and reference.startswith(prefix):
                node["$ref"] = prefix + renames.get(reference[len(prefix) :], reference[len(prefix) :])
            for value in node.values():
                rewrite(value)
        elif isinstance(node, list):
            for value in node:
                rewrite(value)

    rewrite(document)


def _complete_operation(method: str, operation: dict[str, Any]) -> None:
    required = set(operation.pop(_REQUIRED_IN_DOCUMENT, ()))
    parameters = operation.get("parameters", [])
    for parameter in parameters:
        if parameter["name"] in required:
            parameter["required"] = True
            # Sent, it must name something: an empty value is refused like a missing one.
            parameter["schema"] = {"type": "string", "minLength": 1}
    if method == "post" and operation.get("security"):
        if not any(parameter["name"] == IDEMPOTENCY_KEY["name"] for parameter in parameters):
            operation["parameters"] = parameters = [*parameters, dict(IDEMPOTENCY_KEY)]
        for code, answer in operation.get("responses", {}).items():
            if code.startswith("2"):
                answer.setdefault("headers", {})["Idempotent-Replayed"] = _REPLAYED
    codes = {400, 422, 500, 503}
    if any(parameter["in"] == "path" for parameter in parameters):
        codes.add(404)
    if method in _BODY_METHODS:
        codes |= {413, 415}
    if method == "post":
        codes.add(409)
    if operation.get("security"):
        codes |= {401, 403, 429}
    responses = operation.setdefault("responses", {})
    for code in sorted(codes):
        answer = responses.setdefault(str(code), {"description": ERROR_DESCRIPTIONS[code]})
        if code == 422 and answer.get("description") == "Validation Error":  # FastAPI's own
            answer["description"] = ERROR_DESCRIPTIONS[422]
        if code == 422 or "content" not in answer:  # a route's own model (readyz's 503) stays
            answer["content"] = {"application/json": {"schema": ERROR_ENVELOPE}}
        for header, description in _HEADERS.get(code, {}).items():
            answer.setdefault("headers", {})[header] = {
                "description": description,
                "schema": {"type": "string"},
            }


def _add_examples(operation: dict[str, Any], schemas: dict[str, Any]) -> None:
    """An example for each JSON body and success answer that has none of its own."""
    contents = [operation.get("requestBody", {}).get("content", {})]
    contents += [
        answer.get("content", {})
        for code, answer in operation.get("responses", {}).items()
        if code.startswith("2")
    ]
    for content in contents:
        for media_type, media in content.items():
            if "example" in media or "examples" in media or "schema" not in media:
                continue
            if media_type == "application/json" or media_type.startswith("text/"):
                media["example"] = example_of(media["schema"], schemas)
