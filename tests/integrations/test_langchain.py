"""EngramChatMessageHistory and the retrieval tools with the real langchain-core."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("langchain_core", reason="the 'langchain' extra is not installed")

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from tests.images import png_url

from engram.engine import Engram
from engram.integrations.langchain import EngramChatMessageHistory
from engram.llm import LLMClient
from engram.testing import FakeLLMServer
from engram.tokens import count_messages, counter_for_model

CALL = {"name": "search_history", "args": {"query": "invoice"}, "id": "call_1"}


def exchange(i: int) -> list[BaseMessage]:
    return [HumanMessage(f"Question {i} about the roadmap."), AIMessage(f"Answer {i}.")]


class TestHistory:
    def test_message_types_and_tool_messages_round_trip(self, mem: Engram) -> None:
        history = EngramChatMessageHistory("s", scope="p", engram=mem)
        history.add_messages(
            [
                HumanMessage("Find the invoice."),
                AIMessage("", tool_calls=[CALL]),
                ToolMessage('{"results": []}', tool_call_id="call_1"),
                AIMessage("No invoice found."),
            ]
        )
        got = history.messages
        assert [type(m) for m in got] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
        assert isinstance(got[1], AIMessage) and got[1].tool_calls[0]["id"] == "call_1"
        assert got[1].tool_calls[0]["args"] == {"query": "invoice"}
        assert isinstance(got[2], ToolMessage) and got[2].tool_call_id == "call_1"
        stored = mem.session("s", scope="p").messages()
        assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]

    def test_an_image_message_round_trips(self, mem: Engram) -> None:
        from langchain_core.messages import HumanMessage

        url = png_url(32, 32)
        content: list[Any] = [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
        ]
        history = EngramChatMessageHistory("s", scope="p", engram=mem)
        history.add_messages([HumanMessage(content=content)])
        (stored,) = mem.session("s", scope="p").messages()
        assert stored.parts is not None and stored.parts[1]["image_url"]["url"] == url
        (back,) = history.messages
        assert isinstance(back, HumanMessage) and back.content == content

    def test_messages_fit_the_budget_with_no_trimming(self, mem: Engram) -> None:
        mem.memories("p").create("The user is called Dana.")
        history = EngramChatMessageHistory(
            "s", scope="p", engram=mem, policy="lean", budget=2000, system="Be brief."
        )
        for i in range(30):
            history.add_messages(exchange(i))
        got = history.messages
        assert isinstance(got[0], SystemMessage) and got[0].content == "Be brief."
        assert any("Dana" in str(m.content) for m in got if isinstance(m, SystemMessage))
        chat = [m for m in got if not isinstance(m, SystemMessage)]
        assert len(chat) == 12  # lean: the last 12 messages
        assert chat[-1].content == "Answer 29."
        sent = convert_to_openai_messages(got)
        assert count_messages(counter_for_model("gpt-4o-mini"), sent) <= 2000

    def test_a_refused_message_stores_nothing(self, mem: Engram) -> None:
        from engram.errors import InvalidMessage

        history = EngramChatMessageHistory("s", scope="p", engram=mem)
        with pytest.raises(InvalidMessage):
            history.add_messages([HumanMessage("fine"), ToolMessage("x", tool_call_id="nope")])
        assert mem.session("s", scope="p").messages() == []

    def test_clear(self, mem: Engram) -> None:
        history = EngramChatMessageHistory("s", scope="p", engram=mem)
        history.add_messages(exchange(1))
        history.clear()
        assert history.messages == []

    # langchain-core 1.x deprecates RunnableWithMessageHistory; apps still run on it.
    @pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
    def test_runnable_with_message_history_keeps_every_turn(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        def model(messages: list[BaseMessage]) -> AIMessage:
            sent = convert_to_openai_messages(messages)
            return AIMessage(client.chat(sent, purpose="chat").text)

        histories: dict[str, EngramChatMessageHistory] = {}

        def history_for(session_id: str) -> EngramChatMessageHistory:
            return histories.setdefault(
                session_id, EngramChatMessageHistory(session_id, scope="p", engram=mem)
            )

        chain = RunnableWithMessageHistory(RunnableLambda(model), history_for)
        fake_llm.reply("Nice to meet you, Dana.")
        fake_llm.reply("You are Dana.")
        config: Any = {"configurable": {"session_id": "s"}}
        chain.invoke([HumanMessage("I am Dana.")], config=config)
        answer = chain.invoke([HumanMessage("Who am I?")], config=config)
        assert answer.content == "You are Dana."
        assert "I am Dana." in json.dumps(fake_llm.requests[1].messages)
        stored = [(m.role, m.content) for m in mem.session("s", scope="p").messages()]
        assert stored == [
            ("user", "I am Dana."),
            ("assistant", "Nice to meet you, Dana."),
            ("user", "Who am I?"),
            ("assistant", "You are Dana."),
        ]


class TestTools:
    def test_retrieval_tools_find_old_messages_sync_and_async(self, mem: Engram) -> None:
        history = EngramChatMessageHistory("s", scope="p", engram=mem)
        history.add_messages([HumanMessage("The invoice number is INV-4471.")])
        for i in range(20):
            history.add_messages(exchange(i))
        tools = {t.name: t for t in history.tools()}
        assert "search_history" in tools and "get_messages_by_date" in tools
        found = json.loads(tools["search_history"].invoke({"query": "invoice number"}))
        assert "INV-4471" in json.dumps(found)
        again = asyncio.run(tools["search_history"].ainvoke({"query": "invoice"}))
        assert "INV-4471" in again
        schema = tools["search_history"].tool_call_schema
        assert isinstance(schema, dict) and "query" in schema["properties"]

    def test_bad_arguments_come_back_as_an_error_for_the_model(self, mem: Engram) -> None:
        history = EngramChatMessageHistory("s", scope="p", engram=mem)
        tool = {t.name: t for t in history.tools(["get_message_by_id"])}["get_message_by_id"]
        answer = json.loads(tool.invoke({"message_id": 999}))
        assert answer["error"]["type"] == "not_found"
