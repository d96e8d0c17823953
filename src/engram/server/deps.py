"""What routes receive, declared once as typed ``Depends`` aliases.

* :data:`EngramDep`: the :class:`~engram.Engram` the app serves.
* :data:`CallerDep`: the caller's key and rights (401 without a valid key once
  keys exist), from the bearer header.
* :func:`resolve_caller`: the one caller resolution, whatever door the key came
  through (the REST bearer header, the dashboard's cookie, MCP over HTTP).
* :data:`MetricsDep`: the app's Prometheus counters.
* :func:`enforce_rights`: the router-level dependency of every ``/v1`` router.
  It reads the route's declared rights (``x-engram-rights``: read, write or
  admin; stamped on each route by :func:`engram.server.app.create_app`) and the
  ``{scope}`` of the path, so a route cannot forget to check them.
* :func:`v1_router`: the only way routes under ``/v1`` are made.
* :data:`ScopePath`, :data:`SessionPath`: the path parameters, validated.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from engram.aio import offload
from engram.engine import Engram
from engram.intake.validation import MAX_ID_CHARS
from engram.server import documented
from engram.server.auth import Caller, KeyCheck, is_remote
from engram.server.errors import COMMON_ERRORS, NotAuthenticated, TooManyFailures
from engram.server.metrics import ServerMetrics
from engram.server.schemas import ErrorOut
from engram.server.throttle import FailedKeys

# Dependencies are ``async``: FastAPI runs a plain ``def`` dependency in a worker thread,
# a thread hop per request for nothing.

#: The OpenAPI extension naming the rights a route needs.
RIGHTS_KEY = "x-engram-rights"
#: ``openapi_extra`` of a route only admin keys may call.
ADMIN = {RIGHTS_KEY: "admin"}
#: ``openapi_extra`` of a POST route that only reads (a read-only key may call it).
READ = {RIGHTS_KEY: "read"}
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

_bearer = HTTPBearer(
    auto_error=False,
    description="An Engram API key (`engram keys create`). Not needed when the "
    "store holds no key and the server listens on 127.0.0.1 only.",
)


async def engram_of(request: Request) -> Engram:
    """The Engram the app serves."""
    engram: Engram = request.app.state.engram
    return engram


async def resolve_caller(request: Request, secret: str | None, *, last: bool = True) -> Caller:
    """The caller a key makes for this request (cached checks, else a store read in a thread).

    Every door calls it with the key it read (REST and MCP from the bearer
    header, the dashboard from its session or the header), so the same key has
    the same rights everywhere. A key from an address with too many failed
    checks lately is not even looked at (:mod:`engram.server.throttle`); a
    wrong one counts as a failure, unless ``last`` is False (the door has
    another check to try, and counts the failure itself: :func:`key_failed`).

    Raises:
        NotAuthenticated: a key is needed and this one is missing, unknown or
            revoked, or the server has no key yet and the request comes from
            another machine.
        TooManyFailures: this address failed too many key checks lately (429).

    """
    keys: KeyCheck = request.app.state.key_check
    failures: FailedKeys = request.app.state.failed_keys
    host = request.client.host if request.client else None
    if secret is not None:
        wait = failures.retry_after(host)
        if wait is not None:
            raise TooManyFailures(wait, failures.limit, failures.window)
    try:
        caller = keys.cached(secret)
        if caller is None:
            caller = await offload(keys.check, secret)
    except NotAuthenticated:
        if secret is not None and last:
            failures.failed(host)
        raise
    if caller.key is None and is_remote(request.client.host if request.client else None):
        raise NotAuthenticated(
            "this server has no API key yet and serves only its own machine; "
            "create one with `engram keys create`"
        )
    return caller


def key_failed(request: Request) -> None:
    """Count a failed key check of this request's address (a door's own last check failed)."""
    failures: FailedKeys = request.app.state.failed_keys
    failures.failed(request.client.host if request.client else None)


def bearer_secret(request: Request) -> str | None:
    """The key of an ``Authorization: Bearer KEY`` header, or None."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


async def current_caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    """The caller of a ``/v1`` request, from its bearer key (see :func:`resolve_caller`)."""
    return await resolve_caller(request, credentials.credentials if credentials else None)


async def metrics_of(request: Request) -> ServerMetrics:
    """The app's metrics."""
    metrics: ServerMetrics = request.app.state.metrics
    return metrics


EngramDep = Annotated[Engram, Depends(engram_of)]
CallerDep = Annotated[Caller, Depends(current_caller)]
MetricsDep = Annotated[ServerMetrics, Depends(metrics_of)]


def rights_of(route: APIRoute) -> str:
    """The rights a route needs: declared in its OpenAPI extra, else read for GET, else write."""
    declared = (route.openapi_extra or {}).get(RIGHTS_KEY)
    if isinstance(declared, str):
        return declared
    return "read" if set(route.methods or ()) <= _READ_METHODS else "write"


async def enforce_rights(request: Request, caller: CallerDep) -> None:
    """Refuse the request unless the caller has the route's rights on the path's scope."""
    route = request.scope.get("route")
    rights = rights_of(route) if isinstance(route, APIRoute) else "admin"
    caller.require(request.path_params.get("scope"), rights)


#: The error responses every ``/v1`` route documents (same body shape for all).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": "An error: {error: {type, message, field}}."}
    for status in COMMON_ERRORS
}
#: The 415 of a route that takes a body (see :mod:`engram.server.json_only`).
NOT_JSON_RESPONSE: dict[str, Any] = {
    "model": ErrorOut,
    "description": "The body was not sent with Content-Type: application/json.",
}


def v1_router(tag: str) -> APIRouter:
    """A router of ``/v1`` routes: every route gets :func:`enforce_rights` and the error docs."""
    return APIRouter(
        prefix="/v1",
        tags=[tag],
        dependencies=[Depends(enforce_rights)],
        responses=ERROR_RESPONSES,
    )


ScopePath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="A scope (project, app, user).",
        json_schema_extra=documented.ID,
    ),
]
SessionPath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="A session of the scope.",
        json_schema_extra=documented.ID,
    ),
]
