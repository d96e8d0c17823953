"""The API documentation at /docs renders in Chromium from files Engram serves itself.

Nothing is fetched from a CDN: every request the page makes goes to the server
on 127.0.0.1 (any other is recorded, then refused, so the test never depends
on the network).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient
from tests.dashboard.conftest import (  # noqa: F401 (browser_context and page are fixtures)
    LiveServer,
    browser_context,
    page,
    screenshot,
)

import engram
from engram.server import ServerSettings, create_app

METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}


@pytest.fixture(scope="module")
def docs_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("docs") / "docs.db"
    with engram.open(f"sqlite:///{path}", llm=None) as mem:
        server = LiveServer(create_app(mem, ServerSettings(key_cache_seconds=0)))
        url = server.start()
        try:
            yield url
        finally:
            server.stop()


def test_the_docs_page_loads_its_assets_from_the_server(api: TestClient) -> None:
    html = api.get("/docs").text
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
        assert f"/docs/static/{asset}" in html
        assert api.get(f"/docs/static/{asset}").status_code == 200
    assert "cdn" not in html.lower() and "https://" not in html


def test_the_vendored_assets_keep_their_license(api: TestClient) -> None:
    from engram.server import api_docs

    assert (api_docs.STATIC_DIR / "swagger-ui-LICENSE").is_file()
    assert "swagger-ui-dist" in (api_docs.STATIC_DIR / "VENDORED.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_docs_render_offline_in_chromium(docs_url: str, page: Any) -> None:  # noqa: F811
    requested: list[str] = []

    def only_local(route: Any) -> None:
        requested.append(route.request.url)
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            route.abort()

    page.route("**/*", only_local)
    page.goto(f"{docs_url}/docs")  # waits for the load event: the page's scripts and styles
    assert [url for url in requested if urlsplit(url).hostname != "127.0.0.1"] == []
    page.wait_for_selector(".opblock", timeout=20_000)
    spec = page.request.get(f"{docs_url}/openapi.json").json()
    operations = sum(1 for item in spec["paths"].values() for method in item if method in METHODS)
    page.wait_for_function("n => document.querySelectorAll('.opblock').length >= n", arg=operations)
    assert page.locator(".opblock").count() == operations
    assert page.locator(".info .title").first.inner_text().startswith(spec["info"]["title"])
    outside = [url for url in requested if urlsplit(url).hostname != "127.0.0.1"]
    assert not outside, f"/docs requested outside 127.0.0.1: {outside}"
    assert f"{docs_url}/docs/static/swagger-ui-bundle.js" in requested
    screenshot(page, "api-docs", doc=False)
