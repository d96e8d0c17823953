"""Fixtures for the memory tests: a real SQLite file, real sessions, a fake LLM over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import engram
from engram.background.local import MemoryWorker
from engram.engine import Engram
from engram.llm import LLMClient
from engram.testing import FakeLLMServer


@pytest.fixture
def client(fake_llm: FakeLLMServer) -> Iterator[LLMClient]:
    with LLMClient("gpt-4o-mini", base_url=fake_llm.base_url, timeout=5, backoff=0.01) as c:
        yield c


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/m.db"


@pytest.fixture
def mem(db_url: str) -> Iterator[Engram]:
    opened = engram.open(db_url)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def worker() -> Iterator[MemoryWorker]:
    with MemoryWorker(2) as pool:
        yield pool
