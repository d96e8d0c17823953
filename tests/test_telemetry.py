"""OpenTelemetry spans after the GenAI conventions, read back from the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (dev extra) is missing")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from tests.compaction.engine_support import long_text, summarizer_responder

import engram
from engram import telemetry
from engram.chat import run_turn, stream_turn
from engram.compaction.words import count_words
from engram.engine import Engram
from engram.errors import LLMError
from engram.llm import LLMClient
from engram.testing import FakeLLMServer

USAGE = {
    "prompt_tokens": 120,
    "completion_tokens": 7,
    "total_tokens": 127,
    "prompt_tokens_details": {"cached_tokens": 64},
}


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], list[ReadableSpan]]]:
    """Engram traced into a private provider; returns the finished spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(telemetry, "_tracer", None)  # restored after the test
    monkeypatch.setattr(telemetry, "_capture", None)
    monkeypatch.delenv(telemetry.CAPTURE_ENV, raising=False)
    telemetry.use(provider)
    yield lambda: list(exporter.get_finished_spans())
    provider.shutdown()


def named(found: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in found if s.name == name]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


class TestChat:
    def test_a_turn_traces_its_context_and_its_model_call(
        self, spans: Callable[[], list[ReadableSpan]], mem: Engram, fake_llm: FakeLLMServer,
        client: LLMClient,
    ) -> None:  # fmt: skip
        chat = mem.session("chat-7", scope="p")
        for i in range(6):
            chat.add_many([{"role": "user", "content": f"Question {i} about pricing."},
                           {"role": "assistant", "content": f"Answer {i}."}])  # fmt: skip
        fake_llm.reply("Pro costs $14.", usage=USAGE)
        run_turn(chat, client, "What is the Pro price?", budget=4000)
        (context,) = named(spans(), "engram.context")
        c = attrs(context)
        assert c["gen_ai.conversation.id"] == "chat-7" and c["engram.scope"] == "p"
        # The turn keeps room for its tool schemas: the prompt's budget is what is left.
        assert 0 < c["engram.prompt_tokens"] <= c["engram.budget"] < 4000
        assert 0.5 < c["engram.cacheable_share"] < 1  # the history before the new question
        (call,) = named(spans(), "chat gpt-4o-mini")
        assert call.kind == SpanKind.CLIENT
        a = attrs(call)
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.request.model"] == "gpt-4o-mini"
        assert a["gen_ai.conversation.id"] == "chat-7"
        assert a["server.address"] == "127.0.0.1" and a["server.port"] == fake_llm.port
        assert a["gen_ai.usage.input_tokens"] == 120 and a["gen_ai.usage.output_tokens"] == 7
        assert a["gen_ai.usage.cache_read.input_tokens"] == 64
        assert a["gen_ai.response.finish_reasons"] == ("stop",)
        assert "gen_ai.input.messages" not in a and "gen_ai.output.messages" not in a

    def test_content_only_when_the_user_opts_in(
        self, spans: Callable[[], list[ReadableSpan]], fake_llm: FakeLLMServer,
        client: LLMClient, monkeypatch: pytest.MonkeyPatch,
    ) -> None:  # fmt: skip
        monkeypatch.setenv(telemetry.CAPTURE_ENV, "true")
        fake_llm.reply("Hello, Dana.")
        client.chat([{"role": "user", "content": "I am Dana."}], purpose="chat")
        a = attrs(named(spans(), "chat gpt-4o-mini")[0])
        sent = json.loads(a["gen_ai.input.messages"])
        assert sent == [{"role": "user", "parts": [{"type": "text", "content": "I am Dana."}]}]
        (answer,) = json.loads(a["gen_ai.output.messages"])
        assert answer["parts"][0]["content"] == "Hello, Dana." and answer["finish_reason"] == "stop"

    def test_a_failed_call_is_an_error_span(
        self, spans: Callable[[], list[ReadableSpan]], fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        fake_llm.fail(500).fail(500)
        with pytest.raises(LLMError):
            client.chat([{"role": "user", "content": "hi"}], purpose="chat")
        (call,) = named(spans(), "chat gpt-4o-mini")
        assert call.status.status_code == StatusCode.ERROR
        assert attrs(call)["error.type"] == "LLMError"

    def test_a_streamed_turn_names_its_session(
        self, spans: Callable[[], list[ReadableSpan]], open_engram: Callable[..., Engram],
        fake_llm: FakeLLMServer, client: LLMClient, store_url: str,
    ) -> None:  # fmt: skip
        if not store_url.startswith("sqlite"):
            pytest.skip("one backend is enough for the async path")

        async def main() -> str:
            mem = await engram.open_async(store_url)
            try:
                chat = await mem.session("s", scope="p")
                fake_llm.reply("Streamed answer.")
                stream = stream_turn(chat, client, "Hello?", budget=4000)
                return "".join([piece async for piece in stream])
            finally:
                await mem.close()

        assert asyncio.run(main()) == "Streamed answer."
        (call,) = named(spans(), "chat gpt-4o-mini")
        a = attrs(call)
        assert a["gen_ai.conversation.id"] == "s" and a["gen_ai.request.stream"] is True
        assert a["gen_ai.usage.output_tokens"] > 0


class TestMemory:
    def test_memory_operations(self, spans: Callable[[], list[ReadableSpan]], mem: Engram) -> None:
        memories = mem.memories("p")
        created = memories.create("The user prefers meetings after 2pm.")
        memories.update(created.id, "The user prefers meetings after 3pm.")
        memories.delete(created.id)
        memories.create("Works on billing.")
        memories.purge()
        ops = [(s.name, attrs(s)) for s in spans() if s.name != "create_memory_store"]
        assert [name for name, _ in ops] == [
            "upsert_memory", "update_memory", "delete_memory", "upsert_memory", "delete_memory"
        ]  # fmt: skip
        for name, a in ops:
            assert a["gen_ai.operation.name"] == name and a["gen_ai.memory.store.id"] == "p"
        assert ops[0][1]["gen_ai.memory.record.id"] == str(created.id)
        assert ops[0][1]["engram.memory.status"] == "created"
        assert ops[2][1]["gen_ai.memory.record.id"] == str(created.id)
        assert "gen_ai.memory.record.id" not in ops[4][1]  # a purge: every record
        assert ops[4][1]["gen_ai.memory.record.count"] == 1
        assert all("gen_ai.memory.records" not in a for _, a in ops)

    def test_search_is_search_memory(
        self, spans: Callable[[], list[ReadableSpan]], mem: Engram
    ) -> None:
        chat = mem.session("s", scope="p")
        chat.add("user", "The invoice number is INV-4471.")
        chat.add("assistant", "Noted.")
        hits = chat.search("invoice number")
        telemetry.capture_content()
        mem.search("invoice", scope="p")
        first, second = named(spans(), "search_memory")
        a = attrs(first)
        assert a["gen_ai.memory.store.id"] == "p" and a["gen_ai.conversation.id"] == "s"
        assert a["gen_ai.memory.record.count"] == len(hits) > 0
        assert a["engram.search.mode"] == "keyword"
        assert "gen_ai.memory.query.text" not in a
        b = attrs(second)
        assert b["gen_ai.memory.query.text"] == "invoice" and "gen_ai.conversation.id" not in b
        records = json.loads(b["gen_ai.memory.records"])
        assert records[0]["content"] == "The invoice number is INV-4471."
        assert set(records[0]) == {"id", "score", "content"}

    def test_opening_a_store_is_create_memory_store(
        self, spans: Callable[[], list[ReadableSpan]], tmp_path: Any
    ) -> None:
        with engram.open(f"sqlite:///{tmp_path}/t.db", llm=None):
            pass
        (opened,) = named(spans(), "create_memory_store")
        assert attrs(opened)["gen_ai.memory.store.id"] == f"sqlite:///{tmp_path}/t.db"


@pytest.fixture
def summarizer() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(default=summarizer_responder) as server:
        yield server


def test_compaction_span_and_its_model_calls(
    spans: Callable[[], list[ReadableSpan]], summarizer: FakeLLMServer, tmp_path: Any
) -> None:
    client = LLMClient("gpt-4o-mini", base_url=summarizer.base_url, timeout=30, backoff=0.01)
    with client, engram.open(f"sqlite:///{tmp_path}/c.db", llm=client) as mem:
        chat = mem.session("long", scope="p", policy="summary_buffer")
        for i in range(12):
            user = {"role": "user", "content": long_text(f"User message {i}:", 150)}
            chat.add_many([user, {"role": "assistant", "content": long_text(f"Reply {i}:", 150)}])
        result = chat.compact()
    assert result.committed and count_words(result.state.summary) > 0
    (cycle,) = named(spans(), "engram.compaction")
    c = attrs(cycle)
    assert c["gen_ai.conversation.id"] == "long" and c["engram.scope"] == "p"
    assert c["engram.compaction.committed"] is True
    assert c["engram.compaction.folded"] == result.folded > 0
    calls = named(spans(), "chat gpt-4o-mini")
    assert calls and all(attrs(s)["gen_ai.conversation.id"] == "long" for s in calls)
    assert all(s.parent is not None and s.parent.span_id == cycle.context.span_id for s in calls)


def test_nothing_is_imported_or_traced_without_opentelemetry(tmp_path: Any) -> None:
    code = (
        "import sys\n"
        "import engram\n"
        f"mem = engram.open('sqlite:///{tmp_path}/z.db', llm=None)\n"
        "s = mem.session('s', scope='p')\n"
        "s.add('user', 'hello there'); s.context(); mem.search('hello', scope='p')\n"
        "mem.memories('p').create('A memory.')\n"
        "from engram import telemetry\n"
        "print('opentelemetry' in sys.modules, telemetry.span('x', {}) is telemetry._NOOP)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "True"], out.stderr
