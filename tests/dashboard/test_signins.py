"""The dashboard signs in with a session the server keeps: the cookie never holds the key.

The cookie names a random sign-in; ``/logout`` closes it on the server (a copied
cookie stops working), it ends after ``session_seconds``, a revoked key ends it, and
a cookie holding a raw key (as older versions set) signs nobody in. A real server on
127.0.0.1 over every backend.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from tests.dashboard.conftest import LiveServer

from engram.dashboard.access import COOKIE
from engram.dashboard.signins import MAX_SIGN_INS, SignIns
from engram.engine import Engram
from engram.server import ServerSettings, create_app

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


def test_sign_ins_are_random_bounded_and_end() -> None:
    now = [0.0]
    sign_ins = SignIns(10, clock=lambda: now[0])
    first, second = sign_ins.open("egk_a"), sign_ins.open("egk_a")
    assert first != second and len(first) >= 43
    assert sign_ins.key(first) == "egk_a" and sign_ins.key("forged") is None
    sign_ins.close(first)
    assert sign_ins.key(first) is None and sign_ins.key(second) == "egk_a"
    now[0] = 10
    assert sign_ins.key(second) is None
    for _ in range(MAX_SIGN_INS + 5):
        sign_ins.open("egk_b")
    assert len(sign_ins._open) <= MAX_SIGN_INS
