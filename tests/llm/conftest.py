"""Fixtures: ``fake_llm`` and ``client`` come from tests/conftest.py.

``ask`` makes one call through each way the client offers (``chat``,
``achat``, ``astream`` read to its end), so the behaviour tests of the client
run on all three unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from engram.llm import LLMClient, LLMResult

Ask = Callable[..., LLMResult]


@pytest.fixture(params=["chat", "achat", "astream"])
def ask(request: pytest.FixtureRequest) -> Ask:
    way: str = request.param

    def call(client: LLMClient, messages: Sequence[Mapping[str, Any]], **options: Any) -> LLMResult:
        if way == "chat":
            return client.chat(messages, **options)

        async def run() -> LLMResult:
            try:
                if way == "achat":
                    return await client.achat(messages, **options)
                pieces, results = [], []
                async for item in client.astream(messages, **options):
                    (results if isinstance(item, LLMResult) else pieces).append(item)
                (result,) = results
                assert "".join(pieces) == result.text
                return result
            finally:
                await client.aclose()

        return asyncio.run(run())

    return call
