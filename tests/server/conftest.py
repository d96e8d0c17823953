"""Fixtures of the server tests: HTTP test clients (``api``) of the app, with or without keys.

``sqlite_engram`` (the Engram behind them) comes from tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from engram.engine import Engram
from engram.server import ServerSettings, create_app

#: No caching of key checks in tests: a revoked key is refused at once.
NO_CACHE = ServerSettings(key_cache_seconds=0)


@pytest.fixture
def make_api() -> Iterator[Callable[..., TestClient]]:
    """Builds HTTP test clients of an app over a given Engram (closed after the test)."""
    opened: list[TestClient] = []

    def make(mem: Engram, key: str | None = None, **options: object) -> TestClient:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        api = TestClient(create_app(mem, NO_CACHE), headers=headers, **options)  # type: ignore[arg-type]
        opened.append(api)
        return api

    yield make
    for api in opened:
        api.close()


@pytest.fixture
def api(sqlite_engram: Engram, make_api: Callable[..., TestClient]) -> TestClient:
    """An HTTP test client of the app over SQLite in local mode (no key in the store)."""
    return make_api(sqlite_engram)
