"""``engram mcp``: serve one scope over MCP (stdio); ``engram mcp-config``: the client snippet.

A desktop MCP client starts ``engram mcp`` in a working directory of its own
and with a ``PATH`` of its own, so a relative SQLite path would name (and
silently create) an empty database there. ``engram mcp`` therefore resolves a
relative path that exists, says on stderr which file it serves, and refuses
one that does not exist; ``engram mcp-config`` prints the client's snippet
with absolute paths of the command and the database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from engram.cli._common import db_option, open_engram, scope_option, store_url
from engram.config import Config

_SESSION = click.option(
    "--session",
    default="default",
    show_default=True,
    metavar="ID",
    help="Conversation the history tools use when a call names none.",
)
_READ_ONLY = click.option("--read-only", is_flag=True, help="Offer no tool that changes memories.")


@click.command("mcp")
@scope_option
@_SESSION
@_READ_ONLY
@db_option
@click.pass_context
def mcp_command(
    ctx: click.Context, scope: str, session: str, read_only: bool, db: str | None
) -> None:
    """Serve the history and memory tools of one scope over MCP (stdio).

    Both eras of the protocol are served: the 2026-07-28 revision and the
    initialize handshake, whichever the client speaks.
    """
    import anyio

    from engram.mcp import Binding, build_server, serve_stdio

    url = absolute_store(effective_url(ctx, db))
    mem = open_engram(ctx, url)
    mem.session(session, scope)  # checks both ids before the client connects
    click.echo(f"engram mcp: serving scope {scope!r} of {mem.url}", err=True)  # stdout is MCP's
    binding = Binding(scope=scope, session=session, writable=not read_only)
    server = build_server(mem, lambda _request: binding)
    anyio.run(serve_stdio, server)


@click.command("mcp-config")
@scope_option
@_SESSION
@_READ_ONLY
@click.option("--name", default="engram", show_default=True, help="The server's name there.")
@db_option
@click.pass_context
def mcp_config_command(
    ctx: click.Context, scope: str, session: str, read_only: bool, name: str, db: str | None
) -> None:
    """Print the snippet that adds this server to a desktop MCP client's configuration.

    The command and the database are absolute paths, so the client can start
    the server from any directory, with any PATH.
    """
    url = absolute_store(effective_url(ctx, db))
    args = ["mcp", "--db", url, "--scope", scope]
    if session != "default":
        args += ["--session", session]
    if read_only:
        args.append("--read-only")
    click.echo(json.dumps({"mcpServers": {name: launcher(args)}}, indent=2))


def effective_url(ctx: click.Context, db: str | None) -> str:
    """The store URL a command opens: ``--db``, the group's ``--db``, ``ENGRAM_URL``, default."""
    return store_url(ctx, db) or Config.from_env().url


def absolute_store(url: str) -> str:
    """``url`` with a relative SQLite path made absolute (other URLs as they are).

    Raises:
        click.UsageError: a relative SQLite path that does not exist here.

    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower().split("+", 1)[0] != "sqlite" or not rest.startswith("/"):
        return url
    path, mark, query = rest[1:].partition("?")
    if path in ("", ":memory:") or os.path.isabs(path):
        return url
    absolute = Path(path).resolve()
    if not absolute.exists():
        raise click.UsageError(
            f"the database {url!r} names {path!r}, relative to the directory this command runs"
            f" in ({Path.cwd()}), and there is no such file there. An MCP client starts the"
            f" server in a directory of its own: give an absolute path, such as"
            f" sqlite:///{absolute}, or run engram mcp-config where the database is"
        )
    return f"sqlite:///{absolute}{mark}{query}"


def launcher(args: list[str]) -> dict[str, Any]:
    """The client entry that runs ``engram ARGS`` with this installation, from anywhere."""
    script = Path(sys.executable).parent / ("engram.exe" if os.name == "nt" else "engram")
    entry: dict[str, Any] = (
        {"command": str(script), "args": args}
        if script.is_file()
        else {"command": sys.executable, "args": ["-m", "engram.cli", *args]}
    )
    source = _source_root()
    if source is not None:
        entry["env"] = {"PYTHONPATH": str(source)}
    return entry


def _source_root() -> Path | None:
    """The directory ``engram`` is imported from, when the interpreter alone would not find it.

    (A checkout on PYTHONPATH: the client's environment has no PYTHONPATH.)
    """
    import engram

    root = Path(engram.__file__).resolve().parent.parent
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = [sys.executable, "-c", "import engram; print(engram.__file__)"]
    try:
        found = subprocess.run(
            probe, env=clean, cwd=os.sep, capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return root
    if found.returncode == 0 and Path(found.stdout.strip()).resolve().parent.parent == root:
        return None
    return root
