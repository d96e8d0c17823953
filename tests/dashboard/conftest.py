"""Fixtures of the dashboard tests: a real server on 127.0.0.1 and Debian's Chromium.

The browser is Debian's ``chromium`` package (``make test`` installs it when
it is missing), driven by Playwright through ``executable_path``: Playwright
never downloads a browser of its own here. Screenshots of every page go to
``tests/artifacts/`` on every run; with ``ENGRAM_DOC_IMAGES=1`` they are also
written to ``docs/images/`` for the README.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.dashboard.sample import OTHER_SCOPE, SCOPE, fill

import engram
from engram.engine import Engram

CHROMIUM = Path(os.environ.get("ENGRAM_CHROMIUM", "/usr/bin/chromium"))
#: Flags for a sandboxed, offline, headless Chromium (a fresh profile is given per run).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
DOC_IMAGES = ROOT / "docs" / "images"
#: Longest wait for the server to start or stop.
SERVER_SECONDS = 15.0


@dataclass(frozen=True)
class Site:
    """The dashboard under test: its URL, the Engram behind it, and keys."""

    url: str
    engram: Engram
    phoenix_key: str
    atlas_key: str


class LiveServer:
    """uvicorn serving an app on 127.0.0.1 (a free port) in a thread; stopped by ``stop``."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + SERVER_SECONDS
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(SERVER_SECONDS)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """Both sample projects served by ``engram serve``'s app, with one key per project."""
    from engram.server import ServerSettings, create_app

    path = tmp_path_factory.mktemp("dashboard") / "dash.db"
    with engram.open(f"sqlite:///{path}", llm=None, memory_cap=3) as mem:
        fill(mem)
        keys = mem.api_keys()
        phoenix = keys.create(scopes=[SCOPE], label="phoenix team").secret
        atlas = keys.create(scopes=[OTHER_SCOPE], label="atlas team").secret
        server = LiveServer(create_app(mem, ServerSettings(key_cache_seconds=0)))
        url = server.start()
        try:
            yield Site(url, mem, phoenix, atlas)
        finally:
            server.stop()


@pytest.fixture(scope="module")
def browser_context() -> Iterator[Any]:
    """One headless Debian Chromium with a fresh profile for the module."""
    if not CHROMIUM.exists():
        pytest.skip(f"Debian's chromium is not installed at {CHROMIUM} (make test installs it)")
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="engram-chromium-")
    try:
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                profile,
                executable_path=str(CHROMIUM),
                args=CHROMIUM_ARGS,
                headless=True,
                viewport={"width": 1280, "height": 900},
            )
            context.set_default_timeout(30_000)  # slow steps on a loaded 2-core machine
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser_context: Any) -> Iterator[Any]:
    """A new tab with no cookie (signed out)."""
    browser_context.clear_cookies()
    tab = browser_context.new_page()
    try:
        yield tab
    finally:
        tab.close()


def screenshot(page: Any, name: str, *, full_page: bool = False, doc: bool = True) -> Path:
    """Save a screenshot under tests/artifacts (and docs/images with ENGRAM_DOC_IMAGES=1)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(target), full_page=full_page)
    if doc and os.environ.get("ENGRAM_DOC_IMAGES") == "1":
        DOC_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(target, DOC_IMAGES / f"dashboard-{name}.png")
    return target
