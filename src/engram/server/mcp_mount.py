"""MCP over streamable HTTP at ``/mcp``, behind the same API keys as every ``/v1`` route.

Both eras of the protocol are served on one endpoint: the 2026-07-28 revision
(stateless: no ``initialize``, no ``Mcp-Session-Id``) and the handshake era;
the SDK routes each request by its ``MCP-Protocol-Version`` header.

The key decides the scope (:mod:`engram.server.mcp_auth`): ``X-Engram-Scope``
names it, and must when the key reaches several scopes (an admin key reaches
all); a key bound to one scope uses that one; local mode (no key in the store)
uses ``default``. Read-only keys get no tool that writes. ``X-Engram-Session``
sets the conversation history tools use when a call names none. The
endpoint's Protected Resource Metadata is served beside it. Mounted only when
the ``mcp`` extra is installed.
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
from engram.server.mcp_auth import METADATA_PATH, chosen_scope, mcp_caller, metadata, refusal

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
            caller = await mcp_caller(request)
            scope = chosen_scope(caller, request.headers.get("x-engram-scope"))
            session = check_id(
                "session", request.headers.get("x-engram-session") or DEFAULT_SESSION
            )
        except EngramError as exc:
            return await refusal(request, exc)
        return Binding(scope, session, writable=caller.may(scope, write=True))

    async def described(request: Request) -> Response:
        return JSONResponse(metadata(request, MCP_PATH))

    served = McpHttp(app.state.engram, authorize)
    app.router.routes.append(Route(MCP_PATH, endpoint=served, methods=["GET", "POST", "DELETE"]))
    for path in (METADATA_PATH + MCP_PATH, METADATA_PATH):
        app.router.routes.append(Route(path, endpoint=described, methods=["GET"]))
    previous = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(target: Any) -> AsyncIterator[Any]:
        async with served.lifespan(), previous(target) as state:
            yield state

    app.router.lifespan_context = lifespan
    return True
