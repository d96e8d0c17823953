"""EngramSession under the real OpenAI Agents SDK, against the scripted model server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

agents = pytest.importorskip("agents", reason="the 'agents' extra is not installed")

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from tests.images import png_url  # noqa: E402

from engram.engine import Engram  # noqa: E402
from engram.integrations.openai_agents import (  # noqa: E402
    EngramSession,
    items_to_messages,
    messages_to_items,
)
from engram.testing import FakeLLMServer  # noqa: E402

CODE = "The launch code is AURORA-7."


@pytest.fixture(autouse=True)
def no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)  # the SDK would otherwise export traces to OpenAI
    yield
    set_tracing_disabled(False)


def agent(fake: FakeLLMServer, session: EngramSession) -> Agent[Any]:
    client = AsyncOpenAI(base_url=fake.base_url, api_key="test", max_retries=0)
    model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
    return Agent(name="assistant", instructions="Be brief.", model=model, tools=session.tools())


def sent_text(fake: FakeLLMServer, index: int) -> str:
    return json.dumps(fake.requests[index].messages)


class TestRunner:
    def test_a_tool_call_recalls_what_fell_out_of_the_window(
        self, mem: Engram, fake_llm: FakeLLMServer
    ) -> None:
        session = EngramSession("chat", scope="p", engram=mem, policy="lean", budget=6000)
        bot = agent(fake_llm, session)

        async def main() -> str:
            fake_llm.reply("Noted.")
            await Runner.run(bot, f"Remember this. {CODE}", session=session)
            for i in range(20):  # lean shows the newest 12 or so messages: the code falls out
                await session.add_items(
                    [{"role": "user", "content": f"Note {i} about the weather."},
                     {"role": "assistant", "content": f"Noted {i}."}]
                )  # fmt: skip
            for i in range(2):
                await Runner.run(bot, f"Small talk number {i} about the weather.", session=session)
            fake_llm.reply_tool_calls(
                [{"id": "call_s", "name": "search_history", "arguments": {"query": "launch code"}}]
            )
            fake_llm.reply("It is AURORA-7.")
            asked = len(fake_llm.requests)
            result = await Runner.run(bot, "What was the launch code?", session=session)
            assert "AURORA-7" not in sent_text(fake_llm, asked)  # not in the window
            tool_answer = fake_llm.requests[asked + 1].messages[-1]
            assert tool_answer["role"] == "tool" and "AURORA-7" in tool_answer["content"]
            return str(result.final_output)

        assert asyncio.run(main()) == "It is AURORA-7."
        stored = mem.session("chat", scope="p").messages(limit=100)
        assert len(stored) == 2 + 20 * 2 + 2 * 2 + 4
        last = stored[-4:]
        assert [m.role for m in last] == ["user", "assistant", "tool", "assistant"]
        assert last[0].content == "What was the launch code?"
        assert last[1].tool_calls and last[1].tool_calls[0]["id"] == "call_s"
        assert last[2].tool_call_id == "call_s" and "AURORA-7" in last[2].content
        assert last[3].content == "It is AURORA-7."
        assert [m.content for m in stored].count(f"Remember this. {CODE}") == 1

    def test_get_items_is_the_budgeted_prompt_with_memories_and_summary(self, mem: Engram) -> None:
        mem.memories("p").create("The user prefers answers in French.")
        session = EngramSession("s", scope="p", engram=mem, policy="summary_buffer", budget=3000)
        words = "We agreed to ship the billing page on Friday with the new invoice layout. "

        async def main() -> tuple[list[Any], list[Any]]:
            for i in range(30):
                await session.add_items(
                    [{"role": "user", "content": f"Point {i}. " + words * 8},
                     {"role": "assistant", "content": f"Understood point {i}."}]
                )  # fmt: skip
            return await session.get_items(), await session.get_items(limit=3)

        prompt, newest = asyncio.run(main())
        sections = [item["content"] for item in prompt if item["role"] == "system"]
        assert any("prefers answers in French" in text for text in sections)  # memories
        summary = mem.session("s", scope="p").compaction_state().summary
        assert summary and any(summary[:40] in text for text in sections)
        assert len(prompt) < 60  # not the whole history
        assert newest == [
            {"role": "assistant", "content": "Understood point 28."},
            {"role": "user", "content": "Point 29. " + words * 8},
            {"role": "assistant", "content": "Understood point 29."},
        ]

    def test_pop_item_and_clear_session(self, mem: Engram) -> None:
        session = EngramSession("s", scope="p", engram=mem)

        async def main() -> tuple[Any, Any, list[Any]]:
            await session.add_items(
                [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
            )
            popped = await session.pop_item()
            left = await session.get_items(limit=10)
            await session.clear_session()
            return popped, left, await session.get_items()

        popped, left, after = asyncio.run(main())
        assert popped == {"role": "assistant", "content": "Hello"}
        assert left == [{"role": "user", "content": "Hi"}]
        assert after == []


class TestTranslation:
    def test_items_round_trip_through_chat_messages(self) -> None:
        items = [
            {"role": "developer", "content": "Use tools."},
            {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
            {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}", "id": "x"},
            {"type": "function_call", "call_id": "b", "name": "g", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "a", "output": "sunny"},
            {"type": "function_call_output", "call_id": "b", "output": "warm"},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
            },
        ]
        messages = items_to_messages(items)
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool",
                                                 "assistant"]  # fmt: skip
        assert [c["id"] for c in messages[2]["tool_calls"]] == ["a", "b"]
        back = messages_to_items(messages)
        assert back[0] == {"role": "system", "content": "Use tools."}
        assert back[2] == {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"}
        assert back[-1] == {"role": "assistant", "content": "Sunny."}
        assert len(back) == len(items) - 1  # the reasoning item is not kept

    def test_a_non_text_part_is_refused_by_name(self) -> None:
        from engram.errors import InvalidMessage

        file = {"type": "input_file", "file_id": "file-1"}
        with pytest.raises(InvalidMessage, match="input_file"):
            items_to_messages([{"role": "user", "content": [file]}])

    def test_an_image_is_kept_and_given_back(self, mem: Engram) -> None:
        url = png_url(64, 64)
        item = {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is it?"},
                {"type": "input_image", "image_url": url, "detail": "low"},
            ],
        }
        chat = mem.session("agents-image", scope="p")
        (stored,) = chat.add_many(items_to_messages([item]))
        assert stored.parts == [
            {"type": "text", "text": "What is it?"},
            {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
        ]
        assert messages_to_items([stored.to_openai()]) == [item]
