"""Helpers for the engine-level compaction tests: a model that answers like a summarizer."""

from __future__ import annotations

import json
import re

from engram.testing import FakeResponse, RecordedRequest

_TARGET = re.compile(r"Word count target: (\d+)-(\d+) words")


def summarizer_responder(request: RecordedRequest) -> FakeResponse:
    """Answer summary prompts with a summary in the asked word range, JSON asks with data.

    The important data names the first words of the transcript, so every cycle
    extracts something different and merges can be checked.
    """
    body = request.body or {}
    messages = request.messages
    last = str(messages[-1].get("content", "")) if messages else ""
    if (body.get("response_format") or {}).get("type") == "json_object":
        marker = " ".join(re.sub(r"^\[#\d+\] ", "", last).split()[:4])
        return FakeResponse(
            content=json.dumps(
                {
                    "important_facts": [f"fact from: {marker}"],
                    "user_preferences": {"theme": "dark"} if "dark mode" in last else {},
                }
            )
        )
    found = _TARGET.search(last)
    if found:
        low, high = int(found.group(1)), int(found.group(2))
        words = (low + high) // 2
        return FakeResponse(content=" ".join(["summary"] * (words - 1) + ["end."]))
    return FakeResponse(content="ok")


def long_text(prefix: str, words: int) -> str:
    """``prefix`` followed by ``words`` filler words."""
    return prefix + " " + " ".join(f"word{i % 50}" for i in range(words))
