"""Every path id of the API is walled off between companies, proved by walking the OpenAPI document.

The test reads the served document (`GET /api/v2/openapi.json`) and, for every operation under
`/api/v2/client/` or `/api/v2/clients/` whose path carries an id, calls it with a second company's
token on the first company's record, with a body the first company itself could send. It proves:

- the answer is a 404 error envelope (`success` false, `data` null, a message) identical to the
  answer for a random unknown id, so a second company cannot even learn that the id exists;
- nothing of the first company changed: its own view of every list endpoint (each parameterless
  GET under `/api/v2/client/`) and of every record it made is equal, field for field, before and
  after the second company's attempts. Nothing in the JSON bodies is ignored (headers such as the
  request id and rate-limit counters are not part of them). The answers that depend on the clock
  (equipment's `usage_duration`, `storage_duration`, `insurance_expiring_in`) count whole days,
  so they hold still within the test; the tokens' `last_used_at`, which authenticating moves, is
  in no answer. Verify is walked but not re-read (it asks the gateway and may settle): the
  transaction is compared through GET /client/transactions;
- the bodies are ones the first company may really send (it gets a 2xx with each of them on its
  own records), so the 404s come from tenancy and not from validation.

New endpoints are covered automatically or fail loudly: an operation with a path id that has no
entry in BODIES, or whose parameter has no record in the `records` map, fails the test naming it.
Operations that deliberately are not company-owned are listed in NOT_COMPANY_OWNED, and the test
checks that list too (they exist, and a second company really can read them).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from outfitter.models import Asset
from tests.equipment.helpers import register
from tests.factories import Api, CompanyFactory, load_demo_catalog
from tests.payments.conftest import add_credit, card_body, prices
from tests.people.helpers import create_employee

API = "/api/v2"
TENANT_PREFIXES = (f"{API}/client/", f"{API}/clients/")
METHODS = ("get", "post", "put", "patch", "delete")
Key = tuple[str, str]  # (METHOD, path template as the document writes it)

# Operations with a path parameter that need no bearer token: not a company's view of anything.
UNAUTHENTICATED: dict[Key, str] = {
    ("POST", f"{API}/webhooks/payments/{{gateway}}"): "the gateways' webhook: signed, not token-bearing",
}

# Operations with a path id whose records belong to no company, so every company may read them.
# The test checks this list: each entry exists, its record has no company_id, and a second
# company reads the same answer as the first.
NOT_COMPANY_OWNED: dict[Key, str] = {
    # Catalog assets are the shared catalog every company buys from (models.catalog.Asset has no
    # company_id); the same asset id is meant to be readable with any company's token.
    ("GET", f"{API}/client/assets/{{asset_id}}"): "the shared catalog",
}
SHARED_QUERY: dict[Key, dict[str, str]] = {
    ("GET", f"{API}/client/assets/{{asset_id}}"): {"country_id": "NG", "currency_code": "NGN"},
}

# The body each walked operation is sent with: None for operations that take none. Each body is
# one the owning company may send with success (test_the_walked_bodies_are_ones_the_owner_may_send),
# and each one, were it obeyed, would visibly change the record.
BODIES: dict[Key, dict[str, Any] | None] = {
    ("GET", f"{API}/client/employees/{{userId}}"): None,
    ("PATCH", f"{API}/client/employees/{{userId}}"): {"first_name": "Mallory", "job_title": "Intruder"},
    ("DELETE", f"{API}/client/employees/{{userId}}"): None,
    ("GET", f"{API}/client/departments/{{departmentId}}"): None,
    ("PATCH", f"{API}/client/departments/{{departmentId}}"): {"name": "Pwned", "member_ids": []},
    ("DELETE", f"{API}/client/departments/{{departmentId}}"): None,
    ("GET", f"{API}/client/equipment/{{equipmentId}}"): None,
    ("PATCH", f"{API}/client/equipment/{{equipmentId}}"): {"title": "Mallory's now", "status": "Sold"},
    ("DELETE", f"{API}/client/equipment/{{equipmentId}}"): None,
    ("GET", f"{API}/client/locations/{{locationId}}"): None,
    ("PATCH", f"{API}/client/locations/{{locationId}}"): {"name": "Pwned", "parent_id": None},
    ("DELETE", f"{API}/client/locations/{{locationId}}"): None,
    ("GET", f"{API}/client/transactions/{{tx_ref}}/verify"): None,
    ("GET", f"{API}/client/orders/{{orderId}}"): None,
    ("POST", f"{API}/client/orders/{{orderId}}/received"): {},
    ("GET", f"{API}/client/events/{{eventId}}"): None,
    ("GET", f"{API}/client/webhook-endpoints/{{endpointId}}"): None,
    # Not `enabled: false`: the owner's own walk of ping and retry (which refuse a disabled
    # endpoint) follows it.
    ("PATCH", f"{API}/client/webhook-endpoints/{{endpointId}}"): {
        "description": "Mallory's",
        "event_types": ["wallet.debited"],
    },
    ("DELETE", f"{API}/client/webhook-endpoints/{{endpointId}}"): None,
    ("POST", f"{API}/client/webhook-endpoints/{{endpointId}}/rotate-secret"): None,
    ("POST", f"{API}/client/webhook-endpoints/{{endpointId}}/ping"): None,
    ("GET", f"{API}/client/webhook-endpoints/{{endpointId}}/deliveries"): None,
    ("POST", f"{API}/client/webhook-endpoints/{{endpointId}}/deliveries/{{deliveryId}}/retry"): None,
    ("GET", f"{API}/client/custom-fields/{{fieldId}}"): None,
    ("PATCH", f"{API}/client/custom-fields/{{fieldId}}"): {"label": "Mallory's", "required": False},
    ("DELETE", f"{API}/client/custom-fields/{{fieldId}}"): None,
    ("GET", f"{API}/client/equipment/{{equipmentId}}/sensitive-fields"): None,
    ("GET", f"{API}/client/employees/{{userId}}/sensitive-fields"): None,
}

# GETs with a path id left out of the first company's snapshot, and why.
NOT_SNAPSHOT: dict[Key, str] = {
    # Verify asks the gateway and may settle or expire the transaction: not a pure read. The
    # transaction is in the snapshot through GET /client/transactions.
    ("GET", f"{API}/client/transactions/{{tx_ref}}/verify"): "asks the gateway; may settle",
}

# Query parameters a list endpoint needs to answer 200 (the catalog lists are priced per market).
LIST_QUERY: dict[str, dict[str, str]] = {
    f"{API}/client/assets": {"country_id": "NG", "currency_code": "NGN"},
}


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    path_params: tuple[str, ...]
    query_params: tuple[str, ...]
    required_query: tuple[str, ...]
    has_body: bool

    @property
    def key(self) -> Key:
        return (self.method, self.path)

    @property
    def name(self) -> str:
        return f"{self.method} {self.path}"

    def url(self, values: dict[str, str]) -> str:
        """The path for Api.request (which adds /api/v2), its ids filled in."""
        return self.path.removeprefix(API).format(**values)


@dataclass
class First:
    """The first company's records: one id of each kind the path ids name, and every id to re-read."""

    records: dict[str, str]
    reads: dict[str, list[str]]
    shared: dict[str, str]


def operations(document: dict[str, Any]) -> list[Operation]:
    found = []
    for path, item in document["paths"].items():
        shared_parameters = item.get("parameters", [])
        for method in METHODS:
            if method not in item:
                continue
            operation = item[method]
            parameters = [*shared_parameters, *operation.get("parameters", [])]
            found.append(
                Operation(
                    method=method.upper(),
                    path=path,
                    path_params=tuple(p["name"] for p in parameters if p["in"] == "path"),
                    query_params=tuple(p["name"] for p in parameters if p["in"] == "query"),
                    required_query=tuple(
                        p["name"] for p in parameters if p["in"] == "query" and p.get("required")
                    ),
                    has_body="requestBody" in operation,
                )
            )
    return found


def walked_operations(document: dict[str, Any], records: dict[str, str]) -> tuple[list[Operation], list[str]]:
    """The company-owned operations with a path id, and what keeps any other one from being walked."""
    walked: list[Operation] = []
    problems: list[str] = []
    seen: set[Key] = set()
    for operation in operations(document):
        if not operation.path.startswith(f"{API}/") or not operation.path_params:
            continue
        seen.add(operation.key)
        if operation.key in UNAUTHENTICATED or operation.key in NOT_COMPANY_OWNED:
            continue
        if not operation.path.startswith(TENANT_PREFIXES):
            problems.append(
                f"{operation.name}: a path id outside /api/v2/client(s)/; walk it (add it to BODIES) "
                "or list it in UNAUTHENTICATED with the reason"
            )
            continue
        if operation.key not in BODIES:
            problems.append(
                f"{operation.name}: no entry in BODIES; add the body the owning company would send "
                "(None for no body) so the tenancy walk covers it"
            )
            continue
        body = BODIES[operation.key]
        if operation.has_body != (body is not None):
            wanted = "a body" if operation.has_body else "no body"
            problems.append(f"{operation.name}: the operation takes {wanted}; fix its BODIES entry")
            continue
        missing = [name for name in operation.path_params if name not in records]
        if missing:
            problems.append(
                f"{operation.name}: no record for path parameter(s) {missing} in the records map; "
                "create one of the first company's records of that kind in the `first` fixture"
            )
            continue
        if operation.required_query:
            problems.append(
                f"{operation.name}: required query parameters {list(operation.required_query)} "
                "the walk does not send"
            )
            continue
        walked.append(operation)
    for key in [*BODIES, *UNAUTHENTICATED, *NOT_COMPANY_OWNED]:
        if key not in seen:
            problems.append(f"{key[0]} {key[1]}: listed in this test but not in the document any more")
    return walked, problems


def unknown_like(value: str) -> str:
    """A random id of the same shape: a UUID for a UUID; for a reference such as `otf_tx_<hex>` or
    `OTF-<HEX>`, the same prefix and a random tail of the same length and case."""
    try:
        uuid.UUID(value)
    except ValueError:
        cut = max(value.rfind("_"), value.rfind("-")) + 1
        prefix, tail = value[:cut], value[cut:]
        random_tail = (uuid.uuid4().hex * 4)[: len(tail)]
        return prefix + (random_tail.upper() if tail.isupper() else random_tail)
    return str(uuid.uuid4())


def call(api: Api, operation: Operation, values: dict[str, str]) -> httpx.Response | Exception:
    """The operation with its BODIES body. The TestClient re-raises what the app did not handle (a
    500): that comes back as the exception, so one broken operation does not hide the others."""
    body = BODIES.get(operation.key)
    extra: dict[str, Any] = {} if body is None else {"json": body}
    try:
        return api.request(operation.method, operation.url(values), **extra)
    except Exception as exc:
        return exc


def show(response: httpx.Response | Exception) -> str:
    if isinstance(response, Exception):
        return f"an unhandled {type(response).__name__}: {response}"
    return f"{response.status_code} {response.text[:300]}"


def error_envelope(response: httpx.Response | Exception) -> dict[str, Any] | str:
    """The 404 error envelope's body, or what is wrong with the answer."""
    if isinstance(response, Exception) or response.status_code != 404:
        return show(response)
    try:
        body = response.json()
    except json.JSONDecodeError:
        return f"a 404 that is not JSON: {show(response)}"
    if not isinstance(body, dict) or body.get("success") is not False or body.get("data", "-") is not None:
        return f"a 404 that is not the error envelope (success false, data null): {show(response)}"
    if not isinstance(body.get("message"), str) or not body["message"]:
        return f"a 404 without a message: {show(response)}"
    return body


def cross_company_failures(other_api: Api, operation: Operation, records: dict[str, str]) -> list[str]:
    """The second company on the first one's record: a 404 envelope like the one for an unknown id."""
    foreign = error_envelope(
        call(other_api, operation, {name: records[name] for name in operation.path_params})
    )
    unknown = error_envelope(
        call(other_api, operation, {name: unknown_like(records[name]) for name in operation.path_params})
    )
    if isinstance(foreign, str):
        return [f"{operation.name}: the first company's record answered the second company {foreign}"]
    if isinstance(unknown, str):
        return [f"{operation.name}: a random unknown id answered {unknown}"]
    if foreign != unknown:
        return [
            f"{operation.name}: another company's record and an unknown id answer differently, "
            f"so the id's existence shows: {foreign} vs {unknown}"
        ]
    return []


def record_values(operation: Operation, first: First) -> list[dict[str, str]]:
    """Path values naming each of the first company's records the operation reads: every id of
    its kind for a one-id path, the records map's ids otherwise. A kind missing from the records
    map reads nothing here: the walk itself fails for it."""
    if any(name not in first.records for name in operation.path_params):
        return []
    if len(operation.path_params) == 1:
        (name,) = operation.path_params
        return [{name: record_id} for record_id in first.reads[name]]
    return [{name: first.records[name] for name in operation.path_params}]


def snapshot(api: Api, document: dict[str, Any], first: First) -> dict[str, tuple[int, Any]]:
    """The first company's own view: every parameterless GET under /api/v2/client(s)/ (all on one
    page), and every GET of one of its records."""
    views: dict[str, tuple[int, Any]] = {}
    for operation in operations(document):
        if operation.method != "GET" or not operation.path.startswith(TENANT_PREFIXES):
            continue
        if not operation.path_params:
            params: dict[str, Any] = dict(LIST_QUERY.get(operation.path, {}))
            if "per_page" in operation.query_params:
                params["per_page"] = 100
            response = api.get(operation.url({}), **params)
            # The CSV exports are views too: their text must not change either.
            csv = response.headers.get("content-type", "").startswith("text/csv")
            views[operation.name] = (response.status_code, response.text if csv else response.json())
        elif operation.key in BODIES and operation.key not in NOT_SNAPSHOT:
            for values in record_values(operation, first):
                response = api.get(operation.url(values))
                views[f"GET {API}{operation.url(values)}"] = (response.status_code, response.json())
    return views


def snapshot_failures(before: dict[str, tuple[int, Any]], after: dict[str, tuple[int, Any]]) -> list[str]:
    failures = [
        f"snapshot {name}: answered {status}, not 200"
        for name, (status, _) in before.items()
        if status != 200
    ]
    for name in before.keys() | after.keys():
        if before.get(name) != after.get(name):
            was, now = before.get(name), after.get(name)
            failures.append(f"the first company's {name} changed:\n  before {was}\n  after  {now}")
    return failures


def report(failures: list[str]) -> str:
    return f"{len(failures)} tenancy problem(s):\n- " + "\n- ".join(failures)


@pytest.fixture
def first(api: Api, engine: Engine, db: Session) -> First:
    """The first company with one record of every kind a path id names, all made through its API:
    an employee (head and member of a department), an unassigned device it registered, a Pending
    Card transaction and a fulfilled Credit order (whose device belongs to a second employee), and
    the events all of that wrote."""
    load_demo_catalog(engine)
    employee = create_employee(api, email="secret@acme.io")
    buyer = create_employee(api)
    department = api.post(
        "/client/departments",
        {"name": "Research", "head_id": employee["id"], "member_ids": [employee["id"], buyer["id"]]},
    )
    assert department.status_code == 201, department.text
    # A custom field, and the device holding a value of it (and a sensitive one).
    field = api.post(
        "/client/custom-fields", {"entity": "device", "key": "asset_tag", "label": "Tag", "type": "text"}
    )
    assert field.status_code == 201, field.text
    pin = {"entity": "device", "key": "pin", "label": "PIN", "type": "text", "sensitive": True}
    assert api.post("/client/custom-fields", pin).status_code == 201
    site = api.post("/client/locations", {"name": "Lagos campus", "kind": "Site"})
    assert site.status_code == 201, site.text
    room = api.post("/client/locations", {"name": "Room 7", "parent_id": site.json()["data"]["id"]})
    assert room.status_code == 201, room.text
    device = register(
        api,
        serial_number=f"SN-ACME-{uuid.uuid4().hex[:8]}",
        make="Apple",
        year="2023",
        custom_fields={"asset_tag": "AT-1", "pin": "1234"},
        location_id=site.json()["data"]["id"],
    )

    priced = prices(api)[0]
    pricing_id = priced["asset_pricing"]["id"]
    card = api.post("/client/transactions/initiate", json=card_body(uuid.UUID(buyer["id"]), pricing_id))
    assert card.status_code == 200, card.text
    assert card.json()["data"]["status"] == "Pending"

    add_credit(db, api.company_id, "NGN", "100000000")
    credit = api.post(
        "/client/transactions/initiate",
        json=card_body(uuid.UUID(buyer["id"]), pricing_id, payment_method="Credit"),
    )
    assert credit.status_code == 200, credit.text
    assert credit.json()["data"]["status"] == "Fulfilled"
    orders = api.get("/client/orders").json()["data"]["data"]
    assert [order["tx_ref"] for order in orders] == [credit.json()["data"]["tx_ref"]]

    # A webhook endpoint (on a host that does not resolve: accepted, never sent to here) and a
    # delivery of it, queued by a ping.
    endpoint = api.post("/client/webhook-endpoints", {"url": "https://hooks.acme.invalid/outfitter"})
    assert endpoint.status_code == 201, endpoint.text
    endpoint_id = endpoint.json()["data"]["id"]
    ping = api.post(f"/client/webhook-endpoints/{endpoint_id}/ping")
    assert ping.status_code == 202, ping.text

    devices = api.get("/client/equipment", per_page=100).json()["data"]["data"]
    assert len(devices) == 2, devices  # the registered one and the one the order made
    events = api.get("/client/events", per_page=100).json()["data"]["data"]
    assert len(events) > 10, events  # every change above wrote its event
    records = {
        "userId": employee["id"],
        "departmentId": department.json()["data"]["id"],
        "equipmentId": device["id"],
        "tx_ref": card.json()["data"]["tx_ref"],
        "orderId": orders[0]["id"],
        "eventId": events[0]["id"],
        "endpointId": endpoint_id,
        "deliveryId": ping.json()["data"]["id"],
        "fieldId": field.json()["data"]["id"],
        "locationId": room.json()["data"]["id"],
    }
    reads = {name: [value] for name, value in records.items()}
    reads["userId"].append(buyer["id"])
    reads["equipmentId"] = [record["id"] for record in devices]
    reads["eventId"] = [record["id"] for record in events]
    reads["locationId"].append(site.json()["data"]["id"])
    return First(records=records, reads=reads, shared={"asset_id": priced["asset_id"]})


def owner_token(companies: CompanyFactory, api: Api) -> Api:
    """The first company with every scope a company may hold: its view includes sensitive values."""
    return companies.token(api, ["read", "write", "custom_fields:sensitive"])


def test_a_second_company_gets_404_on_every_path_id_of_the_first(
    client: TestClient, api: Api, other_api: Api, first: First, companies: CompanyFactory
) -> None:
    document = client.get(f"{API}/openapi.json").json()
    walked, failures = walked_operations(document, first.records)
    assert walked, "the walk found no company-owned operation with a path id: is the document served?"

    owner = owner_token(companies, api)
    before = snapshot(owner, document, first)
    for operation in walked:
        failures += cross_company_failures(other_api, operation, first.records)
    after = snapshot(owner, document, first)
    failures += snapshot_failures(before, after)

    walked_names = "\n  ".join(operation.name for operation in walked)
    assert not failures, f"{report(failures)}\n(walked:\n  {walked_names})"


# Walked operations whose owner gets a rule's refusal on the walk's records, not a success: the
# answer still shows the record found and the body taken (a refused body would be a 422), and the
# operation's own tests prove the owner's success.
OWNER_REFUSED: dict[Key, tuple[int, str]] = {
    # the walk's order is a purchase; tests/payments/test_retrieval_received.py marks a retrieval's
    ("POST", f"{API}/client/orders/{{orderId}}/received"): (409, "only a retrieval's devices are received"),
}


def test_the_walked_bodies_are_ones_the_owner_may_send(
    client: TestClient, api: Api, first: First, companies: CompanyFactory
) -> None:
    """The control: each walked call succeeds for the company that owns the record, so the second
    company's 404 is tenancy at work, not a refused body. Deletes go last: they end the records."""
    document = client.get(f"{API}/openapi.json").json()
    walked, _ = walked_operations(document, first.records)  # coverage problems fail the walk itself
    api = owner_token(companies, api)
    failures = []
    for operation in sorted(walked, key=lambda operation: operation.method == "DELETE"):
        response = call(api, operation, {name: first.records[name] for name in operation.path_params})
        refused = OWNER_REFUSED.get(operation.key)
        if refused and not isinstance(response, Exception) and response.status_code == refused[0]:
            assert refused[1] in response.json()["message"], show(response)
            continue
        if isinstance(response, Exception) or not response.is_success:
            failures.append(f"{operation.name}: the owner itself got {show(response)}")
    assert walked and not failures, report(failures)


def test_the_not_company_owned_operations_really_are_shared(
    client: TestClient, api: Api, other_api: Api, first: First
) -> None:
    """NOT_COMPANY_OWNED is accurate: the records have no company and both companies read the same."""
    assert "company_id" not in Asset.__table__.c, "catalog assets became company-owned: walk them instead"
    document = client.get(f"{API}/openapi.json").json()
    listed = {operation.key: operation for operation in operations(document)}
    failures = []
    for key in NOT_COMPANY_OWNED:
        operation = listed.get(key)
        if operation is None:
            failures.append(f"{key[0]} {key[1]}: listed as not company-owned but not in the document")
            continue
        missing = [name for name in operation.path_params if name not in first.shared]
        if missing:
            failures.append(f"{operation.name}: no shared record for path parameter(s) {missing}")
            continue
        path = operation.url({name: first.shared[name] for name in operation.path_params})
        query = SHARED_QUERY.get(key, {})
        own = api.request(operation.method, path, params=query)
        theirs = other_api.request(operation.method, path, params=query)
        if own.status_code != 200 or theirs.status_code != 200 or own.json() != theirs.json():
            failures.append(
                f"{operation.name}: the first company got {show(own)}; the second got {show(theirs)}"
            )
    assert not failures, report(failures)
