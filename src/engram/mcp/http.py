"""The MCP server over streamable HTTP, as an ASGI app another app mounts (``/mcp``).

Every HTTP request is authorized first by the ``authorize`` callable the
mounting app gives (``engram serve`` checks the API key there and picks the
scope): it returns the request's :class:`~engram.mcp.Binding`, or a response
to send instead (401, 403). The binding travels with the request to the
tool handlers, so each call is confined to the scope the key allows.

Stateless: every request stands alone, so any of several servers sharing one
database can answer it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from engram.engine import Engram
from engram.mcp.server import Binding, build_server

#: Where the request's binding is kept in the ASGI scope.
BINDING_KEY = "engram.mcp.binding"

Authorize = Callable[[Request], Awaitable[Binding | Response]]


class McpHttp:
    """The ASGI app of MCP over streamable HTTP; run :meth:`lifespan` around serving."""

    def __init__(self, engram: Engram, authorize: Authorize) -> None:
        self._authorize = authorize
        self._server = build_server(engram, _binding)
        self._manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Keep a session manager's task group open while the app serves.

        A manager runs once, so each start of the app (tests start one app
        many times) gets a fresh one.
        """
        manager = StreamableHTTPSessionManager(app=self._server, stateless=True, json_response=True)
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authorize the request, then hand it to the MCP transport."""
        decided = await self._authorize(Request(scope, receive))
        if isinstance(decided, Response):
            await decided(scope, receive, send)
            return
        if self._manager is None:
            await Response("the MCP server is not running", status_code=503)(scope, receive, send)
            return
        scope[BINDING_KEY] = decided
        await self._manager.handle_request(scope, receive, send)


def _binding(ctx: ServerRequestContext[Any, Any]) -> Binding:
    request = ctx.request
    found = getattr(request, "scope", {}).get(BINDING_KEY) if request is not None else None
    if not isinstance(found, Binding):
        raise MCPError(code=types.INVALID_REQUEST, message="this request was not authorized")
    return found
