"""``engram serve``: a real uvicorn server on 127.0.0.1, and its start-up rules."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from tests.cli.harness import Cli
from tests.server.live import LiveServer

import engram


@pytest.mark.slow
def test_a_real_server_end_to_end(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'live.db'}"
    with engram.open(url, llm=None) as mem:
        key = mem.api_keys().create(scopes=["team"]).secret
        admin = mem.api_keys().create(admin=True).secret
    with LiveServer(url) as server:
        auth = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=server.base_url, headers=auth, timeout=30) as http:
            appended = http.post(
                "/v1/scopes/team/sessions/s/messages",
                json={"messages": [{"role": "user", "content": "Deploy on Friday?"}]},
            )
            assert appended.status_code == 201
            ctx = http.post("/v1/scopes/team/sessions/s/context", json={"budget": 500}).json()
            assert ctx["messages"][-1]["content"] == "Deploy on Friday?"
            assert http.get("/v1/scopes/other/sessions").status_code == 403
            assert http.delete("/v1/scopes/team").status_code == 403
            assert httpx.get(f"{server.base_url}/v1/scopes", timeout=10).status_code == 401
            as_admin = {"Authorization": f"Bearer {admin}"}
            gone = http.delete("/v1/scopes/team/sessions/s", headers=as_admin)
            assert gone.json()["success"] is True
            assert gone.json()["receipt"]["action"] == "delete_session"
            assert "engram_http_requests_total" in http.get("/metrics").text
    assert "2 API key(s)" in server.output
    assert f"MCP        {server.base_url}/mcp" in server.output  # the mcp extra is installed
    assert server.process.returncode == 0  # a clean shutdown on SIGTERM


def test_serving_beyond_this_machine_without_a_key_is_refused(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    refused = cli("serve", "--host", "0.0.0.0", "--port", "1")
    assert refused.exit_code == 1
    assert "refusing to listen on 0.0.0.0 with no API key" in refused.output
