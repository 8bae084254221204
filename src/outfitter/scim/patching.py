"""PATCH (RFC 7644 section 3.5.2) as identity providers send it: the resource is read as a
scim2-models object, the operations are applied to it by scim2-models, and the result is written
back like a PUT. Before that, the known departures of Entra ID and Okta from the RFC are rewritten
into what the RFC says they mean:

- `{"op": "Remove", "path": "members", "value": [{"value": ID}, ...]}` (Entra): remove the values
  whose `value` is one of those, matched as values (never pasted into a filter);
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

A PATCH's cost is linear in what it names. It takes at most MAX_OPERATIONS operations, applied
together to one copy (scim2-models copies the resource whole for each PatchOp it applies). A
Group's members are kept apart, as a map of their ids, while the operations that add, replace or
remove them (whole, by a list of values, or `members[value eq "ID"]`) are applied to it: each
costs what it names, not the Group's size. Any other operation on members is applied by
scim2-models to the Group with its members.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import ValidationError
from scim2_models import (
    Context,
    Group,
    GroupMember,
    InvalidSyntaxException,
    InvalidValueException,
    MutabilityException,
    PatchOp,
    Path,
    Resource,
    SCIMException,
    ScimPolicy,
)
from scim2_models.path import CompareOperator, Comparison

from outfitter.db.tenancy import parse_uuid
from outfitter.scim.users import ENTERPRISE_URN, TOLERANT, invalid, manager_reference

ResourceT = TypeVar("ResourceT", bound=Resource[Any])

PATCH_URN = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
# Operations per PATCH (ServiceProviderConfig and docs/scim.md state it): identity providers send
# one to a few, and a Group's membership changes as lists of values in one operation.
MAX_OPERATIONS = 100
# A remove whose value lists the values to remove (Entra): scim2-models selects them by the
# comparisons it builds of them, as values.
_PATCH_POLICY = ScimPolicy(
    unknown=ScimPolicy.Unknown.ignore, remove_value_as_filter=ScimPolicy.RemoveValue.apply
)
_MEMBERS_PATH = re.compile(rf"^(?:{re.escape(str(Group.__schema__))}:)?members$", re.I)
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
    if len(operations) > MAX_OPERATIONS:
        raise InvalidValueException(
            detail=f"A PATCH takes at most {MAX_OPERATIONS} operations; this one has {len(operations):,}: "
            "send them in several requests."
        )
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
            return [{"op": "remove", "path": path, "value": [{"value": item} for item in removals]}]
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
    """Apply `operations` to `resource` (in place), in order, as scim2-models reads them: together,
    but for a typed value path, whose target is chosen from the values the operations before it
    left (`_make_typed_target`)."""
    _type_emails(resource)
    batch: list[dict[str, Any]] = []
    for operation in operations:
        typed = _TYPED_PATH.match(str(operation.get("path") or ""))
        if typed is not None:
            _patch(resource, batch)
            batch = []
            _make_typed_target(resource, operation, typed)
        batch.append(operation)
    _patch(resource, batch)
    return resource


def _patch(resource: Resource[Any], operations: list[dict[str, Any]]) -> None:
    if not operations:
        return
    patch_type: Any = PatchOp[type(resource)]  # type: ignore[misc]
    try:
        patch = patch_type.model_validate(
            {"schemas": [PATCH_URN], "Operations": operations},
            scim_ctx=Context.RESOURCE_PATCH_REQUEST,
            scim_policy=_PATCH_POLICY,
        )
        patch.patch(resource, scim_policy=_PATCH_POLICY)
    except ValidationError as exc:
        raise invalid(exc) from None
    except SCIMException as exc:  # scim2-models words a value's validation as pydantic prints it
        if isinstance(exc.__cause__, ValidationError):
            raise invalid(exc.__cause__) from None
        raise


def apply_to_group(group: Group, operations: list[dict[str, Any]]) -> Group:
    """Apply `operations` to `group` (in place): those on its members to a map of their ids, each
    at the cost of the values it names, the others (which change other attributes, so the order
    between the two kinds does not matter) together by `apply`."""
    members = _Members(group.members or [])
    group.members = None
    others: list[dict[str, Any]] = []
    for operation in (part for given in operations for part in _members_apart(given)):
        if members.apply(operation):
            continue
        if _names_members(operation):  # another form (a filter on type, a sub-attribute...)
            group.members = members.entries()
            apply(group, [*others, operation])
            others, members = [], _Members(group.members or [])
            group.members = None
        else:
            others.append(operation)
    apply(group, others)
    group.members = members.entries() or None
    return group


def _members_apart(operation: dict[str, Any]) -> list[dict[str, Any]]:
    """A path-less operation's members as an operation of their own, on `members`."""
    value = operation.get("value")
    if operation.get("path") or not isinstance(value, dict):
        return [operation]
    named = [key for key in value if _MEMBERS_PATH.match(key)]
    if len(named) != 1:
        return [operation]
    rest = {key: item for key, item in value.items() if key != named[0]}
    members = {"op": operation.get("op"), "path": "members", "value": value[named[0]]}
    return ([{**operation, "value": rest}] if rest else []) + [members]


def _names_members(operation: dict[str, Any]) -> bool:
    path, value = operation.get("path"), operation.get("value")
    if isinstance(path, str):
        return path.lower().partition("[")[0].rpartition(":")[2].startswith("members")
    return isinstance(value, dict) and any(str(key).lower().endswith("members") for key in value)


class _Members:
    """A Group's members by their ids (the canonical text of a UUID, else the value as sent)."""

    def __init__(self, entries: list[GroupMember]) -> None:
        self.by_id: dict[str, GroupMember] = {}
        for entry in entries:
            self.by_id.setdefault(_member_id(entry.value), entry)

    def entries(self) -> list[GroupMember]:
        return list(self.by_id.values())

    def apply(self, operation: dict[str, Any]) -> bool:
        """Apply `operation` if it is one of the forms kept here; whether it was."""
        op, path, value = operation.get("op"), operation.get("path"), operation.get("value")
        if not isinstance(path, str):
            return False
        if not _MEMBERS_PATH.match(path):
            removed = _member_selected(path) if op == "remove" and value is None else None
            if removed is None:
                return False
            self.by_id.pop(removed, None)
            return True
        if op == "remove" and value is None:
            self.by_id.clear()
            return True
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            return False
        if op == "remove":
            if not all(isinstance(item.get("value"), str) for item in value):
                return False
            for item in value:
                self.by_id.pop(_member_id(item["value"]), None)
            return True
        added = _members_of(value)
        if added is None or op not in ("add", "replace"):
            return False
        if op == "replace":
            self.by_id.clear()
        for entry in added:
            self.by_id.setdefault(_member_id(entry.value), entry)
        return True


def _member_id(value: str | None) -> str:
    parsed = parse_uuid(value) if value else None
    return str(parsed) if parsed is not None else str(value)


def _member_selected(path: str) -> str | None:
    """The id `members[value eq "ID"]` selects; None for any other path."""
    try:
        parsed = Path[Group](path)
    except (SCIMException, ValueError):
        return None
    binding = parsed.resolve()
    selection = parsed.value_filter
    if (
        binding is None
        or binding.field_name != "members"
        or binding.sub_field_name is not None
        or not isinstance(selection, Comparison)
        or selection.op != CompareOperator.eq
        or str(selection.attr_path).lower() != "value"
        or not isinstance(selection.value, str)
    ):
        return None
    return _member_id(selection.value)


def _members_of(values: list[dict[str, Any]]) -> list[GroupMember] | None:
    """The members a list of values names, each with its id; None when one is not read so (it is
    then scim2-models' to apply, and to refuse)."""
    entries = []
    for value in values:
        try:
            entry = GroupMember.model_validate(
                value, scim_ctx=Context.RESOURCE_PATCH_REQUEST, scim_policy=TOLERANT
            )
        except (ValidationError, SCIMException):
            return None
        if not entry.value:
            return None
        entries.append(entry)
    return entries


def _type_emails(resource: Any) -> None:
    """The work email (rendered first) as `work` and primary, the personal one as `home`."""
    emails = list(getattr(resource, "emails", None) or [])
    for position, email in enumerate(emails[:2]):
        email.type, email.primary = ("work", True) if position == 0 else ("home", None)
    if emails:
        resource.emails = emails


def _make_typed_target(resource: Any, operation: dict[str, Any], match: re.Match[str]) -> None:
    """Before scim2-models applies `operation`, whose path is typed (`match`): give the value the
    module's doc says it names that type, or make the operation add a new value."""
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
