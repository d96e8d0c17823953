"""Every round of the chat loop is a recorded turn that replays to what the model received."""

from __future__ import annotations

import pytest
from tests.chat.test_loop import MODEL, fill

import engram
from engram.chat import run_turn
from engram.llm import LLMClient
from engram.testing import FakeLLMServer


@pytest.mark.parametrize("store_steps", [True, False])
def test_each_round_replays_to_the_request_the_model_received(
    mem: engram.Engram, fake_llm: FakeLLMServer, client: LLMClient, store_steps: bool
) -> None:
    chat = mem.session("loop", scope="p", policy="lean")
    fill(chat, 20)
    usage = {"prompt_tokens": 2000, "completion_tokens": 7,
             "prompt_tokens_details": {"cached_tokens": 1536}}  # fmt: skip
    fake_llm.reply_tool_calls([{"name": "search_history", "arguments": {"query": "pricing"}}])
    fake_llm.reply_tool_calls([{"name": "search_history", "arguments": {"query": "seats"}}])
    fake_llm.reply("59 dollars per seat.", usage=usage)
    result = run_turn(chat, client, "What did we decide about pricing?", budget=6000,
                      model=MODEL, system="You help.", store_steps=store_steps)  # fmt: skip
    assert result.rounds == 3
    turns = chat.prompts()
    assert len(turns) == len(fake_llm.requests) == 3
    for turn, request in zip(turns, fake_llm.requests, strict=True):
        replayed = chat.prompt(turn.turn)
        assert replayed.verified, replayed.missing
        assert replayed.messages == request.messages
        assert request.body is not None
        assert replayed.tools == request.body.get("tools")
        assert replayed.recipe["via"] == "chat"
    assert turns[-1].cached_tokens == 1536
    assert turns[0].cached_tokens is None  # the scripted answer reported no cache
