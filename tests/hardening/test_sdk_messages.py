"""Messages straight from the OpenAI SDK (objects, dumps, text parts) are stored as they are."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.chat import ChatCompletionMessage

from engram.engine import Engram
from engram.errors import InvalidMessage
from engram.ingest import ingest
from engram.transfer.importers import parse_jsonl

CALL = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


def _sdk_answer() -> ChatCompletionMessage:
    return ChatCompletionMessage(role="assistant", content=None, tool_calls=[CALL])  # type: ignore[list-item]


class TestAddAcceptsTheSDK:
    def test_an_sdk_message_object_in_add_many(self, mem: Engram) -> None:
        chat = mem.session("s", scope="p")
        answer = _sdk_answer()
        stored = chat.add_many(
            [
                {"role": "user", "content": "Look it up."},
                answer,
                {"role": "tool", "tool_call_id": "call_1", "content": "found"},
            ]
        )
        assert stored[1].tool_calls == [CALL]
        assert stored[2].tool_call_id == "call_1"

    def test_sdk_tool_call_objects_in_add(self, mem: Engram) -> None:
        chat = mem.session("s", scope="p")
        calls = _sdk_answer().tool_calls
        assert calls is not None
        stored = chat.add("assistant", None, tool_calls=calls)  # type: ignore[arg-type]
        assert stored.tool_calls == [CALL]

    def test_a_model_dump_with_none_and_sdk_fields(self, mem: Engram) -> None:
        dump = ChatCompletionMessage(role="assistant", content="Sure.").model_dump()
        assert {"refusal", "annotations", "audio", "function_call"} <= set(dump)
        stored = mem.session("s", scope="p").add_many([dump])
        assert stored[0].content == "Sure."
        assert "sdk" not in stored[0].metadata  # None fields carry nothing

    def test_a_refusal_and_annotations_are_kept(self, mem: Engram) -> None:
        dump: dict[str, Any] = {
            "role": "assistant",
            "content": "See the docs.",
            "refusal": None,
            "annotations": [{"type": "url_citation", "url_citation": {"url": "https://x.test"}}],
            "audio": None,
        }
        stored = mem.session("s", scope="p").add_many([dump])[0]
        again = mem.message(stored.id, scope="p")
        assert again.metadata["sdk"]["annotations"][0]["type"] == "url_citation"

    def test_list_content_of_text_parts(self, mem: Engram) -> None:
        parts = [{"type": "text", "text": "First part."}, {"type": "text", "text": "Second."}]
        chat = mem.session("s", scope="p")
        via_add = chat.add("user", parts)  # type: ignore[arg-type]
        via_many = chat.add_many([{"role": "user", "content": parts}])[0]
        assert via_add.content == via_many.content == "First part.\nSecond."

    @pytest.mark.parametrize(
        ("message", "field"),
        [
            ({"role": "user", "content": [{"type": "text"}]}, "content[0].text"),
            ({"role": "user", "content": [5]}, "content[0]"),
            ({"role": "user", "content": "x", "colour": "red"}, "colour"),
            ({"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}, "function"),
        ],
    )
    def test_only_the_malformed_is_refused_naming_the_field(
        self, mem: Engram, message: dict[str, Any], field: str
    ) -> None:
        with pytest.raises(InvalidMessage, match=field.replace("[", r"\[").replace("]", r"\]")):
            mem.session("s", scope="p").add_many([message])


def test_the_jsonl_importer_accepts_what_add_many_accepts(mem: Engram) -> None:
    lines = [
        {"role": "user", "content": [{"type": "text", "text": "Look it up."}], "session": "i"},
        {**_sdk_answer().model_dump(), "session": "i"},
        {"role": "tool", "tool_call_id": "call_1", "content": "found", "session": "i"},
        {**ChatCompletionMessage(role="assistant", content="Done.").model_dump(), "session": "i"},
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode()
    ingest(mem, "p", parse_jsonl(data, file="sdk.jsonl"))
    stored = mem.session("i", scope="p").messages()
    assert [m.content for m in stored] == ["Look it up.", "", "found", "Done."]
    assert stored[1].tool_calls == [CALL]
