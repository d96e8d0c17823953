"""Failed key checks are throttled per client address: 429 with Retry-After, on every door.

``/v1``, ``/mcp`` and the dashboard's ``/login`` share one count per address; once it
is reached, a key (even the right one) is not looked at until the oldest failure
leaves the window. Requests without a key are not counted. A real server on
127.0.0.1 over every backend.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.dashboard.conftest import LiveServer

import engram
from engram.engine import Engram
from engram.server import ServerSettings, create_app
from engram.server.throttle import MAX_ADDRESSES, FailedKeys, address_key

#: Seconds a request may take: a loaded machine may be slow to answer.
TIMEOUT = 30

WRONG = {"Authorization": "Bearer egk_wrong"}
MCP_HELLO = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}
MCP_ACCEPT = {"Accept": "application/json, text/event-stream", "X-Engram-Scope": "app"}


@pytest.fixture
def served(mem: Engram) -> Iterator[tuple[str, str]]:
    secret = mem.api_keys().create(admin=True).secret
    settings = ServerSettings(key_cache_seconds=0, key_failures=3, key_failure_window=5)
    server = LiveServer(create_app(mem, settings))
    url = server.start()
    try:
        yield url, secret
    finally:
        server.stop()


@pytest.mark.slow
def test_every_door_shares_one_count_and_the_right_key_waits_too(
    served: tuple[str, str],
) -> None:
    url, secret = served
    for _ in range(3):  # requests without a key are not guesses
        assert httpx.get(f"{url}/v1/scopes", timeout=TIMEOUT).status_code == 401
    assert httpx.get(f"{url}/v1/scopes", headers=WRONG, timeout=TIMEOUT).status_code == 401
    refused = httpx.post(
        f"{url}/mcp", json=MCP_HELLO, headers={**WRONG, **MCP_ACCEPT}, timeout=TIMEOUT
    )
    assert refused.status_code == 401
    assert httpx.post(f"{url}/login", data={"key": "egk_wrong"}, timeout=TIMEOUT).status_code == 401
    right = {"Authorization": f"Bearer {secret}"}
    throttled = httpx.get(f"{url}/v1/scopes", headers=right, timeout=TIMEOUT)
    assert throttled.status_code == 429
    assert 1 <= int(throttled.headers["Retry-After"]) <= 5
    error = throttled.json()["error"]
    assert error["type"] == "too_many_failures" and error["field"] == "Authorization"
    assert "try again in" in error["message"] and "3 failed key checks per 5 s" in error["message"]
    login = httpx.post(f"{url}/login", data={"key": secret}, timeout=TIMEOUT)
    assert login.status_code == 429 and "Retry-After" in login.headers
    assert "too many wrong API keys" in login.text
    mcp = httpx.post(f"{url}/mcp", json=MCP_HELLO, headers={**right, **MCP_ACCEPT}, timeout=TIMEOUT)
    assert mcp.status_code == 429 and "Retry-After" in mcp.headers
    assert mcp.json()["error"]["data"]["kind"] == "too_many_failures"
    assert mcp.json()["id"] == 7
    time.sleep(int(throttled.headers["Retry-After"]) + 0.2)
    assert httpx.get(f"{url}/v1/scopes", headers=right, timeout=TIMEOUT).status_code == 200


def test_the_window_slides() -> None:
    now = [0.0]
    failures = FailedKeys(limit=2, window=10, clock=lambda: now[0])
    assert failures.retry_after("10.0.0.1") is None
    failures.failed("10.0.0.1")
    now[0] = 4
    failures.failed("10.0.0.1")
    assert failures.retry_after("10.0.0.1") == 6
    assert failures.retry_after("10.0.0.2") is None  # another address
    now[0] = 10.5  # the first failure left the window
    assert failures.retry_after("10.0.0.1") is None
    assert FailedKeys(limit=0).retry_after("10.0.0.1") is None


def test_an_ipv6_host_counts_with_its_64_and_memory_is_bounded() -> None:
    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:bbbb::9")
    assert address_key("2001:db8:1:3::1") != address_key("2001:db8:1:2::1")
    failures = FailedKeys(limit=1, window=60)
    for index in range(MAX_ADDRESSES + 10):
        failures.failed(f"10.{index // 65536}.{index // 256 % 256}.{index % 256}")
    assert len(failures._failures) <= MAX_ADDRESSES


def test_engram_serve_sets_the_limit(tmp_path: Path) -> None:
    from tests.server.live import LiveServer as ServeProcess

    db = f"sqlite:///{tmp_path / 'serve.db'}"
    with engram.open(db, llm=None) as mem:
        mem.api_keys().create(admin=True)
    env = {"ENGRAM_KEY_FAILURE_WINDOW": "30"}
    with ServeProcess(db, "--key-failures", "1", env=env) as server:
        first = httpx.get(f"{server.base_url}/v1/scopes", headers=WRONG, timeout=TIMEOUT)
        second = httpx.get(f"{server.base_url}/v1/scopes", headers=WRONG, timeout=TIMEOUT)
        assert (first.status_code, second.status_code) == (401, 429)
        assert "1 failed key checks per 30 s" in second.json()["error"]["message"]
