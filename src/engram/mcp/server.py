"""The MCP server: Engram's tools and resources, registered on the SDK's low-level server.

This module only translates. Tools come from the same typed definitions as
the OpenAI and Anthropic schemas (:mod:`engram.tools`): their MCP schema is
``Tool.schema("mcp")``, plus one optional ``session`` argument for the history
tools (the memory tools belong to the scope and ignore one), and a call goes
through :func:`engram.tools.dispatch` bound to a session of the caller's scope.
The scope is never a tool argument: a :class:`Binding` decides it (the
``--scope`` of ``engram mcp``, or the API key over HTTP), so a tool call can
never reach another scope. A read-only binding is offered no tool that writes.

Resources: ``engram://{scope}/memories`` (the scope's memories) and
``engram://{scope}/sessions/{session}/summary`` (a session's compaction state).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from engram import tools
from engram.aio import offload
from engram.engine import Engram
from engram.errors import EngramError, NotFound
from engram.memories.records import memory_json
from engram.models import JSON
from engram.session import Session
from engram.tools.results import to_json

#: Name the server gives itself in the MCP handshake.
SERVER_NAME = "engram"
#: Sessions listed as summary resources at most (the template reaches any other).
MAX_LISTED_SESSIONS = 50
#: The argument every tool gains to pick a conversation of the bound scope.
SESSION_ARGUMENT = "session"

_SUMMARY_URI = re.compile(r"^engram://(?P<scope>[^/]+)/sessions/(?P<session>[^/]+)/summary$")
_MEMORIES_URI = re.compile(r"^engram://(?P<scope>[^/]+)/memories$")


@dataclass(frozen=True, slots=True)
class Binding:
    """What one MCP caller may reach: one scope, a default session, write rights or not."""

    scope: str
    session: str = "default"
    writable: bool = True


#: Finds the binding of a request (stdio: fixed; HTTP: from the caller's API key).
Resolver = Callable[[ServerRequestContext[Any, Any]], Binding]


def registry() -> dict[str, tools.Tool]:
    """Every tool the MCP server can offer: the installed tools, then the memory tools."""
    offered = dict(tools.TOOLS)
    for func in tools.MEMORY_TOOLS:
        described = tools.declared(func)
        offered[described.name] = described
    return offered


def scope_tools() -> frozenset[str]:
    """The tools that work on the scope, not a conversation (memories): ``session`` is moot."""
    return frozenset(tools.declared(func).name for func in tools.MEMORY_TOOLS)


def build_server(engram: Engram, resolve: Resolver) -> Server[Any]:
    """The MCP server for ``engram``, each request confined to the binding ``resolve`` gives.

    Args:
        engram: The facade every tool and resource goes through.
        resolve: The binding of a request; it raises ``MCPError`` to refuse one.
    """
    known = registry()
    of_scope = scope_tools()

    def offered(binding: Binding) -> dict[str, tools.Tool]:
        return {name: t for name, t in known.items() if binding.writable or not t.writes}

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        binding = resolve(ctx)
        return types.ListToolsResult(
            tools=[_mcp_tool(t, binding, t.name not in of_scope) for t in offered(binding).values()]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        binding = resolve(ctx)
        arguments = dict(params.arguments or {})
        chosen = arguments.pop(SESSION_ARGUMENT, None)
        if params.name in of_scope:
            chosen = None  # memories belong to the scope, whatever conversation is named
        allowed = offered(binding)

        def run() -> str:
            session = _session(engram, binding, chosen)
            return tools.dispatch(
                session, params.name, arguments, registry=allowed, also_accepts=[SESSION_ARGUMENT]
            )

        try:
            text = await offload(run)
        except EngramError as exc:
            text = tools.ToolError(_kind(exc), str(exc)).to_json()
        return _result(text)

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        binding = resolve(ctx)
        sessions = await offload(engram.sessions, binding.scope, limit=MAX_LISTED_SESSIONS)
        listed = [
            types.Resource(
                uri=memories_uri(binding.scope),
                name="memories",
                description=f"The long-term memories of scope {binding.scope}",
                mime_type="application/json",
            )
        ]
        listed += [
            types.Resource(
                uri=summary_uri(binding.scope, info.id),
                name=f"summary of {info.id}",
                description="The session's summary, important data and watermark",
                mime_type="application/json",
            )
            for info in sessions
        ]
        return types.ListResourcesResult(resources=listed)

    async def list_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        binding = resolve(ctx)
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=summary_template(binding.scope),
                    name="session summary",
                    description="A session's summary, important data and watermark",
                    mime_type="application/json",
                )
            ]
        )

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        binding = resolve(ctx)
        uri = str(params.uri)
        try:
            document = await offload(_resource, engram, binding, uri)
        except EngramError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=uri, text=to_json(document), mime_type="application/json"
                )
            ]
        )

    return Server(
        SERVER_NAME,
        instructions=tools.HISTORY_TOOLS_PROMPT,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


def memories_uri(scope: str) -> str:
    """The URI of a scope's memories resource."""
    return f"engram://{quote(scope, safe='')}/memories"


def summary_uri(scope: str, session: str) -> str:
    """The URI of a session's summary resource (ids are percent-encoded)."""
    return f"engram://{quote(scope, safe='')}/sessions/{quote(session, safe='')}/summary"


def summary_template(scope: str) -> str:
    """The URI template of the summaries of a scope's sessions."""
    return f"engram://{quote(scope, safe='')}/sessions/{{session}}/summary"


async def serve_stdio(server: Server[Any]) -> None:
    """Serve ``server`` on this process's stdin and stdout until the client hangs up."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


# -- translation ------------------------------------------------------------------------


def _mcp_tool(described: tools.Tool, binding: Binding, per_session: bool) -> types.Tool:
    schema = described.schema("mcp")
    parameters = schema["inputSchema"]
    if per_session:
        parameters["properties"][SESSION_ARGUMENT] = {
            "type": "string",
            "description": "The conversation to use, within this project "
            f"(default: {binding.session!r}).",
        }
    return types.Tool(
        name=schema["name"],
        description=schema["description"],
        input_schema=parameters,
        annotations=types.ToolAnnotations(
            read_only_hint=not described.writes,
            destructive_hint=described.writes,
            open_world_hint=False,
        ),
    )


def _session(engram: Engram, binding: Binding, chosen: object) -> Session:
    """The session a call runs on: the one named (it must exist) or the binding's default."""
    if chosen is None:
        return engram.session(binding.session, binding.scope)
    if not isinstance(chosen, str):
        raise tools.ToolError(
            "invalid_arguments", f"'session' must be a string, got {type(chosen).__name__}"
        )
    return engram.require_session(chosen, binding.scope)


def _kind(exc: EngramError) -> str:
    if isinstance(exc, tools.ToolError):
        return exc.kind
    return "not_found" if isinstance(exc, NotFound) else "invalid_arguments"


def _result(text: str) -> types.CallToolResult:
    """A dispatch result as an MCP tool result (an error one when it is an error)."""
    decoded = json.loads(text)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=decoded if isinstance(decoded, dict) else None,
        is_error=tools.is_error(text),
    )


def _resource(engram: Engram, binding: Binding, uri: str) -> JSON:
    """The document behind a resource URI of the binding's scope.

    Raises:
        NotFound: an unknown URI, another scope's, or a missing session (one wording).
    """
    memories = _MEMORIES_URI.match(uri)
    if memories and unquote(memories["scope"]) == binding.scope:
        found = engram.memories(binding.scope).list()
        return {"scope": binding.scope, "memories": [memory_json(m) for m in found]}
    summary = _SUMMARY_URI.match(uri)
    if summary and unquote(summary["scope"]) == binding.scope:
        session = engram.require_session(unquote(summary["session"]), binding.scope)
        return _summary(session)
    raise NotFound(f"no resource {uri!r}")


def _summary(session: Session) -> JSON:
    state = session.compaction_state().to_dict()
    state.pop("format", None)
    return {"scope": session.scope, "session": session.id, **state}
