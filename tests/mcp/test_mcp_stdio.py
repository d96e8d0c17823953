"""``engram mcp`` over stdio, spawned and driven by the SDK's own client."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
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


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_both_eras_over_stdio(tmp_path: Path, mode: str) -> None:
    url = f"sqlite:///{tmp_path}/engram.db"
    _seed(url)

    async def body(client: Client) -> Any:
        return await client.call_tool("search_history", {"query": "pricing", "session": "chat"})

    async def main() -> Any:
        params = stdio_params("mcp", "--db", url, "--scope", "proj")
        async with Client(params, mode=mode) as client:
            return await body(client)

    found = anyio.run(main)
    assert payload(found)["count"] >= 1 and "20 dollars" in str(payload(found))


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **stdio_params().env}
    command = [sys.executable, "-m", "engram.cli", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_a_relative_database_that_is_not_there_is_refused(tmp_path: Path) -> None:
    done = _cli(tmp_path, "mcp", "--db", "sqlite:///engram.db", "--scope", "proj")
    assert done.returncode == 2 and done.stdout == ""
    assert "relative to the directory" in done.stderr and str(tmp_path) in done.stderr
    assert f"sqlite:///{tmp_path}/engram.db" in done.stderr
    assert not (tmp_path / "engram.db").exists()  # nothing created


def test_the_printed_snippet_works_from_another_directory(tmp_path: Path) -> None:
    """As the README says: engram mcp-config where the database is, then the client starts it."""
    home = tmp_path / "notes"
    home.mkdir()
    _seed(f"sqlite:///{home}/engram.db")
    printed = _cli(home, "mcp-config", "--db", "sqlite:///engram.db", "--scope", "proj")
    assert printed.returncode == 0, printed.stderr
    entry = json.loads(printed.stdout)["mcpServers"]["engram"]
    assert Path(entry["command"]).is_absolute()
    assert f"sqlite:///{home}/engram.db" in entry["args"]
    elsewhere = tmp_path / "client"
    elsewhere.mkdir()
    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={"PATH": "/usr/bin:/bin", **entry.get("env", {})},  # no virtual environment on it
        cwd=str(elsewhere),
    )

    async def body(client: Client) -> Any:
        return await client.call_tool("search_history", {"query": "pricing", "session": "chat"})

    assert "20 dollars" in str(payload(run_client(params, body)))
    assert list(elsewhere.iterdir()) == []  # no stray database where the client runs
    # The README shows the same shape.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    snippet = next(
        b for b in re.findall(r"```json\n(.*?)```", readme, re.DOTALL) if "mcpServers" in b
    )
    shown = json.loads(snippet)["mcpServers"]["engram"]

    def words(args: list[str]) -> list[str]:
        return [a for a in args if a == "mcp" or a.startswith("-")]

    assert words(shown["args"]) == words(entry["args"]) and "engram mcp-config" in readme
