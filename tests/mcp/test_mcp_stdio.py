"""``engram mcp`` over stdio, spawned and driven by the SDK's own client."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_helpers import ROOT, payload, run_client, stdio_params

import engram

pytestmark = pytest.mark.slow


def _seed(url: str) -> None:
    with engram.open(url, llm=None) as mem:
        chat = mem.session("chat", "proj")
        chat.add("user", "We decided the pricing is 20 dollars per seat")
        chat.add("assistant", "Noted: pricing at 20 dollars per seat")
        mem.session("vault", "other").add("user", "the pricing secret of another scope")


def test_engram_mcp_serves_one_scope_over_stdio(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/engram.db"
    _seed(url)

    async def body(client: Client) -> Any:
        names = [t.name for t in (await client.list_tools()).tools]
        search = await client.call_tool(
            "search_history", {"query": "pricing", "all_sessions": True}
        )
        added = await client.call_tool("add_memory", {"content": "Prices are per seat"})
        bad = await client.call_tool("get_messages_by_date", {"date": "not a date at all"})
        return names, search, added, bad

    names, search, added, bad = run_client(
        stdio_params("mcp", "--db", url, "--scope", "proj", "--session", "chat"), body
    )
    assert "search_history" in names and "delete_memory" in names
    found = payload(search)
    assert found["count"] >= 1 and "another scope" not in str(found)  # never the other scope
    assert not added.is_error
    assert bad.is_error and payload(bad)["error"]["type"] == "invalid_date"
    with engram.open(url, llm=None) as mem:
        assert [m.content for m in mem.memories("proj").list()] == ["Prices are per seat"]


def test_read_only_over_stdio(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/engram.db"
    _seed(url)

    async def body(client: Client) -> Any:
        return [t.name for t in (await client.list_tools()).tools]

    names = run_client(stdio_params("--db", url, "mcp", "--scope", "proj", "--read-only"), body)
    assert "search_history" in names
    assert not {"add_memory", "edit_memory", "delete_memory"} & set(names)


def test_readme_configuration_works_as_written(tmp_path: Path) -> None:
    """The README's JSON snippet, launched the way an MCP client launches it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    snippet = next(
        b for b in re.findall(r"```json\n(.*?)```", readme, re.DOTALL) if "mcpServers" in b
    )
    entry = json.loads(snippet)["mcpServers"]["engram"]
    bin_dir = str(Path(sys.executable).parent)
    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={"PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]), **stdio_params().env},
        cwd=str(tmp_path),
    )

    async def body(client: Client) -> Any:
        added = await client.call_tool("add_memory", {"content": "The README snippet works"})
        return added, [t.name for t in (await client.list_tools()).tools]

    added, names = run_client(params, body)
    assert not added.is_error and "search_history" in names
    with engram.open(f"sqlite:///{tmp_path}/engram.db", llm=None) as mem:
        assert [m.content for m in mem.memories("my-project").list()] == [
            "The README snippet works"
        ]
