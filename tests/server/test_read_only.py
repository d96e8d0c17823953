"""A read-only key never causes a write: its context is built read-only, its tools only read.

``POST .../context`` with a read-only key writes no summary (even when the policy's
compaction is due) and no prompt-log record; a writable key's same call does both,
which shows the test can see a write. A tool that writes is unknown to a read-only
key. On every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from engram.engine import Engram
from engram.tools import add_memory
from engram.tools.registry import install, unregister

CONTEXT = "/v1/scopes/app/sessions/s1/context"


def _long_session(mem: Engram) -> None:
    chat = mem.session("s1", "app", policy="summary_buffer")  # summarizes past 3,000 tokens
    words = " ".join(f"point{i} about the launch plan" for i in range(120))
    chat.add_many(
        [{"role": "user" if i % 2 == 0 else "assistant", "content": words} for i in range(12)]
    )


def _written(mem: Engram) -> tuple[int, int]:
    chat = mem.session("s1", "app")
    return chat.compaction_state().summary_version, chat.prompt_log().turns


def test_a_read_only_context_writes_nothing(
    mem: Engram, make_api: Callable[..., TestClient]
) -> None:
    _long_session(mem)
    keys = mem.api_keys()
    reader = make_api(mem, keys.create(scopes=["app"], read_only=True).secret)
    writer = make_api(mem, keys.create(scopes=["app"]).secret)
    answer = reader.post(CONTEXT, json={"budget": 2000})
    assert answer.status_code == 200 and answer.json()["tokens"] <= 2000
    mem.wait_idle(30)
    assert _written(mem) == (0, 0)
    assert writer.post(CONTEXT, json={"budget": 2000}).status_code == 200
    mem.wait_idle(30)
    version, turns = _written(mem)
    assert version >= 1 and turns == 1


@pytest.fixture
def writing_tool() -> Iterator[str]:
    install(add_memory)
    yield "add_memory"
    unregister("add_memory")


def test_a_read_only_key_reaches_no_tool_that_writes(
    mem: Engram, make_api: Callable[..., TestClient], writing_tool: str
) -> None:
    mem.session("s1", "app").add("user", "hello")
    keys = mem.api_keys()
    reader = make_api(mem, keys.create(scopes=["app"], read_only=True).secret)
    writer = make_api(mem, keys.create(scopes=["app"]).secret)
    call = f"/v1/scopes/app/sessions/s1/tools/{writing_tool}"
    body = {"arguments": {"content": "Planted by a reader."}}
    refused = reader.post(call, json=body).json()["result"]
    assert refused["error"]["type"] == "unknown_tool"
    assert mem.memories("app").list() == []
    assert "error" not in writer.post(call, json=body).json()["result"]
    assert [m.content for m in mem.memories("app").list()] == ["Planted by a reader."]
    searched = reader.post(
        "/v1/scopes/app/sessions/s1/tools/search_history", json={"arguments": {"query": "hello"}}
    )
    assert "error" not in searched.json()["result"]
