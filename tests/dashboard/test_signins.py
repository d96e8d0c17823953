"""The dashboard signs in with a sign-in kept in the store: the cookie never holds the key.

The cookie names a random sign-in; ``/logout`` deletes it (a copied cookie stops
working), it ends after ``session_seconds``, a revoked key ends it, and a cookie
holding a raw key (as older versions set) signs nobody in. On a store that keeps
sign-ins, every server on the database shares them. A real server on 127.0.0.1
over every backend.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from tests.dashboard.conftest import LiveServer

import engram
from engram.dashboard.access import COOKIE
from engram.dashboard.signins import SignIns
from engram.engine import Engram
from engram.server import ServerSettings, create_app
from engram.store import Store
from engram.store.api_keys import has_api_keys
from engram.store.sign_ins import has_sign_ins

#: Seconds a request may take: a loaded machine may be slow to answer.
TIMEOUT = 30


@pytest.fixture
def site(mem: Engram) -> Iterator[tuple[str, Engram]]:
    mem.memories("app").create("Pro costs $14.")
    settings = ServerSettings(key_cache_seconds=0, session_seconds=2)
    server = LiveServer(create_app(mem, settings))
    url = server.start()
    try:
        yield url, mem
    finally:
        server.stop()


def _sign_in(url: str, secret: str) -> str:
    answer = httpx.post(f"{url}/login", data={"key": secret}, timeout=TIMEOUT)
    assert answer.status_code == 303
    cookie = answer.cookies[COOKIE]
    assert secret not in cookie and secret not in answer.headers["set-cookie"]
    assert "HttpOnly" in answer.headers["set-cookie"]
    return cookie


def _page(url: str, cookie: str) -> int:
    return httpx.get(f"{url}/p/app/memories", cookies={COOKIE: cookie}, timeout=TIMEOUT).status_code


def test_logout_closes_the_sign_in_on_the_server(site: tuple[str, Engram]) -> None:
    url, mem = site
    secret = mem.api_keys().create(scopes=["app"]).secret
    cookie = _sign_in(url, secret)
    assert _page(url, cookie) == 200
    out = httpx.post(f"{url}/logout", cookies={COOKIE: cookie}, timeout=TIMEOUT)
    assert out.status_code == 303
    assert _page(url, cookie) == 303  # the copied cookie is worth nothing now


def test_a_sign_in_ends_and_a_revoked_key_ends_it(site: tuple[str, Engram]) -> None:
    url, mem = site
    keys = mem.api_keys()
    keys.create(admin=True)  # keys stay required once this one is revoked
    made = keys.create(scopes=["app"])
    cookie = _sign_in(url, made.secret)
    time.sleep(2.2)
    assert _page(url, cookie) == 303
    cookie = _sign_in(url, made.secret)
    keys.revoke(made.record.id)
    assert _page(url, cookie) == 303


def test_a_raw_key_in_a_cookie_signs_nobody_in(site: tuple[str, Engram]) -> None:
    url, mem = site
    secret = mem.api_keys().create(scopes=["app"]).secret
    for name in (COOKIE, "engram_key"):
        answer = httpx.get(f"{url}/p/app/memories", cookies={name: secret}, timeout=TIMEOUT)
        assert answer.status_code == 303 and answer.headers["location"].startswith("/login")


def test_servers_on_one_database_share_sign_ins(
    site: tuple[str, Engram], open_engram: Callable[..., Engram]
) -> None:
    url, mem = site
    if not has_sign_ins(mem.store):
        pytest.skip("this backend keeps sign-ins in the server process")
    secret = mem.api_keys().create(scopes=["app"]).secret
    settings = ServerSettings(key_cache_seconds=0, session_seconds=2)
    second = LiveServer(create_app(open_engram(), settings))  # another server, same database
    other = second.start()
    try:
        cookie = _sign_in(url, secret)
        assert _page(other, cookie) == 200
        out = httpx.post(f"{other}/logout", cookies={COOKIE: cookie}, timeout=TIMEOUT)
        assert out.status_code == 303
        assert _page(url, cookie) == 303 and _page(other, cookie) == 303
    finally:
        second.stop()


def test_sign_ins_are_random_bounded_and_end(store: Store) -> None:
    assert has_api_keys(store)
    one = store.add_api_key(
        "1" * 64, prefix="egk_a", label="", admin=True, scopes=(), writable=True
    )
    two = store.add_api_key(
        "2" * 64, prefix="egk_b", label="", admin=True, scopes=(), writable=True
    )
    now = [1_800_000_000.0]
    sign_ins = SignIns(store, 10, clock=lambda: now[0], limit=20)
    first, second = sign_ins.open(one), sign_ins.open(one)
    assert first != second and len(first) >= 43
    assert sign_ins.key(first) == one and sign_ins.key("forged") is None
    sign_ins.close(first)
    assert sign_ins.key(first) is None and sign_ins.key(second) == one
    now[0] += 10
    assert sign_ins.key(second) is None
    opened = []
    for _ in range(25):
        now[0] += 0.001
        opened.append(sign_ins.open(two))
    assert [sign_ins.key(s) is not None for s in opened] == [False] * 5 + [True] * 20


def test_the_database_keeps_no_sign_in_id(tmp_path: Path) -> None:
    path = tmp_path / "engram.db"
    with engram.open(f"sqlite:///{path}", llm=None) as mem:
        key = mem.api_keys().create(admin=True).record
        sign_in = SignIns(mem.store, 60).open(key)
        assert SignIns(mem.store, 60).key(sign_in) == key  # another process reads the same row
    kept = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert sign_in.encode() not in kept  # only its SHA-256 is kept
    assert hashlib.sha256(sign_in.encode()).hexdigest().encode() in kept
