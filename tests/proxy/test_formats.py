"""The conversions between the proxy's formats, as properties: an answer said in the
Responses or Anthropic format and read back is the same chat message, and the items kept
verbatim come back unchanged, at their places."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from engram.proxy.anthropic.convert import chat_completion, content_blocks
from engram.proxy.responses.items import chat_messages, output_items
from engram.proxy.verbatim import ANTHROPIC, RESPONSES, VERBATIM_KEY, items_of

texts = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40
).map(str.strip)
arguments = st.dictionaries(
    st.sampled_from(["city", "day", "n"]), st.one_of(st.integers(), texts), max_size=3
)
calls = st.lists(st.tuples(st.sampled_from(["get_weather", "lookup"]), arguments), max_size=3).map(
    lambda pairs: [
        {
            "id": f"call_{index}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        for index, (name, args) in enumerate(pairs)
    ]
)


def _normal(tool_calls: list[Any]) -> list[Any]:
    """Calls with their arguments parsed (JSON may escape the same text differently)."""
    return [
        {**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
        for c in tool_calls
    ]


def _answer(text: str, tool_calls: list[Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


@given(texts, calls, st.lists(st.integers(0, 6), max_size=3))
def test_responses_items_read_back_as_the_same_message(
    text: str, tool_calls: list[Any], places: list[int]
) -> None:
    if not text and not tool_calls:
        text = "x"
    answer = _answer(text, tool_calls)
    shown = output_items(answer, "base")
    for n, place in enumerate(places):  # reasoning items among the output, anywhere
        item = {"type": "reasoning", "id": f"rs_{n}", "encrypted_content": f"blob-{n}"}
        shown.insert(min(place, len(shown)), item)
    (read,) = chat_messages([{"role": "user", "content": "q"}, *shown])[1:]
    assert read.get("content") == (text or None)
    assert read.get("tool_calls", []) == tool_calls
    kept = items_of(read.get("metadata"), RESPONSES)
    assert [item for _, item in kept] == [i for i in shown if i["type"] == "reasoning"]
    # Said again, the answer is the same items, each kept one back at its place.
    again = {**read, VERBATIM_KEY: read["metadata"][VERBATIM_KEY]} if kept else read
    assert output_items(again, "base") == shown


@given(texts, calls, st.booleans())
def test_anthropic_blocks_read_back_as_the_same_blocks(
    text: str, tool_calls: list[Any], thinking: bool
) -> None:
    blocks: list[Any] = []
    if thinking:
        blocks.append({"type": "thinking", "thinking": "hmm", "signature": "sig"})
    if text:
        blocks.append({"type": "text", "text": text})
    for call in tool_calls:
        function = call["function"]
        blocks.append(
            {
                "type": "tool_use",
                "id": call["id"],
                "name": function["name"],
                "input": json.loads(function["arguments"]),
            }
        )
    completion = chat_completion(
        {"id": "msg_1", "model": "m", "content": blocks, "stop_reason": "end_turn", "usage": {}}
    )
    message = completion["choices"][0]["message"]
    assert _normal(message.get("tool_calls", [])) == _normal(tool_calls)
    assert message["content"] == (text or None)
    assert [item for _, item in items_of(message, ANTHROPIC)] == blocks[:1] if thinking else True
    assert content_blocks(message) == blocks
