"""MCP over streamable HTTP at ``/mcp``, behind the same API keys as every ``/v1`` route.

The key decides the scope: ``X-Engram-Scope`` names it when the key reaches
several (admin keys, local mode), a key bound to one scope uses that one;
read-only keys get no tool that writes. ``X-Engram-Session`` sets the
conversation tools use when a call names none. Mounted only when the ``mcp``
extra is installed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engram.errors import EngramError, MissingDependency
from engram.intake.validation import check_id
from engram.server.deps import bearer_secret, resolve_caller
from engram.server.errors import error_body, status_of
from engram.server.routes.proxy import own_scope

#: Where MCP is served.
MCP_PATH = "/mcp"
#: The session tools use when neither the call nor the request names one.
DEFAULT_SESSION = "default"


def mount_mcp(app: FastAPI) -> bool:
    """Serve MCP at :data:`MCP_PATH` on ``app``; False when the ``mcp`` extra is missing."""
    try:
        from engram.mcp import Binding
        from engram.mcp.http import McpHttp
    except MissingDependency:
        return False

    async def authorize(request: Request) -> Binding | Response:
        try:
            caller = await resolve_caller(request, bearer_secret(request))
            scope = check_id("scope", request.headers.get("x-engram-scope") or own_scope(caller))
            caller.require(scope, "read")
            session = check_id(
                "session", request.headers.get("x-engram-session") or DEFAULT_SESSION
            )
        except EngramError as exc:
            status, kind = status_of(exc)
            return JSONResponse(error_body(kind, str(exc)), status_code=status)
        return Binding(scope, session, writable=caller.may(scope, write=True))

    served = McpHttp(app.state.engram, authorize)
    app.router.routes.append(Route(MCP_PATH, endpoint=served, methods=["GET", "POST", "DELETE"]))
    previous = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(target: Any) -> AsyncIterator[Any]:
        async with served.lifespan(), previous(target) as state:
            yield state

    app.router.lifespan_context = lifespan
    return True
