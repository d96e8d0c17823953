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
from mcp.server.auth.provider import AccessToken
from mcp.shared.exceptions import MCPError
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


#: The two eras the endpoint serves: the initialize handshake, and the stateless revision.
MODES = ["legacy", "2026-07-28"]


def _run(url: str, headers: dict[str, str], body: Any, mode: str = "auto") -> Any:
    async def main() -> Any:
        with anyio.fail_after(60):
            async with httpx2.AsyncClient(headers=headers) as http:
                transport = streamable_http_client(f"{url}/mcp", http_client=http)
                async with Client(transport, mode=mode) as client:
                    return await body(client)

    return anyio.run(main)


def _refusal(url: str, headers: dict[str, str], mode: str) -> MCPError:
    """The error the official client raises when the endpoint refuses it."""

    async def tools(client: Client) -> Any:
        return await client.list_tools()

    with pytest.raises(BaseException) as caught:
        _run(url, headers, tools, mode)
    error: BaseException = caught.value
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, MCPError), repr(error)
    return error


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


@pytest.mark.parametrize("mode", MODES)
def test_both_eras_with_keys_and_readable_refusals(mem: Engram, mode: str) -> None:
    keys = mem.api_keys()
    one = keys.create(scopes=["proj"]).secret
    two = keys.create(scopes=["proj", "other"]).secret
    admin = keys.create(admin=True).secret

    async def search(client: Client) -> Any:
        names = [t.name for t in (await client.list_tools()).tools]
        found = await client.call_tool("search_history", {"query": "pricing", "all_sessions": True})
        return names, payload(found)

    with serving(create_app(mem, ServerSettings(key_cache_seconds=0))) as url:
        names, found = _run(url, {"Authorization": f"Bearer {one}"}, search, mode)
        assert "search_history" in names and found["count"] == 2
        both = {"Authorization": f"Bearer {two}", "X-Engram-Scope": "other"}
        _, found = _run(url, both, search, mode)
        assert found["count"] == 1 and "zebra" in found["results"][0]["snippet"]
        _, found = _run(url, {"Authorization": f"Bearer {admin}", "X-Engram-Scope": "proj"},
                        search, mode)  # fmt: skip
        assert found["count"] == 2

        error = _refusal(url, {}, mode)
        assert "Authorization: Bearer KEY" in error.error.message
        assert error.error.data == {"kind": "unauthenticated", "status": 401}
        error = _refusal(url, {"Authorization": "Bearer nope"}, mode)
        assert "unknown or revoked API key" in error.error.message
        error = _refusal(url, {"Authorization": f"Bearer {one}", "X-Engram-Scope": "other"}, mode)
        assert "does not reach scope 'other'" in error.error.message
        assert "X-Engram-Scope" in error.error.message and "'proj'" in error.error.message
        error = _refusal(url, {"Authorization": f"Bearer {two}"}, mode)
        assert "several scopes ('proj', 'other')" in error.error.message
        assert "X-Engram-Scope" in error.error.message
        error = _refusal(url, {"Authorization": f"Bearer {admin}"}, mode)  # admin: name a scope
        assert "admin key" in error.error.message and "X-Engram-Scope" in error.error.message


@pytest.mark.parametrize("mode", MODES)
def test_both_eras_in_local_mode(mem: Engram, mode: str) -> None:
    async def body(client: Client) -> Any:
        wrong = await client.call_tool("search_history", {"query": "x", "colour": "red"})
        memories = await client.call_tool("list_memories", {"session": "no-such-session"})
        schema = {t.name: t.input_schema for t in (await client.list_tools()).tools}
        return payload(wrong), payload(memories), schema

    with serving(create_app(mem, ServerSettings(key_cache_seconds=0))) as url:
        wrong, memories, schema = _run(url, {"X-Engram-Scope": "proj"}, body, mode)
    # Every accepted parameter is listed, the session too.
    assert wrong["error"]["type"] == "invalid_arguments"
    assert "colour" in wrong["error"]["message"] and "session" in wrong["error"]["message"]
    # Memories belong to the scope: an unknown session is no error for them.
    assert [m["content"] for m in memories["memories"]] == ["User prefers meetings after 2pm"]
    assert "session" in schema["search_history"]["properties"]
    assert "session" not in schema["list_memories"]["properties"]


def test_unauthenticated_answers_point_at_the_resource_metadata(mem: Engram) -> None:
    mem.api_keys().create(scopes=["proj"])
    with serving(create_app(mem, ServerSettings(key_cache_seconds=0))) as url:
        with httpx2.Client() as http:
            ask = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}
            accept = {"Accept": "application/json, text/event-stream"}
            refused = http.post(f"{url}/mcp", json=ask, headers=accept)
            assert refused.status_code == 401
            assert refused.json()["id"] == 7 and refused.json()["error"]["code"] == -32600
            where = f"{url}/.well-known/oauth-protected-resource/mcp"
            assert refused.headers["www-authenticate"] == f'Bearer resource_metadata="{where}"'
            bad = http.post(f"{url}/mcp", json=ask, headers={**accept, "Authorization": "Bearer x"})
            assert 'error="invalid_token"' in bad.headers["www-authenticate"]
            document = http.get(where).json()
            assert document["resource"] == f"{url}/mcp"
            assert document["bearer_methods_supported"] == ["header"]
            assert "authorization_servers" not in document  # API keys only


class Tokens:
    """An operator's verifier, as for an OAuth authorization server's tokens."""

    async def verify_token(self, token: str) -> AccessToken | None:
        if token != "oauth-token":
            return None
        scopes = ["engram:scope:proj", "engram:read-only"]
        return AccessToken(token=token, client_id="desktop", scopes=scopes)


@pytest.mark.parametrize("mode", MODES)
def test_an_operators_token_verifier(mem: Engram, mode: str) -> None:
    mem.api_keys().create(scopes=["other"])  # keys exist: a bearer is needed
    settings = ServerSettings(
        key_cache_seconds=0,
        mcp_token_verifier=Tokens(),
        mcp_authorization_servers=("https://auth.example.com",),
    )

    async def names(client: Client) -> Any:
        return [t.name for t in (await client.list_tools()).tools]

    with serving(create_app(mem, settings)) as url:
        found = _run(url, {"Authorization": "Bearer oauth-token"}, names, mode)
        assert "search_history" in found and "add_memory" not in found  # read-only token
        error = _refusal(url, {"Authorization": "Bearer forged"}, mode)
        assert "unknown" in error.error.message
        with httpx2.Client() as http:
            where = f"{url}/.well-known/oauth-protected-resource/mcp"
            document = http.get(where).json()
    assert document["authorization_servers"] == ["https://auth.example.com"]
