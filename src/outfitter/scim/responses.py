"""SCIM answers: the media type, resource versions (ETags), `attributes`/`excludedAttributes`,
ListResponse, and the error body every failure under /scim/v2 is rendered as."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scim2_models import Error, ListResponse, PreconditionFailedException
from starlette.responses import Response

from outfitter.core.timestamps import format_timestamp
from outfitter.http.input_guard import LONG_NUMBER_MESSAGE, NON_JSON_NUMBER_MESSAGE
from outfitter.http.middleware import Errors

MEDIA_TYPE = "application/scim+json"
LIST_RESPONSE_URN = ListResponse.__schema__
ERROR_URN = Error.__schema__
# Never left out by `attributes` (RFC 7643 section 7: returned "always").
ALWAYS_RETURNED = frozenset({"id", "schemas"})


def scim_response(body: Any, status_code: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(
        _scim_json(body), status_code=status_code, media_type=MEDIA_TYPE, headers=dict(headers or {})
    )


def error_response(
    status: int, detail: str, scim_type: str | None = None, headers: Mapping[str, str] | None = None
) -> Response:
    return scim_response(_error(status, detail, scim_type), status, headers)


# The input guard's refusals of a body as a whole (its nesting is one by its `errors`).
_UNREADABLE_BODY = frozenset({NON_JSON_NUMBER_MESSAGE, LONG_NUMBER_MESSAGE})


def refusal(status: int, message: str, errors: Errors | None) -> tuple[int, str, bytes]:
    """A request under /scim/v2 refused before SCIM's endpoints run (`http.middleware`: a NUL in
    the path, the query or the body, a body nested too deep or holding NaN, several Authorization
    headers, a body over the limit), as a SCIM Error. A value refused is SCIM's 400 invalidValue
    (SCIM has no 422), the message naming the field; a body that is not readable JSON as a whole
    (too deep, NaN, an endless number) is invalidSyntax."""
    scim_type = None
    whole_body = message in _UNREADABLE_BODY or set(errors or {}) == {"body"}
    if whole_body:
        scim_type = "invalidSyntax"
    elif status == 422:
        scim_type = "invalidValue"
    status = 400 if status == 422 else status
    return status, MEDIA_TYPE, _scim_json(_error(status, message, scim_type))


def _error(status: int, detail: str, scim_type: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"schemas": [str(ERROR_URN)], "status": str(status), "detail": detail}
    if scim_type:
        body["scimType"] = scim_type
    return body


def _scim_json(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def version_of(resource: Mapping[str, Any]) -> str:
    """A weak ETag of everything the resource shows but its meta: it changes exactly when it does."""
    shown = {key: value for key, value in resource.items() if key != "meta"}
    digest = hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()).hexdigest()
    return f'W/"{digest[:20]}"'


def with_meta(
    resource: dict[str, Any], resource_type: str, location: str, created: datetime, modified: datetime
) -> dict[str, Any]:
    resource["meta"] = {
        "resourceType": resource_type,
        "created": format_timestamp(created),
        "lastModified": format_timestamp(modified),
        "location": location,
        "version": version_of(resource),
    }
    return resource


def check_version(if_match: str | None, resource: Mapping[str, Any]) -> None:
    """412 when the client's If-Match names another version than the current one."""
    if if_match is None or if_match.strip() == "*":
        return
    current = resource["meta"]["version"]
    wanted = {tag.strip().removeprefix("W/") for tag in if_match.split(",")}
    if current.removeprefix("W/") not in wanted:
        raise PreconditionFailedException(
            detail=f"The resource changed since the version you sent (it is now {current}); read it again."
        )


def resource_response(resource: dict[str, Any], status_code: int = 200) -> Response:
    meta = resource["meta"]
    headers = {"ETag": meta["version"]}
    if status_code == 201:
        headers["Location"] = meta["location"]
    return scim_response(resource, status_code, headers)


@dataclass(frozen=True)
class Projection:
    """`attributes` / `excludedAttributes` of a request, as (attribute, sub-attribute) pairs in
    lower case; an extension's attributes are keyed by the extension's URN."""

    included: frozenset[tuple[str, str | None]] = frozenset()
    excluded: frozenset[tuple[str, str | None]] = frozenset()

    @classmethod
    def parse(
        cls,
        attributes: str | Sequence[str] | None,
        excluded: str | Sequence[str] | None,
        core_urn: str,
        extensions: Iterable[str] = (),
    ) -> Projection:
        return cls(_names(attributes, core_urn, extensions), _names(excluded, core_urn, extensions))

    def apply(self, resource: dict[str, Any]) -> dict[str, Any]:
        if not self.included and not self.excluded:
            return resource
        shown: dict[str, Any] = {}
        for key, value in resource.items():
            folded = key.lower()
            if folded in ALWAYS_RETURNED:
                shown[key] = value
                continue
            if self.included:
                value = _keep(value, folded, self.included, keep=True)
            if self.excluded and value is not None:
                value = _keep(value, folded, self.excluded, keep=False)
            if value is not None:
                shown[key] = value
        return shown


def _names(
    value: str | Sequence[str] | None, core_urn: str, extensions: Iterable[str]
) -> frozenset[tuple[str, str | None]]:
    if not value:
        return frozenset()
    parts = value.split(",") if isinstance(value, str) else [str(part) for part in value]
    core = core_urn.lower() + ":"
    known = [urn.lower() for urn in extensions]
    names: set[tuple[str, str | None]] = set()
    for part in (part.strip().lower() for part in parts):
        if not part:
            continue
        part = part.removeprefix(core)
        extension = next((urn for urn in known if part == urn or part.startswith(urn + ":")), None)
        if extension is not None:  # the extension itself, or one of its attributes (and sub-attribute)
            names.add((extension, part[len(extension) + 1 :] or None))
            continue
        attribute, _, sub = part.partition(".")
        names.add((attribute, sub or None))
    return frozenset(names)


def _keep(value: Any, key: str, names: frozenset[tuple[str, str | None]], *, keep: bool) -> Any:
    """`value` under `key` with the named attributes kept (or left out), None when nothing is left."""
    if (key, None) in names:
        return value if keep else None
    subs = {sub for name, sub in names if name == key and sub is not None}
    if not subs:
        return None if keep else value
    if key.startswith("urn:") and isinstance(value, dict):
        # an extension: its attributes are `subs` (and their sub-attributes after a dot)
        inner = frozenset((sub.partition(".")[0], sub.partition(".")[2] or None) for sub in subs)
        kept = {
            name: part
            for name, item in value.items()
            if (part := _keep(item, name.lower(), inner, keep=keep)) is not None
        }
        return kept or None
    return _keep_subs(value, subs, keep=keep)


def _keep_subs(value: Any, subs: set[str], *, keep: bool) -> Any:
    if isinstance(value, list):
        items = [part for item in value if (part := _keep_subs(item, subs, keep=keep))]
        return items or None
    if isinstance(value, dict):
        kept = {name: item for name, item in value.items() if (name.lower() in subs) == keep}
        return kept or None
    return value if not keep else None


def list_response(resources: Iterable[dict[str, Any]], total: int, start_index: int) -> Response:
    items = list(resources)
    return scim_response(
        {
            "schemas": [str(LIST_RESPONSE_URN)],
            "totalResults": total,
            "startIndex": start_index,
            "itemsPerPage": len(items),
            "Resources": items,
        }
    )
