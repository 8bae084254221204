"""PATCH (RFC 7644 section 3.5.2) as identity providers send it: the resource is read as a
scim2-models object, the operations are applied to it by scim2-models, and the result is written
back like a PUT. Before that, the known departures of Entra ID and Okta from the RFC are rewritten
into what the RFC says they mean:

- `{"op": "Remove", "path": "members", "value": [{"value": ID}, ...]}` (Entra): remove those members,
  i.e. `members[value eq "ID"]` for each;
- a path-less operation whose value names attributes by a value path, e.g.
  `{"emails[type eq \\"work\\"].value": "x"}` (Entra): one operation per such key;
- `attr[type eq "work"].sub` when no value has that type (Entra, for phoneNumbers and addresses,
  which Outfitter keeps one of each, untyped): the primary (else first) value takes the type
  first, or a new value is added when there is none;
- emails, of which Outfitter keeps two, are read typed for the patch: the work email `work` and
  primary, the personal one `home`. A filter on another type names the personal one (or adds it):
  `emails[type eq "other"].value` never reaches the work email, the employee's identity;
- the manager as its bare id, or a list of one `{value}` (Entra): `{value, $ref}`;
- `"active": "False"` strings (Entra): pydantic reads them as booleans already.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import ValidationError
from scim2_models import (
    Context,
    InvalidSyntaxException,
    MutabilityException,
    PatchOp,
    Resource,
    SCIMException,
)

from outfitter.scim.users import ENTERPRISE_URN, TOLERANT, invalid, manager_reference

ResourceT = TypeVar("ResourceT", bound=Resource[Any])

PATCH_URN = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
_REQUIRED = frozenset({"name", "name.givenname"})  # removable by no operation (userName: scim2-models)
_MANAGER_PATH = re.compile(rf"^(?:{re.escape(ENTERPRISE_URN)}:)?manager(?:\.value)?$", re.I)
_TYPED_PATH = re.compile(
    r'^(?P<attr>[\w:.$-]*?)\[\s*type\s+eq\s+"(?P<type>[^"]*)"\s*\](?:\.(?P<sub>[\w$]+))?$', re.I
)


def operations_of(body: Any) -> list[dict[str, Any]]:
    if not isinstance(body, dict):
        raise InvalidSyntaxException(detail="The body must be a JSON object: a PatchOp.")
    operations = next((value for key, value in body.items() if key.lower() == "operations"), None)
    if not isinstance(operations, list) or not operations:
        raise InvalidSyntaxException(detail="A PatchOp needs Operations: a list of one or more operations.")
    rewritten: list[dict[str, Any]] = []
    for operation in operations:
        if not isinstance(operation, dict):
            raise InvalidSyntaxException(detail="Each operation must be a JSON object.")
        rewritten.extend(_rewrite(operation))
    return rewritten


def _rewrite(operation: dict[str, Any]) -> list[dict[str, Any]]:
    op = {key.lower(): value for key, value in operation.items()}
    kind = str(op.get("op", "")).lower()
    path = op.get("path")
    value = op.get("value")
    if path is not None and not isinstance(path, str):
        raise InvalidSyntaxException(detail='An operation\'s path is a text, such as "name.givenName".')
    if kind == "remove" and str(path).lower() in _REQUIRED:
        raise MutabilityException(detail=f"{path} cannot be removed: every employee has a first name.")
    if kind == "remove" and isinstance(path, str) and "[" not in path and isinstance(value, list):
        removals = [item.get("value") for item in value if isinstance(item, dict) and item.get("value")]
        if removals:
            return [{"op": "remove", "path": f'{path}[value eq "{member}"]'} for member in removals]
    if kind in ("add", "replace") and not path and isinstance(value, dict):
        value, managers = _without_manager(value)
        plain = {key: item for key, item in value.items() if "[" not in key}
        typed = [{"op": kind, "path": key, "value": item} for key, item in value.items() if "[" in key]
        named = [{"op": kind, "path": f"{ENTERPRISE_URN}:manager", "value": item} for item in managers]
        return (
            ([{"op": kind, "value": plain}] if plain else [])
            + typed
            + [rewritten for operation in named for rewritten in _rewrite(operation)]
        )
    if isinstance(path, str) and _MANAGER_PATH.match(path) and kind != "remove":
        # the manager's `value` alone is the manager too: replacing it by "" clears the manager
        path, value = f"{ENTERPRISE_URN}:manager", manager_reference(value)
    return [{key: item for key, item in (("op", kind), ("path", path), ("value", value)) if key in op}]


def _without_manager(value: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """A path-less operation's value without the manager, and the manager it named (its own
    operation, read as a path's is), whether keyed by its full name or in the extension's object."""
    managers: list[Any] = []
    kept: dict[str, Any] = {}
    for key, item in value.items():
        if _MANAGER_PATH.match(key):
            managers.append(item)
        elif key.lower() == ENTERPRISE_URN.lower() and isinstance(item, dict):
            managers.extend(inner for name, inner in item.items() if name.lower() == "manager")
            rest = {name: inner for name, inner in item.items() if name.lower() != "manager"}
            if rest:
                kept[key] = rest
        else:
            kept[key] = item
    return kept, managers


def apply(resource: ResourceT, operations: list[dict[str, Any]]) -> ResourceT:
    """Apply `operations` to `resource` (in place), one at a time, as scim2-models reads them."""
    patch_type: Any = PatchOp[type(resource)]  # type: ignore[misc]
    _type_emails(resource)
    for operation in operations:
        _make_typed_target(resource, operation)
        try:
            patch = patch_type.model_validate(
                {"schemas": [PATCH_URN], "Operations": [operation]},
                scim_ctx=Context.RESOURCE_PATCH_REQUEST,
                scim_policy=TOLERANT,
            )
            patch.patch(resource)
        except ValidationError as exc:
            raise invalid(exc) from None
        except SCIMException as exc:  # scim2-models words a value's validation as pydantic prints it
            if isinstance(exc.__cause__, ValidationError):
                raise invalid(exc.__cause__) from None
            raise
    return resource


def _type_emails(resource: Any) -> None:
    """The work email (rendered first) as `work` and primary, the personal one as `home`."""
    emails = list(getattr(resource, "emails", None) or [])
    for position, email in enumerate(emails[:2]):
        email.type, email.primary = ("work", True) if position == 0 else ("home", None)
    if emails:
        resource.emails = emails


def _make_typed_target(resource: Any, operation: dict[str, Any]) -> None:
    path = operation.get("path")
    if not isinstance(path, str):
        return
    match = _TYPED_PATH.match(path)
    if match is None:
        return
    field = _field_named(resource, match["attr"])
    if field is None:
        return
    values = list(getattr(resource, field) or [])
    wanted = match["type"]
    if any(str(getattr(item, "type", None) or "").lower() == wanted.lower() for item in values):
        return
    if field == "emails":  # any type but work is the personal email
        if len(values) > 1:
            values[1].type = wanted
            resource.emails = values
        elif operation.get("op") in ("add", "replace"):  # no personal email yet: it is added
            value = operation.get("value")
            if match["sub"]:
                added: dict[str, Any] | None = {"type": wanted, match["sub"]: value}
            else:
                added = {**value, "type": wanted} if isinstance(value, dict) else None
            if added is not None:
                operation["path"], operation["op"], operation["value"] = match["attr"], "add", [added]
        return
    if operation.get("op") not in ("add", "replace"):
        return
    if values:
        target = next((item for item in values if getattr(item, "primary", False)), values[0])
        target.type = wanted
        setattr(resource, field, values)
    elif match["sub"]:
        operation["path"] = match["attr"]
        operation["value"] = [{"type": wanted, match["sub"]: operation.get("value")}]
        operation["op"] = "add"


def _field_named(resource: Any, attribute: str) -> str | None:
    folded = attribute.lower().rpartition(":")[2]
    fields: dict[str, Any] = type(resource).model_fields
    for name, info in fields.items():
        if str(info.serialization_alias or name).lower() == folded:
            return str(name)
    return None
