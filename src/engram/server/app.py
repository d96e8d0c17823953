"""The app factory: :func:`create_app` composes the routers, the rights, the errors, the limits.

Layout of every app::

    /healthz /readyz /metrics     routes/health.py (no key)
    / /p/... /login /static       engram.dashboard (pages, outside the API document)
    /v1/scopes/...                routes/<resource>.py: each module's ``router = v1_router(tag)``
                                  carries the router-level enforce_rights dependency
    /openapi.json                 FastAPI
    /docs /docs/static            api_docs.py (Swagger UI from vendored files)

Other interfaces plug in here: a router of ``/v1`` routes is made with
:func:`engram.server.deps.v1_router` and added with :func:`include_v1`, which
refuses a ``/v1`` route without the rights check and writes each route's
rights into the API document (``x-engram-rights``); an ASGI sub-application
(MCP, the dashboard) is mounted on the returned app.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from engram import dashboard
from engram.engine import Engram
from engram.server import documented
from engram.server.api_docs import install_docs
from engram.server.auth import KeyCheck
from engram.server.body_limit import BodyLimit
from engram.server.deps import (
    ERROR_RESPONSES,
    NOT_JSON_RESPONSE,
    RIGHTS_KEY,
    enforce_rights,
    rights_of,
)
from engram.server.errors import install_error_handlers
from engram.server.hosts import LocalHosts
from engram.server.json_only import BODY_METHODS, JsonOnly
from engram.server.mcp_mount import MCP_PATH, mount_mcp
from engram.server.metrics import ServerMetrics
from engram.server.routes import RESOURCES, health, proxy
from engram.server.settings import ServerSettings
from engram.server.throttle import FailedKeys

OPENAPI_PATH = "/openapi.json"
DESCRIPTION = """Conversation memory for LLM applications, as a service.

Every `/v1` route needs `Authorization: Bearer KEY` once the store holds an API key
(`engram keys create`); an admin key reaches everything, other keys only their scopes,
read-only keys only read. Each operation says the rights it needs in `x-engram-rights`.
Errors are `{"error": {"type", "message", "field"}}`. Request bodies are JSON: a `POST`,
`PUT` or `PATCH` without `Content-Type: application/json` gets 415.
"""


def include_v1(app: FastAPI, router: APIRouter) -> None:
    """Add a router of ``/v1`` routes, each checked for the rights dependency and stamped.

    Raises:
        RuntimeError: a route is outside ``/v1`` or lacks :func:`enforce_rights`
            (make the router with :func:`~engram.server.deps.v1_router`).

    """
    for route in router.routes:
        if not isinstance(route, APIRoute):
            continue
        if not route.path.startswith("/v1/"):
            raise RuntimeError(f"{route.path} is not under /v1")
        if not any(dep.call is enforce_rights for dep in route.dependant.dependencies):
            raise RuntimeError(f"{route.path} has no enforce_rights; make it with v1_router()")
        route.openapi_extra = {**(route.openapi_extra or {}), RIGHTS_KEY: rights_of(route)}
        if set(route.methods or ()) & BODY_METHODS:
            route.responses = {**route.responses, 415: NOT_JSON_RESPONSE}
    app.include_router(router)


class _Timed:
    """The metrics middleware in the form ``add_middleware`` takes."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self._app = metrics.middleware(app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


def create_app(engram: Engram, settings: ServerSettings | None = None) -> FastAPI:
    """The REST API over ``engram`` (which stays the caller's to close)."""
    settings = settings or ServerSettings()
    app = FastAPI(
        title=settings.title,
        version="1",
        description=DESCRIPTION,
        docs_url=None,  # api_docs serves it offline
        redoc_url=None,
        openapi_url=OPENAPI_PATH,
    )
    app.state.engram = engram
    app.state.settings = settings
    keys = KeyCheck(engram, settings.key_cache_seconds)
    app.state.key_check = keys
    app.state.failed_keys = FailedKeys(settings.key_failures, settings.key_failure_window)
    metrics = ServerMetrics(engram)
    app.state.metrics = metrics
    install_error_handlers(app)
    install_docs(app, OPENAPI_PATH)
    documented.install(app)
    app.include_router(health.router, responses={503: ERROR_RESPONSES[503]})
    dashboard.install(app)  # the pages at / (outside the API document), behind the same keys
    for router in RESOURCES:
        include_v1(app, router)
    if settings.proxy is not None or settings.anthropic is not None:
        proxy.install(app, settings.proxy, settings.anthropic)
    if settings.mcp:
        mount_mcp(app)
    app.add_middleware(_Timed, metrics=metrics)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(JsonOnly, prefixes=("/v1", MCP_PATH))  # no cross-site simple request
    app.add_middleware(LocalHosts, keys=keys, allowed=settings.allowed_hosts)  # outermost
    return app
