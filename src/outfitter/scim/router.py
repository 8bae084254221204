"""SCIM endpoints. HTTP only: read the request, call the service, answer application/scim+json.

Each endpoint runs in the request's unit of work (`UnitOfWorkRoute`), authenticated by a token of
the `scim` scope, bound to its company: another company's ids are 404 like unknown ones."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Query, Request
from scim2_models import InvalidSyntaxException, InvalidValueException, NotImplementedException
from starlette.responses import Response

from outfitter.core.errors import NotFound
from outfitter.http.auth import bearer_token
from outfitter.http.input_guard import unstorable_fields
from outfitter.http.unit_of_work import ClientWork, UnitOfWorkRoute
from outfitter.payments.gateways import GatewayRegistry, registry_of
from outfitter.scim import discovery, groups, service, users
from outfitter.scim.responses import Projection, list_response, resource_response, scim_response
from outfitter.scim.users import Links

MOUNT_PATH = "/scim/v2"  # where `outfitter.app` mounts the SCIM application

router = APIRouter(route_class=UnitOfWorkRoute)


async def _scim_work(request: Request) -> ClientWork:
    state = request.app.state
    return ClientWork(
        state.sessionmaker,
        bearer_token(request.headers.get("authorization")),
        "scim",
        state.scim_rate_limiter,  # a budget of its own: an identity provider pushes in bursts
        request.scope.setdefault("state", {}),
    )


async def _links(request: Request) -> Links:
    """Links under the base the client called (scheme, host and any prefix before /scim/v2)."""
    path = request.url.path
    base = path[: path.find(MOUNT_PATH) + len(MOUNT_PATH)] if MOUNT_PATH in path else MOUNT_PATH
    return Links(f"{request.url.scheme}://{request.url.netloc}{base}")


async def _gateways(request: Request) -> GatewayRegistry:
    return registry_of(request.app.state)


ScimAccess = Annotated[ClientWork, Depends(_scim_work)]
BaseLinks = Annotated[Links, Depends(_links)]
Gateways = Annotated[GatewayRegistry, Depends(_gateways)]
IfMatch = Annotated[str | None, Header(alias="If-Match")]


async def _json_body(request: Request, body: Annotated[Any, Body()]) -> Any:
    """The request's JSON; text no database column can hold (a NUL, a lone surrogate) is a 400."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if not media_type.endswith(("/json", "+json")):  # FastAPI left the body unread as JSON
        raise InvalidSyntaxException(
            detail="Send the body as JSON, with Content-Type: application/scim+json (or application/json)."
        )
    found = unstorable_fields(body)
    if found:
        field, (problem, *_) = next(iter(found.items()))
        raise InvalidValueException(detail=f"{field}: {problem}")
    return body


JsonBody = Annotated[Any, Depends(_json_body)]
Attributes = Annotated[str | None, Query()]
ExcludedAttributes = Annotated[str | None, Query(alias="excludedAttributes")]
Filter = Annotated[str | None, Query()]
StartIndex = Annotated[str | None, Query(alias="startIndex")]
Count = Annotated[str | None, Query()]


@dataclass(frozen=True)
class Listing:
    """A list request, from the query string (GET) or a SearchRequest body (POST .search)."""

    query: service.Query
    attributes: Any = None
    excluded: Any = None

    @classmethod
    def of_search(cls, body: Any) -> Listing:
        search = body if isinstance(body, dict) else {}
        query = service.Query.parse(search.get("filter"), search.get("startIndex"), search.get("count"))
        return cls(query, search.get("attributes"), search.get("excludedAttributes"))


async def _listing(
    filter: Filter = None,
    start_index: StartIndex = None,
    count: Count = None,
    attributes: Attributes = None,
    excluded_attributes: ExcludedAttributes = None,
) -> Listing:
    return Listing(service.Query.parse(filter, start_index, count), attributes, excluded_attributes)


ListParams = Annotated[Listing, Depends(_listing)]
Project = Callable[[Any, Any], Projection]


def _user_projection(attributes: Any, excluded: Any) -> Projection:
    return Projection.parse(attributes, excluded, users.CORE_URN, (users.ENTERPRISE_URN,))


def _group_projection(attributes: Any, excluded: Any) -> Projection:
    return Projection.parse(attributes, excluded, groups.CORE_URN)


def _listed(found: tuple[list[dict[str, Any]], int], listing: Listing, project: Project) -> Response:
    resources, total = found
    projection = project(listing.attributes, listing.excluded)
    return list_response((projection.apply(item) for item in resources), total, listing.query.start_index)


def _one(
    resource: dict[str, Any], attributes: str | None, excluded: str | None, project: Project
) -> Response:
    if not attributes and not excluded:
        return resource_response(resource)
    projected = project(attributes, excluded).apply(resource)
    return scim_response(projected, headers={"ETag": resource["meta"]["version"]})


# Discovery


@router.post("/.search", response_model=None)
def search_everything(work: ScimAccess) -> Response:
    raise NotImplementedException(
        detail="Search Users and Groups apart: POST /Users/.search or /Groups/.search."
    )


@router.get("/ServiceProviderConfig", response_model=None)
def service_provider_config(work: ScimAccess, links: BaseLinks) -> Response:
    return scim_response(discovery.service_provider_config(links.base))


@router.get("/ResourceTypes", response_model=None)
def resource_types(work: ScimAccess, links: BaseLinks) -> Response:
    found = discovery.resource_types(links.base)
    return list_response(found, len(found), 1)


@router.get("/ResourceTypes/{type_id}", response_model=None)
def resource_type(type_id: str, work: ScimAccess, links: BaseLinks) -> Response:
    return scim_response(
        _found(discovery.find(discovery.resource_types(links.base), type_id), "ResourceType")
    )


@router.get("/Schemas", response_model=None)
def schemas(work: ScimAccess, links: BaseLinks) -> Response:
    found = discovery.schemas(work.session, links.base)
    return list_response(found, len(found), 1)


@router.get("/Schemas/{schema_id}", response_model=None)
def schema(schema_id: str, work: ScimAccess, links: BaseLinks) -> Response:
    return scim_response(
        _found(discovery.find(discovery.schemas(work.session, links.base), schema_id), "Schema")
    )


def _found(item: dict[str, Any] | None, what: str) -> dict[str, Any]:
    if item is None:
        raise NotFound.record(what)
    return item


# Users


@router.get("/Users", response_model=None)
def list_users(work: ScimAccess, links: BaseLinks, listing: ListParams) -> Response:
    return _listed(service.list_users(work.session, listing.query, links), listing, _user_projection)


@router.post("/Users/.search", response_model=None)
def search_users(work: ScimAccess, links: BaseLinks, body: JsonBody) -> Response:
    listing = Listing.of_search(body)
    return _listed(service.list_users(work.session, listing.query, links), listing, _user_projection)


@router.post("/Users", response_model=None)
def create_user(work: ScimAccess, links: BaseLinks, body: JsonBody) -> Response:
    return resource_response(service.create_user(work.session, work.actor, body, links), 201)


@router.get("/Users/{user_id}", response_model=None)
def get_user(
    user_id: str,
    work: ScimAccess,
    links: BaseLinks,
    attributes: Attributes = None,
    excluded_attributes: ExcludedAttributes = None,
) -> Response:
    user = service.get_user(work.session, user_id, links)
    return _one(user, attributes, excluded_attributes, _user_projection)


@router.put("/Users/{user_id}", response_model=None)
def replace_user(
    user_id: str,
    work: ScimAccess,
    links: BaseLinks,
    gateways: Gateways,
    body: JsonBody,
    if_match: IfMatch = None,
) -> Response:
    return resource_response(
        service.replace_user(work.session, work.actor, user_id, body, if_match, links, gateways)
    )


@router.patch("/Users/{user_id}", response_model=None)
def patch_user(
    user_id: str,
    work: ScimAccess,
    links: BaseLinks,
    gateways: Gateways,
    body: JsonBody,
    if_match: IfMatch = None,
) -> Response:
    return resource_response(
        service.patch_user(work.session, work.actor, user_id, body, if_match, links, gateways)
    )


@router.delete("/Users/{user_id}", response_model=None)
def delete_user(
    user_id: str, work: ScimAccess, links: BaseLinks, gateways: Gateways, if_match: IfMatch = None
) -> Response:
    service.delete_user(work.session, work.actor, user_id, if_match, links, gateways)
    return Response(status_code=204)


# Groups


@router.get("/Groups", response_model=None)
def list_groups(work: ScimAccess, links: BaseLinks, listing: ListParams) -> Response:
    return _listed(service.list_groups(work.session, listing.query, links), listing, _group_projection)


@router.post("/Groups/.search", response_model=None)
def search_groups(work: ScimAccess, links: BaseLinks, body: JsonBody) -> Response:
    listing = Listing.of_search(body)
    return _listed(service.list_groups(work.session, listing.query, links), listing, _group_projection)


@router.post("/Groups", response_model=None)
def create_group(work: ScimAccess, links: BaseLinks, body: JsonBody) -> Response:
    return resource_response(service.create_group(work.session, work.actor, body, links), 201)


@router.get("/Groups/{group_id}", response_model=None)
def get_group(
    group_id: str,
    work: ScimAccess,
    links: BaseLinks,
    attributes: Attributes = None,
    excluded_attributes: ExcludedAttributes = None,
) -> Response:
    group = service.get_group(work.session, group_id, links)
    return _one(group, attributes, excluded_attributes, _group_projection)


@router.put("/Groups/{group_id}", response_model=None)
def replace_group(
    group_id: str, work: ScimAccess, links: BaseLinks, body: JsonBody, if_match: IfMatch = None
) -> Response:
    return resource_response(service.replace_group(work.session, work.actor, group_id, body, if_match, links))


@router.patch("/Groups/{group_id}", response_model=None)
def patch_group(
    group_id: str, work: ScimAccess, links: BaseLinks, body: JsonBody, if_match: IfMatch = None
) -> Response:
    return resource_response(service.patch_group(work.session, work.actor, group_id, body, if_match, links))


@router.delete("/Groups/{group_id}", response_model=None)
def delete_group(group_id: str, work: ScimAccess, links: BaseLinks, if_match: IfMatch = None) -> Response:
    service.delete_group(work.session, work.actor, group_id, if_match, links)
    return Response(status_code=204)
