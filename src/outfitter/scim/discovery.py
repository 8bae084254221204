"""ServiceProviderConfig, ResourceTypes and Schemas (RFC 7644 section 4).

The schemas published are RFC 7643's, cut down to the attributes Outfitter keeps (users.py,
groups.py), so that a client reading them knows exactly what round-trips. A few are declared
required because an employee cannot exist without them: a name, a work email, a country
(addresses.country, an ISO 3166-1 alpha-2 code) and whether they are active (an omitted `active`
is taken as true, and a userName that is an email address stands in for the email).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

from scim2_models import Context, EnterpriseUser, Group, Required, Schema, User
from sqlalchemy.orm import Session

from outfitter.catalog.reference import country_codes
from outfitter.scim.users import CORE_URN as USER_URN
from outfitter.scim.users import ENTERPRISE_URN

GROUP_URN = str(Group.__schema__)
MAX_RESULTS = 1000

# attribute -> the sub-attributes kept (None: a simple attribute)
_USER_ATTRIBUTES: dict[str, tuple[str, ...] | None] = {
    "userName": None,
    "name": ("givenName", "familyName"),
    "title": None,
    "active": None,
    "emails": ("value",),
    "phoneNumbers": ("value",),
    "addresses": ("formatted", "country"),
}
_REQUIRED = {
    "active",
    "name",
    "name.givenName",
    "name.familyName",
    "emails",
    "emails.value",
    "addresses",
    "addresses.country",
}
_ENTERPRISE_ATTRIBUTES: dict[str, tuple[str, ...] | None] = {"department": None, "manager": ("value", "$ref")}
_GROUP_ATTRIBUTES: dict[str, tuple[str, ...] | None] = {"displayName": None, "members": ("value", "$ref")}


def _cut(
    schema: Schema, kept: dict[str, tuple[str, ...] | None], countries: tuple[str, ...] = ()
) -> dict[str, Any]:
    attributes = []
    for attribute in schema.attributes or []:
        if attribute.name not in kept:
            continue
        subs = kept[attribute.name]
        if subs is not None:
            attribute.sub_attributes = [sub for sub in attribute.sub_attributes or [] if sub.name in subs]
            for sub in attribute.sub_attributes:
                required = f"{attribute.name}.{sub.name}" in _REQUIRED
                sub.required = Required.true if required else Required.false
                if attribute.name == "addresses" and sub.name == "country":
                    sub.canonical_values = list(countries)
        if attribute.name in _REQUIRED:
            attribute.required = Required.true
        attributes.append(attribute)
    schema.attributes = attributes
    dumped: dict[str, Any] = schema.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE)
    dumped.pop("meta", None)
    return dumped


@cache
def _schemas(countries: tuple[str, ...]) -> tuple[dict[str, Any], ...]:
    return (
        _cut(User.to_schema(), _USER_ATTRIBUTES, countries),
        _cut(EnterpriseUser.to_schema(), _ENTERPRISE_ATTRIBUTES),
        _cut(Group.to_schema(), _GROUP_ATTRIBUTES),
    )


def schemas(session: Session, base: str) -> list[dict[str, Any]]:
    """The schemas; addresses.country lists the countries Outfitter knows as its canonical values."""
    countries = tuple(country_codes(session))
    return [
        {**schema, "meta": {"resourceType": "Schema", "location": f"{base}/Schemas/{schema['id']}"}}
        for schema in _schemas(countries)
    ]


def resource_types(base: str) -> list[dict[str, Any]]:
    urn = "urn:ietf:params:scim:schemas:core:2.0:ResourceType"
    return [
        {
            "schemas": [urn],
            "id": "User",
            "name": "User",
            "endpoint": "/Users",
            "description": "An employee",
            "schema": USER_URN,
            "schemaExtensions": [{"schema": ENTERPRISE_URN, "required": False}],
            "meta": {"resourceType": "ResourceType", "location": f"{base}/ResourceTypes/User"},
        },
        {
            "schemas": [urn],
            "id": "Group",
            "name": "Group",
            "endpoint": "/Groups",
            "description": "A department",
            "schema": GROUP_URN,
            "schemaExtensions": [],
            "meta": {"resourceType": "ResourceType", "location": f"{base}/ResourceTypes/Group"},
        },
    ]


def service_provider_config(base: str, documentation: str | None = None) -> dict[str, Any]:
    return {
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"],
        "documentationUri": documentation,
        "patch": {"supported": True},
        "bulk": {"supported": False, "maxOperations": 0, "maxPayloadSize": 0},
        "filter": {"supported": True, "maxResults": MAX_RESULTS},
        "changePassword": {"supported": False},
        "sort": {"supported": False},
        "etag": {"supported": True},
        "authenticationSchemes": [
            {
                "type": "oauthbearertoken",
                "name": "Bearer token",
                "description": "An otf_ token of the scim scope: outfitter token create COMPANY --scope scim",
                "primary": True,
            }
        ],
        "meta": {"resourceType": "ServiceProviderConfig", "location": f"{base}/ServiceProviderConfig"},
    }


def find(items: Iterable[dict[str, Any]], item_id: str) -> dict[str, Any] | None:
    return next((item for item in items if str(item["id"]).lower() == item_id.lower()), None)
