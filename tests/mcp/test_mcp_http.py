"""MCP over streamable HTTP at /mcp of the server app, behind the API keys (the SDK's client)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_helpers import payload, seed
from tests.proxy.live import serving

import engram
from engram.engine import Engram
from engram.server import ServerSettings, create_app


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Engram]:
    with engram.open(f"sqlite:///{tmp_path / 'mcp.db'}", llm=None) as opened:
        seed(opened)
        yield opened


def _run(url: str, headers: dict[str, str], body: Any) -> Any:
    async def main() -> Any:
        with anyio.fail_after(60):
            async with httpx2.AsyncClient(headers=headers) as http:
                async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                    return await body(client)

    return anyio.run(main)


def test_the_key_decides_the_scope_and_the_rights(mem: Engram) -> None:
    keys = mem.api_keys()
    writer = keys.create(scopes=["proj"]).secret
    reader = keys.create(scopes=["proj"], read_only=True).secret
    outsider = keys.create(scopes=["other"]).secret

    async def names_and_search(client: Client) -> Any:
        names = [t.name for t in (await client.list_tools()).tools]
        found = await client.call_tool("search_history", {"query": "pricing", "all_sessions": True})
        return names, found

    with serving(create_app(mem, ServerSettings(key_cache_seconds=0))) as url:
        names, found = _run(url, {"Authorization": f"Bearer {writer}"}, names_and_search)
        assert "add_memory" in names and payload(found)["count"] == 2
        names, _ = _run(url, {"Authorization": f"Bearer {reader}"}, names_and_search)
        assert "search_history" in names and "add_memory" not in names
        # The outsider's key reaches only "other": its search never sees "proj".
        _, found = _run(url, {"Authorization": f"Bearer {outsider}"}, names_and_search)
        assert payload(found)["count"] == 1 and "zebra" in payload(found)["results"][0]["snippet"]

        async def added(client: Client) -> Any:
            return await client.call_tool("add_memory", {"content": "Added over HTTP"})

        result = _run(url, {"Authorization": f"Bearer {writer}", "X-Engram-Session": "chat"}, added)
        assert not result.is_error
        assert "Added over HTTP" in [m.content for m in mem.memories("proj").list()]

        with httpx2.Client() as http:
            hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            accept = {"Accept": "application/json, text/event-stream"}
            assert http.post(f"{url}/mcp", json=hello, headers=accept).status_code == 401
            wrong = {**accept, "Authorization": f"Bearer {outsider}", "X-Engram-Scope": "proj"}
            refused = http.post(f"{url}/mcp", json=hello, headers=wrong)
            assert refused.status_code == 403 and "proj" in refused.json()["error"]["message"]
