"""Engram's session and memory services under the real Google ADK, against the scripted model."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="the 'adk' extra is not installed")

from google.adk.agents import LlmAgent
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.integrations.openai import OpenAILlm
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types

from engram.engine import Engram
from engram.integrations.adk import EngramMemoryService, EngramSessionService
from engram.testing import FakeLLMServer

APP = "support"


def weather(city: str) -> dict[str, str]:
    """The weather in a city."""
    return {"city": city, "sky": "sunny"}


def agent(fake: FakeLLMServer, **options: Any) -> LlmAgent:
    model = OpenAILlm(model="gpt-4o-mini", base_url=fake.base_url, api_key="test")
    return LlmAgent(name="helper", model=model, instruction="Be brief.", **options)


def user_text(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


async def ask(runner: Runner, session_id: str, text: str, user: str = "dana") -> list[Event]:
    return [
        event
        async for event in runner.run_async(
            user_id=user,
            session_id=session_id,
            new_message=user_text(text),
            yield_user_message=True,
        )
    ]


def sent(fake: FakeLLMServer, index: int) -> str:
    return json.dumps(fake.requests[index].messages)


@pytest.fixture
def sessions(mem: Engram) -> EngramSessionService:
    return EngramSessionService(mem)


class TestAgentRun:
    def test_an_agent_with_a_tool_keeps_every_event(
        self, mem: Engram, fake_llm: FakeLLMServer, sessions: EngramSessionService
    ) -> None:
        runner = Runner(agent=agent(fake_llm, tools=[weather]), app_name=APP,
                        session_service=sessions)  # fmt: skip

        async def main() -> tuple[list[Event], Any]:
            await sessions.create_session(app_name=APP, user_id="dana", session_id="s1")
            fake_llm.reply_tool_calls([{"name": "weather", "arguments": {"city": "Oslo"}}])
            fake_llm.reply("It is sunny in Oslo.")
            events = await ask(runner, "s1", "Weather in Oslo?")
            fake_llm.reply("You asked about Oslo.")
            events += await ask(runner, "s1", "Which city did I ask about?")
            stored = await sessions.get_session(app_name=APP, user_id="dana", session_id="s1")
            return events, stored

        events, stored = asyncio.run(main())
        assert stored is not None
        # Every event, in order, exactly as ADK produced it.
        assert [e.model_dump() for e in stored.events] == [e.model_dump() for e in events]
        kinds = [
            "call" if e.get_function_calls() else "result" if e.get_function_responses() else
            e.author for e in stored.events
        ]  # fmt: skip
        assert kinds == ["user", "call", "result", "helper", "user", "helper"]
        call = stored.events[1].get_function_calls()[0]
        assert call.name == "weather" and call.args == {"city": "Oslo"}
        assert stored.events[2].get_function_responses()[0].response == {
            "city": "Oslo", "sky": "sunny"
        }  # fmt: skip
        # The second turn's prompt came from the stored events.
        assert "Weather in Oslo?" in sent(fake_llm, 2) and "sunny" in sent(fake_llm, 2)
        # In Engram: one message per event, readable, searchable.
        messages = mem.session("s1", scope="support.dana").messages()
        assert [m.role for m in messages] == ["user", *["assistant"] * 3, "user", "assistant"]
        assert messages[1].content == '[tool call weather({"city": "Oslo"})]'
        assert messages[2].content == '[tool result weather: {"city": "Oslo", "sky": "sunny"}]'
        assert messages[3].name == "helper" and messages[3].content == "It is sunny in Oslo."
        hits = mem.search("sunny Oslo", scope="support.dana")
        assert hits and hits[0].message.session == "s1"

    def test_memory_recalled_in_a_later_session(
        self, mem: Engram, fake_llm: FakeLLMServer, sessions: EngramSessionService
    ) -> None:
        memory = EngramMemoryService(mem)
        bot = agent(fake_llm, tools=[PreloadMemoryTool()])
        runner = Runner(agent=bot, app_name=APP, session_service=sessions, memory_service=memory)

        async def main() -> Any:
            await sessions.create_session(app_name=APP, user_id="dana", session_id="old")
            fake_llm.reply("Noted: your invoice is INV-4471.")
            await ask(runner, "old", "My invoice number is INV-4471.")
            old = await sessions.get_session(app_name=APP, user_id="dana", session_id="old")
            assert old is not None
            await memory.add_session_to_memory(old)
            await sessions.create_session(app_name=APP, user_id="dana", session_id="new")
            fake_llm.reply("It is INV-4471.")
            await ask(runner, "new", "What is my invoice number?")
            return await memory.search_memory(app_name=APP, user_id="dana", query="invoice")

        found = asyncio.run(main())
        # The extractive memory (Engram has no model here) and the message both match.
        assert found.memories[0].id is not None and found.memories[0].id.startswith("memory:")
        assert "INV-4471" in (found.memories[0].content.parts or [])[0].text
        assert any(e.id and e.id.startswith("message:") for e in found.memories)
        assert "INV-4471" in sent(fake_llm, 1)  # preloaded into the new session's prompt
        assert [m.content for m in mem.memories("support.dana").list()] == [
            found.memories[0].content.parts[0].text  # type: ignore[index]
        ]


def event(text: str, ts: float, *, author: str = "user", **delta: Any) -> Event:
    return Event(
        invocation_id="inv",
        author=author,
        timestamp=ts,
        content=user_text(text),
        actions=EventActions(state_delta=delta),
    )


class TestSessions:
    def test_get_session_config_and_state(self, sessions: EngramSessionService) -> None:
        async def main() -> None:
            s = await sessions.create_session(
                app_name=APP, user_id="u", state={"mood": "calm", "user:lang": "fr"}
            )
            for i in range(5):
                await sessions.append_event(
                    s, event(f"m{i}", 1000.0 + i, **{"step": i, "temp:scratch": i, "app:v": i})
                )
            assert s.state["temp:scratch"] == 4  # the live session sees temp state...
            got = await sessions.get_session(app_name=APP, user_id="u", session_id=s.id)
            assert got is not None and "temp:scratch" not in got.state  # ...never stored
            assert got.state == {"mood": "calm", "step": 4, "user:lang": "fr", "app:v": 4}
            assert all("temp:scratch" not in e.actions.state_delta for e in got.events)
            texts = lambda sess: [e.content.parts[0].text for e in sess.events]  # noqa: E731
            assert texts(got) == ["m0", "m1", "m2", "m3", "m4"]
            recent = GetSessionConfig(num_recent_events=2)
            got = await sessions.get_session(app_name=APP, user_id="u", session_id=s.id,
                                             config=recent)  # fmt: skip
            assert got is not None and texts(got) == ["m3", "m4"]
            after = GetSessionConfig(after_timestamp=1002.0)
            got = await sessions.get_session(app_name=APP, user_id="u", session_id=s.id,
                                             config=after)  # fmt: skip
            assert got is not None and texts(got) == ["m2", "m3", "m4"]
            both = GetSessionConfig(after_timestamp=1001.0, num_recent_events=0)
            got = await sessions.get_session(app_name=APP, user_id="u", session_id=s.id,
                                             config=both)  # fmt: skip
            assert got is not None and got.events == []
            # user: state is shared by the user's sessions, app: state by the app's.
            other = await sessions.create_session(app_name=APP, user_id="v")
            assert other.state == {"app:v": 4}
            assert await sessions.get_user_state(app_name=APP, user_id="u") == {"lang": "fr"}

        asyncio.run(main())

    def test_events_round_trip_verbatim_and_once(self, sessions: EngramSessionService) -> None:
        async def main() -> None:
            s = await sessions.create_session(app_name=APP, user_id="u", session_id="x")
            rich = Event(
                invocation_id="inv-9",
                author="helper",
                branch="root.helper",
                content=types.Content(
                    role="model",
                    parts=[
                        types.Part(text="Looking it up."),
                        types.Part(function_call=types.FunctionCall(
                            id="fc-1", name="lookup", args={"q": "x", "n": [1, 2]})),
                    ],
                ),
                long_running_tool_ids={"fc-1"},
                custom_metadata={"trace": "abc"},
            )  # fmt: skip
            await sessions.append_event(s, rich)
            await sessions.append_event(s, rich)  # a retried append: stored once
            got = await sessions.get_session(app_name=APP, user_id="u", session_id="x")
            assert got is not None and len(got.events) == 1
            assert got.events[0].model_dump() == rich.model_dump()

        asyncio.run(main())

    def test_duplicates_stale_copies_and_listing(self, sessions: EngramSessionService) -> None:
        async def main() -> None:
            s = await sessions.create_session(app_name=APP, user_id="u", session_id="a")
            with pytest.raises(AlreadyExistsError):
                await sessions.create_session(app_name=APP, user_id="u", session_id="a")
            stale = s.model_copy(deep=True)
            await sessions.append_event(s, event("first", s.last_update_time + 1))
            with pytest.raises(StaleSessionError):
                await sessions.append_event(stale, event("late", s.last_update_time + 2))
            await sessions.create_session(app_name=APP, user_id="w", session_id="b")
            mine = await sessions.list_sessions(app_name=APP, user_id="u")
            assert [x.id for x in mine.sessions] == ["a"] and mine.sessions[0].events == []
            everyone = await sessions.list_sessions(app_name=APP)
            assert sorted((x.user_id, x.id) for x in everyone.sessions) == [("u", "a"), ("w", "b")]
            await sessions.delete_session(app_name=APP, user_id="u", session_id="a")
            assert await sessions.get_session(app_name=APP, user_id="u", session_id="a") is None
            with pytest.raises(ValueError, match="app name"):
                await sessions.create_session(app_name="a.b", user_id="u")

        asyncio.run(main())


class TestMemoryService:
    def test_sessions_from_another_service_and_direct_memories(self, mem: Engram) -> None:
        memory = EngramMemoryService(mem)
        elsewhere = InMemorySessionService()

        async def main() -> None:
            s = await elsewhere.create_session(app_name=APP, user_id="u", session_id="m")
            await elsewhere.append_event(s, event("I prefer meetings after 2pm.", 10.0))
            await memory.add_session_to_memory(s)
            await memory.add_session_to_memory(s)  # again: the events are not stored twice
            assert len(mem.session("m", scope="support.u").messages()) == 1
            await memory.add_memory(
                app_name=APP, user_id="u",
                memories=[MemoryEntry(content=user_text("Works on the billing team."))],
            )  # fmt: skip
            found = await memory.search_memory(app_name=APP, user_id="u", query="billing team")
            assert found.memories[0].content.parts[0].text == "Works on the billing team."  # type: ignore[index]
            assert found.memories[0].id is not None
            await memory.delete_memory(app_name=APP, user_id="u", memory_id=found.memories[0].id)
            after = await memory.search_memory(app_name=APP, user_id="u", query="billing team")
            assert after.memories == []
            with pytest.raises(ValueError, match="memory:<number>"):
                await memory.delete_memory(app_name=APP, user_id="u", memory_id="message:3")
            other = await memory.search_memory(app_name=APP, user_id="v", query="meetings")
            assert other.memories == []  # another user's scope

        asyncio.run(main())
