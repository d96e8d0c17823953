"""``/v1/responses`` to an upstream that speaks the Responses API (``--upstream-responses``):
reasoning items go back as they came, against the strict scripted Responses server."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests.proxy.conftest import SCOPE, SESSION, SESSION_ID, client, stored
from tests.proxy.live import serving

from engram.engine import Engram
from engram.proxy import ProxySettings
from engram.proxy.verbatim import RESPONSES, VERBATIM_KEY
from engram.server import ServerSettings, create_app
from engram.testing import FakeResponsesServer

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
OSLO = {"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "c1"}
RESULT = {"type": "function_call_output", "call_id": "c1", "output": "sunny"}


@pytest.fixture
def oai() -> Iterator[FakeResponsesServer]:
    with FakeResponsesServer() as server:
        yield server


@pytest.fixture
def served_responses(oai: FakeResponsesServer) -> Callable[..., Any]:
    def start(mem: Engram) -> Any:
        proxy = ProxySettings(oai.base_url, api_key="k", timeout=10, responses_api=True)
        return serving(create_app(mem, ServerSettings(key_cache_seconds=0, proxy=proxy)))

    return start


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_loop_sends_the_reasoning_back_as_it_came(
    sqlite_mem: Engram, oai: FakeResponsesServer, served_responses: Callable[..., Any], stream: bool
) -> None:
    oai.reply_calls([OSLO], reasoning="The user wants the weather in Oslo.")
    oai.reply("Sunny in Oslo.", reasoning="The tool said sunny.")
    ask: dict[str, Any] = {"model": "o4-mini", "tools": [WEATHER], "reasoning": {"effort": "low"}}
    with served_responses(sqlite_mem) as url, client(url) as app:
        if stream:
            with app.responses.stream(input="weather?", extra_headers=SESSION, **ask) as events:
                kinds = [event.type for event in events]
                first = events.get_final_response()
            assert kinds[-1] == "response.completed"
        else:
            first = app.responses.create(input="weather?", extra_headers=SESSION, **ask)
        assert [item.type for item in first.output] == ["reasoning", "function_call"]
        second = app.responses.create(previous_response_id=first.id, input=[RESULT], **ask)
    assert second.output_text == "Sunny in Oslo."
    assert oai.refused == []  # the strict upstream checked the reasoning item came back
    sent = oai.requests[-1].body or {}
    assert sent["store"] is False and "previous_response_id" not in sent
    assert "reasoning.encrypted_content" in sent["include"]
    reasoning, call, output = sent["input"][-3:]
    assert reasoning == first.output[0].model_dump(exclude_none=True)
    assert (call["type"], call["call_id"], output["type"]) == (
        "function_call",
        "c1",
        "function_call_output",
    )
    assert stored(sqlite_mem) == [
        ("user", "weather?"),
        ("assistant", ""),
        ("tool", "sunny"),
        ("assistant", "Sunny in Oslo."),
    ]
    kept = sqlite_mem.session(SESSION_ID, SCOPE).messages()[1].metadata[VERBATIM_KEY]
    assert kept["format"] == RESPONSES and kept["items"][0]["item"]["type"] == "reasoning"


def test_engrams_own_round_keeps_the_reasoning(
    sqlite_mem: Engram, oai: FakeResponsesServer, served_responses: Callable[..., Any]
) -> None:
    oai.reply_calls(
        [{"name": "search_history", "arguments": {"query": "pricing"}}], reasoning="Look it up."
    )
    oai.reply("Nothing about pricing yet.")
    with served_responses(sqlite_mem) as url, client(url) as app:
        answer = app.responses.create(
            model="o4-mini", input="pricing?", reasoning={"effort": "low"}, extra_headers=SESSION
        )
    assert answer.output_text == "Nothing about pricing yet."
    assert oai.refused == []
    names = [i.get("name") for i in (oai.requests[-1].body or {})["input"] if "name" in i]
    assert names == ["search_history"]
    assert json.loads(answer.model_dump_json())["output"][0]["type"] == "message"
