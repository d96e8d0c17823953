from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from engram.engine import Engram
from engram.mcp import Binding, build_server

ROOT = Path(__file__).resolve().parents[2]


def run_client(target: Any, body: Callable[[Client], Awaitable[Any]]) -> Any:
    """Connect the SDK's client to ``target``, run ``body`` and return what it returns."""

    async def main() -> Any:
        with anyio.fail_after(60):
            async with Client(target) as client:
                return await body(client)

    return anyio.run(main)


def in_process(mem: Engram, binding: Binding) -> Any:
    """The MCP server for ``binding``, connected in-process by the SDK's client."""
    return build_server(mem, lambda _ctx: binding)


def stdio_params(*args: str) -> StdioServerParameters:
    """``python -m engram.cli mcp ...`` as a subprocess of the SDK's stdio client."""
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "engram.cli", *args],
        env={"PYTHONPATH": path},
        cwd=str(ROOT),
    )


def payload(result: Any) -> Any:
    """The JSON a tool result carries as text."""
    return json.loads(result.content[0].text)


def seed(mem: Engram) -> Engram:
    """Two scopes: "proj" with a conversation and a memory, "other" with a secret."""
    chat = mem.session("chat", "proj")
    chat.add(
        "user", "We decided the pricing is 20 dollars per seat", created_at="2025-03-03T10:00:00Z"
    )
    chat.add(
        "assistant", "Noted: pricing at 20 dollars per seat", created_at="2025-03-03T10:01:00Z"
    )
    mem.session("second", "proj").add("user", "Second conversation about deployment")
    mem.memories("proj").create("User prefers meetings after 2pm")
    mem.session("vault", "other").add("user", "the secret launch code is pricing-zebra")
    mem.memories("other").create("Other scope's private memory about zebras")
    return mem
