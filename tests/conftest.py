"""Shared fixtures: a ``store`` on every backend, so one contract suite runs everywhere.

``BACKENDS`` lists the backends the contract runs on. A backend whose module
(or, for PostgreSQL, the ``tests/pg.py`` helper) cannot be imported is skipped
with the reason, never silently dropped.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.facades import FACADES, facade

import engram
from engram.engine import Engram
from engram.llm import LLMClient
from engram.store import Store, open_store
from engram.testing import FakeLLMServer

BACKENDS = ["sqlite", "jsondir", "postgres", "memory"]

_MODULES = {
    "sqlite": "engram.store.sqlite.backend",
    "jsondir": "engram.store.jsondir.backend",
    "postgres": "engram.store.postgres.backend",
    "memory": "engram.store.memory.backend",
}


def _require(backend: str) -> None:
    try:
        importlib.import_module(_MODULES[backend])
    except ImportError as exc:
        pytest.skip(f"{backend} backend not importable yet: {exc}")


def _postgres_url(request: pytest.FixtureRequest) -> str:
    try:
        from tests.pg import fresh_postgres_url
    except ImportError:
        try:
            from pg import fresh_postgres_url  # type: ignore[import-not-found,no-redef]
        except ImportError as exc:
            pytest.skip(f"tests/pg.py (PostgreSQL test server) not importable: {exc}")
    return fresh_postgres_url(request)


@pytest.fixture(
    params=[
        pytest.param(name, id=name, marks=[pytest.mark.postgres] if name == "postgres" else [])
        for name in BACKENDS
    ]
)
def store_url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    """A URL to a fresh, empty store of each backend in turn."""
    backend: str = request.param
    _require(backend)
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/engram.db"
    if backend == "jsondir":
        return f"jsondir://{tmp_path}/ctx"
    if backend == "memory":
        return f"memory://{tmp_path}"  # a name unique to the test
    return _postgres_url(request)


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> str:
    """A URL to a fresh, empty PostgreSQL schema, dropped after the test."""
    return _postgres_url(request)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An open store on ``store_url``, closed after the test."""
    opened = open_store(store_url)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    """The one test double: a scripted OpenAI-compatible server on 127.0.0.1."""
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def client(fake_llm: FakeLLMServer) -> Iterator[LLMClient]:
    """A real LLM client talking to the scripted server."""
    with LLMClient("gpt-4o-mini", base_url=fake_llm.base_url, timeout=30, backoff=0.01) as c:
        yield c


@pytest.fixture
def open_engram(store_url: str) -> Iterator[Callable[..., Engram]]:
    """Opens ``Engram`` objects on ``store_url`` (no model unless given); all closed after."""
    opened: list[Engram] = []

    def make(**options: Any) -> Engram:
        mem = engram.open(store_url, **{"llm": None, **options})
        opened.append(mem)
        return mem

    yield make
    for mem in reversed(opened):
        mem.close()


@pytest.fixture
def mem(open_engram: Callable[..., Engram]) -> Engram:
    """An ``Engram`` with no model on a fresh store of each backend in turn."""
    return open_engram()


@pytest.fixture
def sqlite_engram(tmp_path: Path) -> Iterator[Engram]:
    """An Engram with no model on a fresh SQLite file."""
    with engram.open(f"sqlite:///{tmp_path / 'engram.db'}", llm=None) as mem:
        yield mem


@pytest.fixture(params=FACADES)
def mem_each_api(request: pytest.FixtureRequest, open_engram: Callable[..., Engram]) -> Any:
    """An ``Engram`` on each backend, through the sync API and through the async facade."""
    return facade(open_engram(), request.param, request)


@pytest.fixture
def mem_llm(open_engram: Callable[..., Engram], client: LLMClient) -> Engram:
    """An ``Engram`` whose model is the scripted server, on each backend in turn."""
    return open_engram(llm=client)
