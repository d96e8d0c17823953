"""``engram serve --workers N``: several processes on one port and one store."""

from __future__ import annotations

import http.client
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from tests.cli.harness import Cli
from tests.server.live import LiveServer

import engram
from engram.dashboard.access import COOKIE
from engram.server.settings import ServerSettings
from engram.server.workers import per_worker


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


def _worker_pids(pid: int) -> list[int]:
    """Children of the server that run uvicorn workers (not multiprocessing's tracker)."""
    return [c for c in _children(pid) if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


def _workers(pid: int) -> int:
    return len(_worker_pids(pid))


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


def test_workers_with_the_proxy_need_a_store_that_holds_locks(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    args = ("serve", "--workers", "2", "--upstream", "http://127.0.0.1:9/v1")
    refused = cli(*args, url=f"sqlite:///{tmp_path}/p.db")
    assert refused.exit_code == 1
    assert "--workers 2 with the proxy needs PostgreSQL" in refused.output


def _socket_owner(server_port: int, client_port: int, pids: list[int]) -> int:
    """The worker holding the server side of the connection from ``client_port`` (0 if none)."""
    inode = ""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if (
            int(fields[1].rsplit(":", 1)[1], 16) == server_port
            and int(fields[2].rsplit(":", 1)[1], 16) == client_port
        ):
            inode = fields[9]
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd) == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue  # closed meanwhile
    return 0


def _page_on_a_fresh_connection(server: LiveServer, cookie: str) -> tuple[int, int]:
    """(status of a dashboard page, pid of the worker that answered) on a new connection."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("GET", "/p/app/memories", headers={"Cookie": f"{COOKIE}={cookie}"})
        answer = conn.getresponse()
        answer.read()
        assert conn.sock is not None  # still open (keep-alive): its worker can be found
        client_port = conn.sock.getsockname()[1]
        workers = _worker_pids(server.process.pid)
        return answer.status, _socket_owner(server.port, client_port, workers)
    finally:
        conn.close()


def _pages_until_both_workers_answer(server: LiveServer, cookie: str) -> dict[int, set[int]]:
    """Statuses per worker pid, from fresh connections: 20 at least, until both workers answered."""
    seen: dict[int, set[int]] = {}
    with ThreadPoolExecutor(4) as pool:
        for turn in range(100):
            for status, pid in pool.map(
                lambda _: _page_on_a_fresh_connection(server, cookie), "abcd"
            ):
                seen.setdefault(pid, set()).add(status)
            if turn >= 4 and len(seen.keys() - {0}) >= 2:
                break
    return seen


@pytest.mark.slow
def test_a_dashboard_sign_in_holds_on_every_worker_until_logout(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'engram.db'}"
    with engram.open(url, llm=None) as mem:
        mem.memories("app").create("Pro costs $14.")
        secret = mem.api_keys().create(scopes=["app"]).secret
    with LiveServer(url, "--workers", "2") as server, httpx.Client(timeout=30) as browser:
        signed = browser.post(f"{server.base_url}/login", data={"key": secret})
        assert signed.status_code == 303
        cookie = signed.cookies[COOKIE]  # the browser keeps it for /logout below
        signed_in = _pages_until_both_workers_answer(server, cookie)
        assert len(signed_in.keys() - {0}) == 2, signed_in  # both workers answered
        assert all(statuses == {200} for statuses in signed_in.values()), signed_in
        assert browser.post(f"{server.base_url}/logout").status_code == 303
        signed_out = _pages_until_both_workers_answer(server, cookie)  # a copy of the cookie
        assert len(signed_out.keys() - {0}) == 2, signed_out
        assert all(statuses == {303} for statuses in signed_out.values()), signed_out


@pytest.mark.slow
def test_the_key_failure_limit_holds_across_workers(store_url: str) -> None:
    if not store_url.startswith(("sqlite", "postgres")):
        pytest.skip("only SQLite and PostgreSQL can be shared by processes")
    with engram.open(store_url, llm=None) as mem:
        mem.api_keys().create(admin=True)
    args = ("--workers", "2", "--key-failures", "4", "--key-failure-window", "600")
    with LiveServer(store_url, *args) as server:
        codes = []
        for _ in range(10):  # a fresh connection each: any worker may answer
            with httpx.Client(timeout=30) as http:
                wrong = {"Authorization": "Bearer egk_wrong"}
                codes.append(http.get(f"{server.base_url}/v1/scopes", headers=wrong).status_code)
    assert set(codes) <= {401, 429}
    # Each worker used to allow the whole limit: up to 8 failures before every one said 429.
    assert codes.count(401) <= 4 and 429 in codes, codes  # a worker below its share still checks


def test_each_worker_gets_a_share_of_the_key_failure_limit() -> None:
    settings = ServerSettings(key_failures=10)
    assert per_worker(settings, 1).key_failures == 10
    assert per_worker(settings, 3).key_failures == 4  # 3 x 4 = 12: at most 2 more in all
    assert per_worker(ServerSettings(key_failures=0), 4).key_failures == 0  # still off
    assert per_worker(ServerSettings(key_failures=1), 4).key_failures == 1
