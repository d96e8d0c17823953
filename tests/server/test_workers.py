"""``engram serve --workers N``: several processes on one port and one store."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from tests.cli.harness import Cli
from tests.server.live import LiveServer

import engram


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


def _workers(pid: int) -> int:
    """Children of the server that run uvicorn workers (not multiprocessing's tracker)."""
    commands = [Path(f"/proc/{c}/cmdline").read_bytes() for c in _children(pid)]
    return sum(b"spawn_main" in command for command in commands)


@pytest.mark.slow
def test_two_workers_serve_one_store(store_url: str) -> None:
    if not store_url.startswith(("sqlite", "postgres")):
        pytest.skip("only SQLite and PostgreSQL can be shared by processes")
    with LiveServer(store_url, "--workers", "2") as server:
        assert _workers(server.process.pid) == 2
        base = f"{server.base_url}/v1/scopes/team/sessions/s"

        def turn(i: int) -> int:
            with httpx.Client(timeout=30) as http:
                stored = http.post(f"{base}/messages", json={"role": "user", "content": f"q{i}"})
                ctx = http.post(f"{base}/context", json={"budget": 4000})
                return stored.status_code * 1000 + ctx.status_code

        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(turn, range(40)))
    assert codes == [201_200] * 40
    assert "workers    2 processes" in server.output
    assert server.process.returncode == 0
    with engram.open(store_url, llm=None) as mem:
        stored = [m.content for m in mem.session("s", scope="team").messages(limit=100)]
    assert sorted(stored) == sorted(f"q{i}" for i in range(40))  # each once, none lost


def test_workers_need_a_store_processes_can_share(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    refused = cli("serve", "--workers", "2", url=f"jsondir://{tmp_path}/docs")
    assert refused.exit_code == 1
    assert "--workers 2 needs a store the processes can share" in refused.output
