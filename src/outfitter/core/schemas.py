"""Response shapes and field types that every domain shares: the envelope, pages, timestamps, money."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from types import UnionType
from typing import Annotated, Any, Generic, TypeVar, Union, get_args, get_origin

import orjson
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    PlainSerializer,
    Tag,
    TypeAdapter,
    WithJsonSchema,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from outfitter.core.timestamps import format_timestamp

T = TypeVar("T")


# Documented as what it is on the wire: a date-time string (the serializer alone says only "string").
Timestamp = Annotated[
    datetime,
    PlainSerializer(format_timestamp, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}, mode="serialization"),
]
_DATE_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}")  # ASCII digits only
# A time whose offset's "+" came as a space: a query string's "+" is a space unless sent as %2B.
_OFFSET_AS_SPACE = re.compile(r"[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)? [0-9]{2}(:?[0-9]{2})?$")
GIVE_A_DATE_TIME = "Give an ISO 8601 date and time, such as 2026-01-31T09:30:00Z."


def _date_time_text(value: object) -> object:
    """Only a date and time written out: never a number, which Pydantic would read as unix seconds;
    parsed here, so that a time that does not exist (hour 25, 30 February) or an offset whose "+"
    became a space is said in words a person can act on, not the parser's."""
    if not isinstance(value, str) or not _DATE_TIME.match(value):
        raise ValueError(GIVE_A_DATE_TIME)
    if _OFFSET_AS_SPACE.search(value):
        raise ValueError(
            "The offset's '+' arrived as a space: in a query string send it as %2B "
            "(2026-01-31T09:30:00%2B05:30), or give the time in UTC (2026-01-31T04:00:00Z)."
        )
    try:
        return datetime.fromisoformat(value)
    except ValueError as error:
        if str(error).startswith("Invalid isoformat"):  # not the form (text after it, say)
            raise ValueError(GIVE_A_DATE_TIME) from None
        if str(error).startswith("offset must be a timedelta"):  # +24:00 and beyond
            raise ValueError(
                f"{GIVE_A_DATE_TIME[:-1]}: this one's offset does not exist (an offset is between "
                "-23:59 and +23:59)."
            ) from None
        # the form, but no such time: "hour must be in 0..23", "day is out of range for month"
        raise ValueError(f"{GIVE_A_DATE_TIME[:-1]}: this one does not exist ({error}).") from None


# A time a client gives in a query (`since`, `updated_since`).
DateTimeText = Annotated[datetime, BeforeValidator(_date_time_text)]


def _whole_number_text(value: object) -> object:
    """A whole number as people write one in a query: ASCII digits and nothing else. Pydantic's
    reading of a text also takes "1_0" (as 10), "+2", " 2" and "2.0"."""
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("Give a whole number in digits, such as 2.")
    return value


# A whole number a client gives in a query (`page`, `per_page`, `limit`).
WholeNumberText = BeforeValidator(_whole_number_text)


def _json_whole_number(value: object) -> object:
    """A JSON number with no fraction, such as 4.0, is an integer to JSON Schema (and so to the
    clients that validate by it): read it as one. Text, booleans and fractions stay refused."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# Before a StrictInt of a JSON body: 4 and 4.0 are taken, "4", true and 4.5 are not.
JsonWholeNumber = BeforeValidator(_json_whole_number)


# What no one sees: every space (spelled out: JSON Schema's `\s` and Python's differ) and the
# format characters and fillers that print nothing (zero-width space and joiners, bidi controls,
# soft hyphen, variation selectors, Hangul fillers, the byte order mark).
_INVISIBLE = (
    "\\t\\n\\v\\f\\r\\x1c-\\x20\\x85\\xa0\\u00ad\\u034f\\u061c\\u115f\\u1160\\u1680\\u17b4\\u17b5"
    "\\u180b-\\u180f\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0"
)
VISIBLE_PATTERN = f"[^{_INVISIBLE}]"
_VISIBLE = re.compile(VISIBLE_PATTERN)
NOTHING_VISIBLE = "Give at least one visible character: spaces and invisible characters alone are blank."


def _visible(value: str) -> str:
    if value.isascii() and value.strip():  # the common case: a printable ASCII character is visible
        return value
    if _VISIBLE.search(value) is None:
        raise ValueError(NOTHING_VISIBLE)
    return value


# A one-line value (a person's or a department's name) holds no control character: a line break
# or a BEL in a name breaks every list that shows it, and one that prints nothing makes two names
# look the same.
# Its pattern lets the ends hold what the server strips first (Unicode's White_Space, as pydantic
# strips it), so that the document says exactly what is accepted.
_CONTROL = "\\x00-\\x1f\\x7f-\\x9f"
_STRIPPED = "\\t\\n\\v\\f\\r\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
ONE_LINE_VISIBLE_PATTERN = (
    f"^[{_STRIPPED}]*[^{_CONTROL}]*[^{_INVISIBLE}{_CONTROL}][^{_CONTROL}]*[{_STRIPPED}]*$"
)
_CONTROL_CHARACTER = re.compile(f"[{_CONTROL}]")
NOT_ONE_LINE = "Give it on one line: line breaks, tabs and other control characters are not allowed."


def visible_on_one_line(value: str) -> str:
    """`value` if it shows something and is on one line, else ValueError saying which it is not."""
    value = _visible(value)
    if _CONTROL_CHARACTER.search(value):
        raise ValueError(NOT_ONE_LINE)
    return value


class Visible:
    """A text field that must show something: refuses a value made only of spaces and invisible
    characters (a name of zero-width spaces looks blank in every list), and documents the rule as
    the field's pattern; with `one_line`, a control character too (line breaks, tabs).
    `Annotated[str, StringConstraints(...), Visible()]`."""

    def __init__(self, one_line: bool = False) -> None:
        self.check = visible_on_one_line if one_line else _visible
        self.pattern = ONE_LINE_VISIBLE_PATTERN if one_line else VISIBLE_PATTERN

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {**handler(schema), "pattern": self.pattern}


# An absolute http(s) URL with no space or control character: where a payer is redirected (a CR/LF
# would reach the Location header) and what a client shows as an image (no javascript:).
WEB_URL_PATTERN = r"^[Hh][Tt][Tt][Pp][Ss]?://[^\x00-\x20\x7f-\x9f]+$"
WEB_URL = re.compile(WEB_URL_PATTERN)


NOT_BLANK = Visible()  # after the value is stripped: one character that shows is needed
ONE_LINE = Visible(one_line=True)  # and no line break or other control character


# Money on the wire, in every answer: a decimal string, never a JSON number (a float would round
# it). One schema everywhere, so that a generated client has one money type; the one exception is
# the initiate answer's amounts, JSON numbers clients code against (`payments.schemas.InitiateAmount`).
MONEY_PATTERN = r"^-?[0-9]+(\.[0-9]+)?$"
MONEY_SCHEMA: dict[str, Any] = {"type": "string", "pattern": MONEY_PATTERN, "examples": ["1299.99"]}
Money = Annotated[
    Decimal,
    PlainSerializer(lambda value: format(value, "f"), return_type=str),
    WithJsonSchema(MONEY_SCHEMA, mode="serialization"),
]


class Documented:
    """Adds what a validator enforces to a type's JSON schema, validation unchanged:
    `Annotated[str, AfterValidator(_email), Documented(format="email")]`. Unlike `Field`, it also
    works inside a union (`Email | None`): it documents the branch it annotates."""

    def __init__(self, **keywords: Any) -> None:
        self.keywords = keywords

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {**handler(schema), **self.keywords}


def _query_bool(value: object) -> object:
    if isinstance(value, bool):  # a default
        return value
    if value in ("true", "false"):
        return value == "true"
    raise ValueError("Expected true or false.")


# A query parameter's boolean: exactly `true` or `false`; pydantic alone would take yes, 1, on...
QueryBool = Annotated[bool, BeforeValidator(_query_bool)]


# An id the service reads as text, so that a malformed one is a 422 naming its field (or a 404 in
# a path) rather than the body's shape: documented as the UUID it must be.
UuidText = Annotated[str, Documented(format="uuid")]


class DocumentedAs:
    """Validates as the annotated type, documents as `shape`: for a field the service checks item by
    item itself, to report every item's errors at its path (`employees.3.email`), but whose items a
    client should see typed: `Annotated[list[Any], DocumentedAs(list[EmployeeCreate])]`."""

    def __init__(self, shape: Any) -> None:
        self.shape = shape

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        from pydantic import TypeAdapter

        return handler(TypeAdapter(self.shape).core_schema)


class NotNull:
    """Documents an optional field that may be left out but not sent as null (the service refuses
    null with a 422): its schema loses the `null` branch that its `X | None` type gives it."""

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        documented = dict(handler(schema))
        branches = [branch for branch in documented.pop("anyOf", []) if branch.get("type") != "null"]
        if len(branches) == 1:
            documented.update(branches[0])
        elif branches:
            documented["anyOf"] = branches
        return documented


class OneOf:
    """Narrows a StrEnum field to some of its members: `Annotated[EquipmentStatus, OneOf(...)]`.

    Validated and documented as the choice of their values (the OpenAPI enum lists only them, and
    any other value gets the same readable 422 as a value outside a whole enum: "Input should be
    'Unassigned', 'In_Storage' or 'Assigned'"); the code receives the enum member."""

    def __init__(self, *members: StrEnum) -> None:
        if not members or len({type(member) for member in members}) != 1:
            raise TypeError("OneOf takes one or more members of the same StrEnum")
        self.members = members

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(
            type(self.members[0]),
            core_schema.literal_schema([member.value for member in self.members]),
            serialization=core_schema.plain_serializer_function_ser_schema(str, when_used="json"),
        )


class Schema(BaseModel):
    model_config = ConfigDict(from_attributes=True, populate_by_name=True)


@dataclass(frozen=True)
class ComponentName:
    """Names an annotated type in the OpenAPI document's generic model names."""

    name: str


def component_name(annotation: Any) -> str:
    """A readable name for a type argument: EmployeeOut, EmployeeOutList, StringMap..."""
    origin, arguments = get_origin(annotation), get_args(annotation)
    named = [meta.name for meta in getattr(annotation, "__metadata__", ()) if isinstance(meta, ComponentName)]
    if named:
        return named[0]
    if origin is list:
        return f"{component_name(arguments[0])}List"
    if origin is dict:
        return f"{component_name(arguments[1])}Map"
    if origin in (Union, UnionType):
        return "Or".join(component_name(argument) for argument in arguments)
    if annotation is str:
        return "String"
    return str(getattr(annotation, "__name__", annotation))


class _Named:
    """Generic models named like `OrderOutPageEnvelope` in the OpenAPI document, not
    `Envelope_Page_OrderOut__`: names a generated client can use as they are."""

    @classmethod
    def model_parametrized_name(cls, params: tuple[Any, ...]) -> str:
        base = cls.__name__.split("[")[0]
        return "".join(component_name(param) for param in params) + base


class Envelope(_Named, Schema, Generic[T]):
    success: bool = True
    message: str
    data: T


class Page(_Named, Schema, Generic[T]):
    data: list[T]
    total: int
    per_page: int
    current_page: int
    last_page: int


class CursorPage(_Named, Schema, Generic[T]):
    """A page in cursor mode (db.keyset): no counters; `next_cursor` is None at the end."""

    data: list[T]
    next_cursor: str | None
    limit: int


def page_mode(value: Any) -> str:
    fields = value if isinstance(value, dict) else vars(value)
    return "cursor" if "next_cursor" in fields else "page"


def paged(item: Any, cursor_item: Any = None) -> Any:
    """A list's `data`: a `Page` of `item`, or a `CursorPage` (of `cursor_item`, `item` by
    default), told apart by `next_cursor` alone, so that a page is validated once."""
    page, cursor_page = Page[item], CursorPage[cursor_item or item]  # type: ignore[misc]
    return Annotated[
        Annotated[page, Tag("page")] | Annotated[cursor_page, Tag("cursor")],
        Discriminator(page_mode),
        ComponentName(f"{component_name(item)}Listing"),
    ]


def list_envelope(item: Any, cursor_item: Any = None) -> Any:
    """The response model of a list with both modes: `Envelope[paged(item, cursor_item)]`."""
    return Envelope[paged(item, cursor_item)]  # type: ignore[misc]


class ErrorEnvelope(Schema):
    success: bool = False
    message: str
    data: None = None
    errors: dict[str, list[str]] | None = None


def counted(count: int, one: str, many: str) -> str:
    """'1 employee', '2 employees': a count and its noun, for messages."""
    return f"{count} {one if count == 1 else many}"


def ok(data: Any, message: str) -> dict[str, Any]:
    return {"success": True, "message": message, "data": data}


# --- answers rendered by orjson ------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    """What orjson leaves to us, written as the response models write it."""
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, uuid.UUID):  # asyncpg's own UUID class, which orjson does not know
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    raise TypeError(type(value).__name__)


def render_json(content: Any) -> bytes:
    """The bytes the response model renders for `content` (an answer built for it), through orjson;
    raises orjson.JSONEncodeError for what it cannot write the same way (an integer past 64 bits)."""
    return orjson.dumps(content, default=_json_default, option=orjson.OPT_PASSTHROUGH_DATETIME)


_adapters: dict[Any, TypeAdapter[Any]] = {}


def adapter_of(schema: Any) -> TypeAdapter[Any]:
    """The process's one TypeAdapter of `schema` (building one costs far more than using it)."""
    adapter = _adapters.get(schema)
    if adapter is None:
        adapter = _adapters[schema] = TypeAdapter(schema)
    return adapter


def render_as(schema: Any, content: Any) -> bytes:
    """`content`, built for `schema` (a record as presenters build it), as the JSON bytes `schema`
    renders: by orjson, or by `schema` itself for what orjson cannot write the same way."""
    try:
        return render_json(content)
    except orjson.JSONEncodeError:
        adapter = adapter_of(schema)
        return adapter.dump_json(adapter.validate_python(content), by_alias=True)


@dataclass(frozen=True, slots=True)
class Rendered:
    """An endpoint's answer already rendered: `UnitOfWorkRoute` sends these bytes as they are, with
    the route's status code, instead of validating and rendering a value against its response
    model. Only for answers built by `render_as`/`rendered_ok`, whose bytes the tests prove equal
    to the response model's (the write path's records: rendered once, for the answer and for the
    data of the events it records)."""

    body: bytes


def rendered_ok(data: bytes | Sequence[bytes], message: str) -> Rendered:
    """`ok(data, message)` rendered, with `data` a record already rendered, or a list of them."""
    records = orjson.Fragment(data) if isinstance(data, bytes) else [orjson.Fragment(item) for item in data]
    return Rendered(orjson.dumps({"success": True, "message": message, "data": records}))


ERROR_DESCRIPTIONS = {
    400: "A request that cannot be read: malformed JSON or framing, several Authorization headers",
    401: "Missing, unknown, expired or revoked token",
    402: "Not enough wallet credit",
    403: "The token lacks the scope",
    404: "Not found (or another company's)",
    409: "Conflicts with the current state",
    413: "Body over the size limit",
    415: "Body is not JSON",
    422: "Validation failed; `errors` maps each field path to its messages",
    429: "Rate limited; see Retry-After",
    500: "An unexpected error; the message carries the request id",
    502: "The payment gateway did not answer",
    503: "The database is unreachable or busy; see Retry-After",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI error responses of an endpoint's own rules (404 of a lookup, 409, 402...); the ones
    every operation shares (401, 403, 422, 429, 500, 503...) are added by `http.openapi`."""
    return {code: {"model": ErrorEnvelope, "description": ERROR_DESCRIPTIONS[code]} for code in sorted(codes)}
