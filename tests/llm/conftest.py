from __future__ import annotations

from collections.abc import Iterator

import pytest

from engram.llm import LLMClient
from engram.testing import FakeLLMServer


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def client(fake_llm: FakeLLMServer) -> Iterator[LLMClient]:
    with LLMClient("gpt-4o-mini", base_url=fake_llm.base_url, timeout=30, backoff=0.01) as c:
        yield c
