"""Helpers of the memory tests: scripted LLM answers, realistic conversations."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from engram.engine import Engram, Session
from engram.memories import Memories
from engram.testing import FakeResponse, RecordedRequest

CREATION_MARK = "You are a memory creation assistant."
DECISION_MARK = "You are a memory management assistant."
_ID_LINE = re.compile(r"^- id (\d+) ", re.MULTILINE)


def prompt_of(request: RecordedRequest) -> str:
    return str(request.messages[-1].get("content", "")) if request.messages else ""


def listed_ids(prompt: str) -> list[int]:
    """Memory ids in a decision prompt, in the order shown (existing first, new last)."""
    return [int(x) for x in _ID_LINE.findall(prompt)]


def smart_responder(
    memory_text: Callable[[str], str] | None = None,
    decide: Callable[[list[int]], dict[str, object]] | None = None,
) -> Callable[[RecordedRequest], FakeResponse]:
    """Answer creation prompts with ``memory_text(prompt)`` and decisions with ``decide(ids)``."""

    def respond(request: RecordedRequest) -> FakeResponse:
        prompt = prompt_of(request)
        if prompt.startswith(DECISION_MARK):
            ids = listed_ids(prompt)
            data = (
                decide(ids)
                if decide
                else {"action": "delete", "targetMemoryId": ids[0], "reason": "oldest is stale"}
            )
            return FakeResponse(content=json.dumps(data))
        if prompt.startswith(CREATION_MARK):
            text = memory_text(prompt) if memory_text else "User talked about something."
            return FakeResponse(content=text)
        return FakeResponse(content="unexpected prompt")

    return respond


def converse(mem: Engram, session: str, scope: str, turns: list[tuple[str, str]]) -> Session:
    """A realistic conversation: user/assistant pairs stored through the engine."""
    chat = mem.session(session, scope=scope)
    for user, assistant in turns:
        chat.add("user", user)
        chat.add("assistant", assistant)
    return chat


def fill(memories: Memories, n: int, prefix: str = "Fact") -> list[int]:
    """Create ``n`` clearly distinct memories; returns their ids."""
    words = [
        "alpha",
        "bravo",
        "charlie",
        "delta",
        "echo",
        "foxtrot",
        "golf",
        "hotel",
        "india",
        "juliet",
        "kilo",
        "lima",
        "mike",
        "november",
        "oscar",
        "papa",
    ]
    ids = []
    for i in range(n):
        text = f"{prefix} {i}: the user mentioned {words[i % len(words)]} number {i * 7 + 3}."
        ids.append(memories.create(text).id)
    return ids
