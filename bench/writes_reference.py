"""The bare reference for Outfitter's two commonest writes: Starlette + asyncpg + orjson, no ORM.

    POST /api/v2/client/employees    the employee, its `employee.created` event, the outbox rows
    POST /api/v2/client/equipment    an External device (status Unassigned), its `equipment_added`
                                     history row, its `equipment.added` event, the outbox rows

It writes the same rows with the same columns as Outfitter (people/service.py create_employee,
equipment/service.py create_equipment + lifecycle.record_added, outbox.py record_events and
queue_deliveries: one delivery per enabled endpoint of the company that wants the event's type),
in one transaction per request, and does the work a correct service must do:
  * bearer token: SHA-256 digest looked up in `api_tokens` (unique index), constant-time compare,
    refused when revoked or expired, the `write` scope required, `last_used_at` stamped at most
    once a minute; every row scoped to the token's company, the actor is the token's name;
  * input validation of the same fields and bounds (plain checks), unknown fields refused;
  * a taken email / serial number in the company is 409 (the unique constraint decides, so two
    racing requests cannot both pass a check);
  * the answer is the record as Outfitter answers it (the employee; the device as the single
    retrieve renders it), which is also the event's data and the webhook payload's.

Round trips per request: token (+ stamp once a minute), BEGIN, [country], the record (with its
history row in the same statement), the event with its deliveries (one statement), COMMIT.

    REF_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/outfitter_writes_bench \
        python bench/writes_reference.py --port 8212 --workers 2
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import re
import socket
import sys
import uuid
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from uuid_utils.compat import uuid7

DATABASE_URL = os.environ.get(
    "REF_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/outfitter_writes_bench"
)
POOL_MAX = int(os.environ.get("REF_POOL_MAX", "10"))  # = Outfitter's pool_size
TOKEN_PREFIX = "otf_"
LAST_USED_RESOLUTION = timedelta(minutes=1)
EQUIPMENT_TYPES = {"Laptop", "Workstation", "Laptop/Workstation", "Phones", "Accessories", "Tablet"}
EQUIPMENT_STATES = {"Brand_New", "Used"}
SCORED_FIELDS = (
    "serial_number",
    "purchase_date",
    "purchase_price",
    "make",
    "model",
    "year",
    "type",
    "state",
    "image_url",
    "specs.memory",
    "specs.storage",
    "country",
)
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_PHONE = re.compile(r"^\+?[0-9][0-9 ()\-.]{3,48}$")
_YEAR = re.compile(r"^\d{4}$")

pool: asyncpg.Pool | None = None


# --- responses ----------------------------------------------------------------------------------


class Refused(Exception):
    def __init__(self, status: int, message: str, errors: dict[str, list[str]] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.errors = status, message, errors


def invalid(field: str, message: str) -> Refused:
    return Refused(422, f"{field}: {message}", {field: [message]})


def answer(status: int, body: dict[str, Any]) -> Response:
    return Response(
        orjson.dumps(body),
        status_code=status,
        media_type="application/json",
        headers={"x-request-id": uuid.uuid4().hex},
    )


def refusal(error: Refused) -> Response:
    body: dict[str, Any] = {"success": False, "message": error.message, "data": None}
    if error.errors:
        body["errors"] = error.errors
    return answer(error.status, body)


def ts(value: datetime | None) -> str | None:
    return (
        None
        if value is None
        else value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    )


# --- auth ---------------------------------------------------------------------------------------

AUTH_SQL = """
SELECT id, company_id, name, token_hash, scopes, expires_at, revoked_at, last_used_at
FROM api_tokens WHERE token_hash = $1
"""
STAMP_SQL = "UPDATE api_tokens SET last_used_at = $2, updated_at = $2 WHERE id = $1"


async def authenticate(conn: asyncpg.Connection, request: Request, scope: str) -> asyncpg.Record:
    header = request.headers.get("authorization")
    if not header:
        raise Refused(401, "Authentication required: send the header 'Authorization: Bearer <token>'.")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Refused(401, "Malformed Authorization header: expected 'Bearer <token>'.")
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        raise Refused(401, "Invalid token.")
    digest = hashlib.sha256(token.encode()).hexdigest()
    record = await conn.fetchrow(AUTH_SQL, digest)
    if record is None or not hmac.compare_digest(record["token_hash"], digest):
        raise Refused(401, "Invalid token.")
    now = datetime.now(UTC)
    if record["revoked_at"] is not None:
        raise Refused(401, "The token has been revoked.")
    if record["expires_at"] is not None and record["expires_at"] <= now:
        raise Refused(401, "The token has expired.")
    if scope not in record["scopes"].split():
        raise Refused(403, f"This token lacks the '{scope}' scope needed for this request.")
    if record["last_used_at"] is None or now - record["last_used_at"] > LAST_USED_RESOLUTION:
        await conn.execute(STAMP_SQL, record["id"], now)
    return record


async def json_body(request: Request) -> dict[str, Any]:
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        raise Refused(422, "body: the request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise invalid("body", "Input should be a valid dictionary or object")
    return body


def text(body: dict[str, Any], name: str, max_length: int, *, required: bool = False) -> str | None:
    """A string field stripped; blank is None (422 when required)."""
    value = body.get(name)
    if value is None:
        if required:
            raise invalid(name, "Field required")
        return None
    if not isinstance(value, str):
        raise invalid(name, "Input should be a valid string")
    value = value.strip()
    if len(value) > max_length:
        raise invalid(name, f"String should have at most {max_length} characters")
    if not value:
        if required:
            raise invalid(name, "String should have at least 1 character")
        return None
    return value


def unknown_fields(body: dict[str, Any], known: set[str]) -> None:
    extra = sorted(set(body) - known)
    if extra:
        raise invalid(extra[0], "Extra inputs are not permitted")


# --- the event and its outbox rows: one statement -------------------------------------------------

# outbox.py record_events + queue_deliveries: the event row, then one delivery per enabled
# endpoint of the company whose event_types are empty (all) or name the event's type. Ids are
# version 7 UUIDs, as Outfitter's (db.base.new_id and time_ordered_uuid).
EVENT_SQL = """
WITH event AS (
  INSERT INTO events (id, company_id, type, subject_type, subject_id, actor, created_at, data)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8::json)
  RETURNING id
)
INSERT INTO webhook_deliveries (id, company_id, endpoint_id, event_id, event_type, payload, status, attempts,
                                round_started_at, round_attempts, next_attempt_at, created_at)
SELECT CAST(encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING
         substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
         FROM 1 FOR 6), 52, 1), 53, 1), 'hex') AS uuid),
       $2, w.id, event.id, $3, $9::json, 'pending', 0, $7, 0, $7, $7
FROM event, webhook_endpoints w
WHERE w.company_id = $2 AND w.enabled
  AND (json_array_length(w.event_types) = 0 OR w.event_types::jsonb ? $3)
"""


async def record_event(
    conn: asyncpg.Connection,
    company: uuid.UUID,
    type_: str,
    subject: str,
    subject_id: uuid.UUID,
    actor: str,
    data: dict[str, Any],
) -> None:
    event_id, now = uuid7(), datetime.now(UTC)
    payload = {"id": str(event_id), "type": type_, "timestamp": ts(now), "data": data}
    await conn.execute(
        EVENT_SQL,
        event_id,
        company,
        type_,
        subject,
        subject_id,
        actor,
        now,
        orjson.dumps(data).decode(),
        orjson.dumps(payload).decode(),
    )


# --- POST /client/employees ---------------------------------------------------------------------

EMPLOYEE_FIELDS = {
    "first_name",
    "last_name",
    "email",
    "country_id",
    "phone",
    "address",
    "personal_email",
    "landmark",
    "job_title",
    "tax_number",
    "employment_type",
}
COUNTRY_SQL = """
SELECT id, name, code, currency_code FROM countries
WHERE ($1::text ~* '^[0-9a-f-]{36}$' AND id::text = lower($1)) OR lower(name) = lower($1) OR code = upper($1)
LIMIT 1
"""
INSERT_EMPLOYEE_SQL = """
INSERT INTO employees (id, company_id, first_name, last_name, email, personal_email, phone, country_id,
                       address, landmark, job_title, tax_number, employment_type, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14)
ON CONFLICT (company_id, email) DO NOTHING
RETURNING id
"""


def email(body: dict[str, Any], name: str, *, required: bool) -> str | None:
    value = text(body, name, 320, required=required)
    if value is not None and not _EMAIL.match(value):
        raise invalid(name, "Not a valid email address.")
    return None if value is None else value.lower()


def employee_fields(body: dict[str, Any]) -> dict[str, Any]:
    unknown_fields(body, EMPLOYEE_FIELDS)
    fields = {
        "first_name": text(body, "first_name", 100, required=True),
        "last_name": text(body, "last_name", 100, required=True),
        "email": email(body, "email", required=True),
        "country_id": text(body, "country_id", 100, required=True),
        "phone": text(body, "phone", 50, required=True),
        "address": text(body, "address", 500, required=True),
        "personal_email": email(body, "personal_email", required=False),
        "landmark": text(body, "landmark", 200),
        "job_title": text(body, "job_title", 200),
        "tax_number": text(body, "tax_number", 100),
        "employment_type": text(body, "employment_type", 50),
    }
    if not _PHONE.match(fields["phone"]):
        raise invalid("phone", "Not a valid phone number: use digits, spaces, '+', '-', '.' or parentheses.")
    return fields


async def create_employee(request: Request) -> Response:
    assert pool is not None
    try:
        async with pool.acquire() as conn:
            token = await authenticate(conn, request, "write")
            fields = employee_fields(await json_body(request))
            company = token["company_id"]
            async with conn.transaction():
                country = await conn.fetchrow(COUNTRY_SQL, fields["country_id"])
                if country is None:
                    raise invalid(
                        "country_id",
                        f"Unknown country {fields['country_id']!r}: "
                        "give a country id, name or two-letter code "
                        "(see /client/countries).",
                    )
                employee_id, now = uuid7(), datetime.now(UTC)
                inserted = await conn.fetchval(
                    INSERT_EMPLOYEE_SQL,
                    employee_id,
                    company,
                    fields["first_name"],
                    fields["last_name"],
                    fields["email"],
                    fields["personal_email"],
                    fields["phone"],
                    country["id"],
                    fields["address"],
                    fields["landmark"],
                    fields["job_title"],
                    fields["tax_number"],
                    fields["employment_type"],
                    now,
                )
                if inserted is None:
                    raise Refused(
                        409, f"An employee with the email {fields['email']} already exists in this company."
                    )
                data = {
                    "id": str(employee_id),
                    **{k: fields[k] for k in ("first_name", "last_name", "email", "personal_email", "phone")},
                    "country": country["name"],
                    "country_code": country["code"],
                    "currency_code": country["currency_code"],
                    "landmark": fields["landmark"],
                    "last_login": None,
                    **{k: fields[k] for k in ("job_title", "tax_number", "employment_type")},
                    "level": None,
                    "status": None,
                    "address": fields["address"],
                    "departments": [],
                    "catalogs": None,
                    "equipment": [],
                    "orders": [],
                    "open_retrievals": [],
                    "created_at": ts(now),
                    "updated_at": ts(now),
                }
                await record_event(
                    conn, company, "employee.created", "employee", employee_id, token["name"], data
                )
    except Refused as error:
        return refusal(error)
    return answer(201, {"success": True, "message": "Employee created successfully.", "data": data})


# --- POST /client/equipment (an External device, Unassigned) -------------------------------------

EQUIPMENT_FIELDS = {
    "title",
    "make",
    "model",
    "year",
    "type",
    "state",
    "serial_number",
    "description",
    "image_url",
    "other_details",
    "specs",
    "status",
}
# lifecycle.record_added: the device and its `equipment_added` history entry (seq 1), one statement;
# ON CONFLICT on the company's unique serial number makes a taken serial no row at all.
INSERT_EQUIPMENT_SQL = """
WITH device AS (
  INSERT INTO equipment (id, company_id, title, make, model, year, type, state, source, status, serial_number,
                         description, image_url, other_details, specs, memory_key, storage_key, documents,
                         status_changed_at, created_at, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'External', 'Unassigned', $9, $10, $11, $12::json, $13::json,
          $14, $15, '[]'::json, $16, $16, $16)
  ON CONFLICT (company_id, serial_number) DO NOTHING
  RETURNING id, company_id
)
INSERT INTO equipment_history (id, company_id, equipment_id, event_type, event_date, seq, actor, payload)
SELECT $17, device.company_id, device.id, 'equipment_added', $18, 1, $19, 'null'::json FROM device
RETURNING id
"""


def fold_spec(value: str | None) -> str | None:
    return None if value is None else "".join(value.split()).lower()[:50] or None


def equipment_fields(body: dict[str, Any]) -> dict[str, Any]:
    unknown_fields(body, EQUIPMENT_FIELDS)
    status = body.get("status", "Unassigned")
    if status != "Unassigned":
        raise invalid("status", "The reference registers Unassigned devices only.")
    fields: dict[str, Any] = {
        "title": text(body, "title", 300, required=True),
        "make": text(body, "make", 100),
        "model": text(body, "model", 200),
        "year": text(body, "year", 4),
        "type": text(body, "type", 50),
        "state": text(body, "state", 50),
        "serial_number": text(body, "serial_number", 200),
        "description": text(body, "description", 4000) or "",
        "image_url": text(body, "image_url", 1000),
    }
    if fields["year"] is not None and not _YEAR.match(fields["year"]):
        raise invalid("year", "String should match pattern '^\\d{4}$'")
    if fields["type"] is not None and fields["type"] not in EQUIPMENT_TYPES:
        raise invalid("type", f"Input should be one of {', '.join(sorted(EQUIPMENT_TYPES))}")
    if fields["state"] is not None and fields["state"] not in EQUIPMENT_STATES:
        raise invalid("state", "Input should be 'Brand_New' or 'Used'")
    other = body.get("other_details") or []
    if not isinstance(other, list) or len(other) > 100 or not all(isinstance(item, str) for item in other):
        raise invalid("other_details", "A list of at most 100 strings.")
    fields["other_details"] = other
    specs_in = body.get("specs") or {}
    if not isinstance(specs_in, dict) or set(specs_in) - {"memory", "storage", "color"}:
        raise invalid("specs", "An object with memory, storage and color only.")
    specs = {}
    for key in ("memory", "storage", "color"):
        value = text(specs_in, key, 50)
        if value is not None:
            specs[key] = value
    fields["specs"] = specs
    return fields


def missing_information(fields: dict[str, Any]) -> list[str]:
    values = {**fields, "purchase_date": None, "purchase_price": None, "country": None}
    values["specs.memory"] = fields["specs"].get("memory")
    values["specs.storage"] = fields["specs"].get("storage")
    return [name for name in SCORED_FIELDS if values[name] is None or values[name] == ""]


def equipment_detail(
    fields: dict[str, Any],
    equipment_id: uuid.UUID,
    history_id: uuid.UUID,
    now: datetime,
    added: datetime,
    actor: str,
) -> dict[str, Any]:
    """The device as GET /client/equipment/{id} answers it (presenters.detail): no currency,
    country or assignee on a device registered with none."""
    missing = missing_information(fields)
    specs = fields["specs"]
    return {
        "id": str(equipment_id),
        "title": fields["title"],
        "year": fields["year"],
        "make": fields["make"],
        "model": fields["model"],
        "state": fields["state"],
        "source": "External",
        "purchase_date": None,
        "purchase_price": None,
        "type": fields["type"],
        "hash_code": None,
        "asset_order_id": None,
        "catalog": None,
        "currency": None,
        "image_url": fields["image_url"],
        "serial_number": fields["serial_number"],
        "other_details": json.dumps(fields["other_details"]),  # a JSON string, as Outfitter answers it
        "specs": {key: specs.get(key) for key in ("memory", "storage", "color")},
        "description": fields["description"],
        "status": "Unassigned",
        "country": None,
        "country_code": None,
        "created_at": ts(now),
        "updated_at": ts(now),
        "assignee": None,
        "history": [
            {
                "id": str(history_id),
                "event_type": "equipment_added",
                "event_date": ts(added),
                "assignee": None,
                "equipment": fields["title"],
                "actor": actor,
                "payload": None,
            }
        ],
        "device_setup": None,
        "score": round(100 * (len(SCORED_FIELDS) - len(missing)) / len(SCORED_FIELDS)),
        "missing_information": missing,
        "has_missing_information": bool(missing),
        "insurance_expiring_in": None,
        "usage_duration": "Unknown",
        "storage_duration": None,
        "documents": [],
    }


async def create_equipment(request: Request) -> Response:
    assert pool is not None
    try:
        async with pool.acquire() as conn:
            token = await authenticate(conn, request, "write")
            fields = equipment_fields(await json_body(request))
            company, actor = token["company_id"], token["name"]
            equipment_id, history_id = uuid7(), uuid7()
            now = datetime.now(UTC)
            added = datetime.now(UTC)
            async with conn.transaction():
                written = await conn.fetchval(
                    INSERT_EQUIPMENT_SQL,
                    equipment_id,
                    company,
                    fields["title"],
                    fields["make"],
                    fields["model"],
                    fields["year"],
                    fields["type"],
                    fields["state"],
                    fields["serial_number"],
                    fields["description"],
                    fields["image_url"],
                    orjson.dumps(fields["other_details"]).decode(),
                    orjson.dumps(fields["specs"]).decode(),
                    fold_spec(fields["specs"].get("memory")),
                    fold_spec(fields["specs"].get("storage")),
                    now,
                    history_id,
                    added,
                    actor,
                )
                if written is None:
                    raise Refused(
                        409,
                        f"Equipment with serial number '{fields['serial_number']}' "
                        "already exists in this company.",
                    )
                data = equipment_detail(fields, equipment_id, history_id, now, added, actor)
                await record_event(conn, company, "equipment.added", "equipment", equipment_id, actor, data)
    except Refused as error:
        return refusal(error)
    return answer(201, {"success": True, "message": "Equipment created successfully.", "data": data})


# --- app ----------------------------------------------------------------------------------------


@asynccontextmanager
async def lifespan(_: Starlette):  # type: ignore[no-untyped-def]
    global pool
    pool = await asyncpg.create_pool(DATABASE_URL, min_size=2, max_size=POOL_MAX)
    try:
        yield
    finally:
        await pool.close()


app = Starlette(
    routes=[
        Route("/api/v2/client/employees", create_employee, methods=["POST"]),
        Route("/api/v2/client/equipment", create_equipment, methods=["POST"]),
    ],
    lifespan=lifespan,
)


def main() -> None:
    """uvicorn with N workers on a listening socket made with IPPROTO_TCP, so that TCP_NODELAY is
    set on every connection (../shared/perf/serve_nodelay.py: otherwise each answer waits ~40 ms
    for the client's delayed ACK with more than one worker)."""
    import uvicorn
    import uvicorn.config

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8212)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    original = uvicorn.config.Config.bind_socket

    def bind_socket(self: uvicorn.config.Config) -> socket.socket:
        sock = original(self)
        return socket.socket(sock.family, socket.SOCK_STREAM, socket.IPPROTO_TCP, fileno=sock.detach())

    uvicorn.config.Config.bind_socket = bind_socket  # type: ignore[method-assign]
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    uvicorn.run(
        "writes_reference:app",
        host="127.0.0.1",
        port=args.port,
        workers=args.workers,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
