"""Local mode answers only requests addressed to this machine: DNS rebinding gets 421.

With no API key in the store, a page of another site that resolves its own name to
127.0.0.1 sends ``Host: evil.example``. Such requests are refused before any route
runs (nothing read, nothing changed); loopback names, the address listened on and the
configured names are served; once a key exists, keys decide and any Host is served.
A real server on 127.0.0.1 over every backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.dashboard.conftest import LiveServer

from engram.engine import Engram
from engram.server import ServerSettings, create_app
from engram.server.hosts import host_name, is_loopback_name

#: Seconds a request may take: a loaded machine may be slow to answer.
TIMEOUT = 30


@pytest.fixture
def served(mem: Engram) -> Iterator[tuple[str, Engram]]:
    settings = ServerSettings(key_cache_seconds=0, allowed_hosts=("engram.internal",))
    server = LiveServer(create_app(mem, settings))
    url = server.start()
    try:
        yield url, mem
    finally:
        server.stop()


def _seed(url: str) -> None:
    messages = f"{url}/v1/scopes/app/sessions/s1/messages"
    assert (
        httpx.post(messages, json={"role": "user", "content": "hello"}, timeout=TIMEOUT).status_code
        == 201
    )
    memory = httpx.post(
        f"{url}/v1/scopes/app/memories", json={"content": "Pro costs $14."}, timeout=TIMEOUT
    )
    assert memory.status_code == 201


REQUESTS = [
    ("GET", "/v1/scopes"),
    ("GET", "/v1/scopes/app/sessions/s1/messages"),
    ("DELETE", "/v1/scopes/app/memories"),
    ("DELETE", "/v1/scopes/app/sessions/s1"),
    ("DELETE", "/v1/scopes/app"),
    ("GET", "/"),
    ("GET", "/p/app"),
    ("GET", "/openapi.json"),
]


def test_a_rebound_name_is_refused_and_changes_nothing(served: tuple[str, Engram]) -> None:
    url, mem = served
    _seed(url)
    port = url.rsplit(":", 1)[1]
    for method, path in REQUESTS:
        answer = httpx.request(
            method, url + path, headers={"Host": f"evil.example:{port}"}, timeout=TIMEOUT
        )
        assert answer.status_code == 421, (method, path)
        error = answer.json()["error"]
        assert error["type"] == "misdirected_request" and error["field"] == "Host"
        assert f"'evil.example:{port}'" in error["message"]
        assert "--allowed-host" in error["message"]
    assert [m.content for m in mem.session("s1", "app").messages()] == ["hello"]
    assert len(mem.memories("app").list()) == 1


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "LOCALHOST.", "127.0.0.2", "[::1]", "engram.internal"]
)
def test_this_machines_names_and_the_allowed_ones_are_served(
    served: tuple[str, Engram], host: str
) -> None:
    url, _ = served
    port = url.rsplit(":", 1)[1]
    answer = httpx.get(f"{url}/v1/scopes", headers={"Host": f"{host}:{port}"}, timeout=TIMEOUT)
    assert answer.status_code == 200


def test_with_a_key_any_host_is_served_to_the_key(served: tuple[str, Engram]) -> None:
    url, mem = served
    secret = mem.api_keys().create(admin=True).secret
    evil = {"Host": "evil.example"}
    assert httpx.get(f"{url}/v1/scopes", headers=evil, timeout=TIMEOUT).status_code == 401
    keyed = httpx.get(
        f"{url}/v1/scopes", headers={**evil, "Authorization": f"Bearer {secret}"}, timeout=TIMEOUT
    )
    assert keyed.status_code == 200


def test_host_names() -> None:
    assert host_name("Evil.Example:8000") == "evil.example"
    assert host_name("[::1]:8000") == "::1"
    assert host_name("localhost.") == "localhost"
    assert is_loopback_name("127.9.9.9") and is_loopback_name("::1")
    assert not is_loopback_name("127.0.0.1.nip.io") and not is_loopback_name("0x7f.1")
    assert not is_loopback_name(host_name("evil.example:8000:1"))


@pytest.mark.slow
def test_engram_serve_takes_allowed_hosts(tmp_path: Path) -> None:
    from tests.server.live import LiveServer as ServeProcess

    env = {"ENGRAM_ALLOWED_HOSTS": "other.internal"}
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    with ServeProcess(db, "--allowed-host", "engram.internal", env=env) as server:
        for host, status in [("engram.internal", 200), ("evil.example", 421)]:
            answer = httpx.get(
                f"{server.base_url}/v1/scopes", headers={"Host": host}, timeout=TIMEOUT
            )
            assert answer.status_code == status, host
    with ServeProcess(db, env=env) as server:
        answer = httpx.get(
            f"{server.base_url}/v1/scopes", headers={"Host": "other.internal"}, timeout=TIMEOUT
        )
        assert answer.status_code == 200
