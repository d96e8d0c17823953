"""``engram mcp``: serve one scope's history and memories to an MCP client over stdio."""

from __future__ import annotations

import click

from engram.cli._common import db_option, open_engram, scope_option


@click.command("mcp")
@scope_option
@click.option(
    "--session",
    default="default",
    show_default=True,
    metavar="ID",
    help="Conversation the tools use when a call names none.",
)
@click.option("--read-only", is_flag=True, help="Offer no tool that changes memories.")
@db_option
@click.pass_context
def mcp_command(
    ctx: click.Context, scope: str, session: str, read_only: bool, db: str | None
) -> None:
    """Serve the history and memory tools of one scope over MCP (stdio)."""
    import anyio

    from engram.mcp import Binding, build_server, serve_stdio

    mem = open_engram(ctx, db)
    mem.session(session, scope)  # checks both ids before the client connects
    binding = Binding(scope=scope, session=session, writable=not read_only)
    server = build_server(mem, lambda _request: binding)
    anyio.run(serve_stdio, server)
