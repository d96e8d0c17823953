"""A failed turn retried with ``retry=True`` keeps its question once, on every backend."""

from __future__ import annotations

import pytest

import engram
from engram.chat import run_turn
from engram.errors import LLMError
from engram.llm import LLMClient
from engram.testing import FakeLLMServer

MODEL = "gpt-4o-mini"


def history(chat: engram.Session) -> list[tuple[str, str | None]]:
    return [(m.role, m.content) for m in chat.messages(limit=500)]


def fail_twice(fake: FakeLLMServer) -> None:
    fake.fail(500)
    fake.fail(500)  # the client's one retry fails too


class TestRetry:
    def test_a_retry_reuses_the_stored_question(
        self, mem: engram.Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        chat = mem.session("c", scope="s")
        chat.add("user", "Hello")
        chat.add("assistant", "Hi, how can I help?")
        fail_twice(fake_llm)
        with pytest.raises(LLMError):
            run_turn(chat, client, "What is our price?", budget=6000, model=MODEL)
        stored_question = chat.messages(limit=500)[-1]
        fake_llm.reply("59 dollars per seat.")

        turn = run_turn(chat, client, "What is our price?", budget=6000, model=MODEL, retry=True)

        assert history(chat) == [
            ("user", "Hello"),
            ("assistant", "Hi, how can I help?"),
            ("user", "What is our price?"),
            ("assistant", "59 dollars per seat."),
        ]
        assert turn.message_ids[0] == stored_question.id
        # The model saw the question once.
        sent = [m["content"] for m in fake_llm.requests[-1].messages if m["role"] == "user"]
        assert sent.count("What is our price?") == 1

    def test_a_retry_goes_on_from_the_stored_tool_rounds(
        self, mem: engram.Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        chat = mem.session("c", scope="s")
        chat.add("user", "Pricing: 59 dollars per seat.")
        fake_llm.reply_tool_calls(
            [{"id": "a", "name": "search_history", "arguments": {"query": "pricing"}}]
        )
        fail_twice(fake_llm)
        with pytest.raises(LLMError):
            run_turn(chat, client, "Price?", budget=6000, model=MODEL)
        fake_llm.reply("59 dollars.")

        turn = run_turn(chat, client, "Price?", budget=6000, model=MODEL, retry=True)

        roles = [role for role, _ in history(chat)]
        assert roles == ["user", "user", "assistant", "tool", "assistant"]
        assert [c for r, c in history(chat) if r == "user"].count("Price?") == 1
        assert turn.answer == "59 dollars."

    def test_an_answered_or_different_question_is_stored_again(
        self, mem: engram.Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        chat = mem.session("c", scope="s")
        fake_llm.reply("One.")
        run_turn(chat, client, "Again?", budget=6000, model=MODEL, tools=None)
        fake_llm.reply("Two.")
        # The last "Again?" was answered: asking it again is a new question.
        run_turn(chat, client, "Again?", budget=6000, model=MODEL, tools=None, retry=True)
        fail_twice(fake_llm)
        with pytest.raises(LLMError):
            run_turn(chat, client, "First wording", budget=6000, model=MODEL, tools=None)
        fake_llm.reply("Three.")
        run_turn(chat, client, "Other wording", budget=6000, model=MODEL, retry=True)
        assert history(chat) == [
            ("user", "Again?"),
            ("assistant", "One."),
            ("user", "Again?"),
            ("assistant", "Two."),
            ("user", "First wording"),
            ("user", "Other wording"),
            ("assistant", "Three."),
        ]
