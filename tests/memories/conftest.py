"""Fixtures for the memory tests; ``mem``, ``store_url`` and ``open_engram`` (every backend) come
from tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engram.background.local import MemoryWorker
from engram.llm import LLMClient
from engram.testing import FakeLLMServer


@pytest.fixture
def client(fake_llm: FakeLLMServer) -> Iterator[LLMClient]:
    with LLMClient("gpt-4o-mini", base_url=fake_llm.base_url, timeout=5, backoff=0.01) as c:
        yield c


@pytest.fixture
def worker() -> Iterator[MemoryWorker]:
    with MemoryWorker(2) as pool:
        yield pool
