"""Fixtures of the server tests: the app over a real store, and clients with or without keys."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import engram
from engram.engine import Engram
from engram.server import ServerSettings, create_app

#: No caching of key checks in tests: a revoked key is refused at once.
NO_CACHE = ServerSettings(key_cache_seconds=0)


@pytest.fixture
def sqlite_engram(tmp_path: Path) -> Iterator[Engram]:
    """An Engram with no model on a fresh SQLite file."""
    with engram.open(f"sqlite:///{tmp_path / 'server.db'}", llm=None) as mem:
        yield mem


@pytest.fixture
def make_client() -> Iterator[Callable[..., TestClient]]:
    """Builds test clients of an app over a given Engram (closed after the test)."""
    opened: list[TestClient] = []

    def make(mem: Engram, key: str | None = None, **options: object) -> TestClient:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        client = TestClient(create_app(mem, NO_CACHE), headers=headers, **options)  # type: ignore[arg-type]
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.close()


@pytest.fixture
def api(sqlite_engram: Engram, make_client: Callable[..., TestClient]) -> TestClient:
    """A client of the app over SQLite in local mode (no key in the store)."""
    return make_client(sqlite_engram)
