"""Provider shapes: the Anthropic Messages form (with cache breakpoints) and a merged system."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from engram.context.shapes import MAX_BREAKPOINTS, OPENING_USER_TEXT, anthropic_prompt, merge_system

CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "search_history", "arguments": '{"query": "pricing"}'},
}
PROMPT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a project assistant."},
    {"role": "system", "content": "[Long-term memories]\n- prefers tea"},
    {"role": "user", "content": "What did we decide?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "We chose annual pricing."},
    {"role": "assistant", "content": "Annual pricing."},
    {"role": "user", "content": "And the date?"},
]


def _breakpoints(prompt: dict[str, Any]) -> list[str]:
    found = []
    system = prompt.get("system")
    if isinstance(system, list):
        found += ["system" for block in system if "cache_control" in block]
    for index, message in enumerate(prompt["messages"]):
        found += [f"m{index}" for block in message["content"] if "cache_control" in block]
    return found


class TestMergeSystem:
    def test_leading_system_messages_become_one(self) -> None:
        merged = merge_system(PROMPT)
        assert merged[0] == {
            "role": "system",
            "content": "You are a project assistant.\n\n[Long-term memories]\n- prefers tea",
        }
        assert merged[1:] == PROMPT[2:]
        assert sum(1 for m in merged if m["role"] == "system") == 1

    def test_a_system_message_inside_the_history_keeps_its_place(self) -> None:
        prompt = [*PROMPT[:3], {"role": "system", "content": "note"}, *PROMPT[3:]]
        merged = merge_system(prompt)
        assert merged[2] == {"role": "system", "content": "note"}

    def test_nothing_to_merge_is_a_copy(self) -> None:
        assert merge_system(PROMPT[2:]) == PROMPT[2:]


class TestAnthropic:
    def test_system_apart_tool_use_and_tool_result_blocks(self) -> None:
        prompt = anthropic_prompt(PROMPT, cache=False)
        assert (
            prompt["system"]
            == "You are a project assistant.\n\n[Long-term memories]\n- prefers tea"
        )
        roles = [m["role"] for m in prompt["messages"]]
        assert roles == ["user", "assistant", "user", "assistant", "user"]
        tool_use = prompt["messages"][1]["content"][0]
        assert tool_use == {
            "type": "tool_use",
            "id": "call_1",
            "name": "search_history",
            "input": {"query": "pricing"},
        }
        result = prompt["messages"][2]["content"][0]
        assert result == {
            "type": "tool_result",
            "tool_use_id": "call_1",
            "content": "We chose annual pricing.",
        }
        assert _breakpoints(prompt) == []

    def test_breakpoints_on_the_sections_and_before_the_current_turn(self) -> None:
        prompt = anthropic_prompt(PROMPT, turn_start=6)
        assert [b["text"] for b in prompt["system"]] == [PROMPT[0]["content"], PROMPT[1]["content"]]
        assert prompt["system"][-1]["cache_control"] == {"type": "ephemeral"}
        # The last message before "And the date?" is the assistant's answer.
        assert _breakpoints(prompt) == ["system", "m3"]
        assert prompt["messages"][3]["content"][-1]["text"] == "Annual pricing."

    def test_consecutive_tool_results_share_one_user_turn(self) -> None:
        second = {**CALL, "id": "call_2"}
        prompt = anthropic_prompt(
            [
                {"role": "user", "content": "Two lookups"},
                {"role": "assistant", "content": "Looking.", "tool_calls": [CALL, second]},
                {"role": "tool", "tool_call_id": "call_1", "content": "one"},
                {"role": "tool", "tool_call_id": "call_2", "content": "two"},
            ],
            cache=False,
        )
        assert "system" not in prompt
        assistant, results = prompt["messages"][1], prompt["messages"][2]
        assert [b["type"] for b in assistant["content"]] == ["text", "tool_use", "tool_use"]
        assert [b["tool_use_id"] for b in results["content"]] == ["call_1", "call_2"]

    def test_a_window_opening_on_an_answer_gets_a_user_turn_first(self) -> None:
        prompt = anthropic_prompt(
            [
                {"role": "assistant", "content": "Earlier answer"},
                {"role": "user", "content": "Next"},
            ],
            turn_start=1,
        )
        assert prompt["messages"][0] == {
            "role": "user",
            "content": [{"type": "text", "text": OPENING_USER_TEXT}],
        }
        assert _breakpoints(prompt) == ["m1"]

    def test_image_parts_and_arguments_that_are_not_an_object(self) -> None:
        bad_call = {**CALL, "function": {"name": "f", "arguments": "[1, 2]"}}
        prompt = anthropic_prompt(
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                        {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
                    ],
                },
                {"role": "assistant", "content": None, "tool_calls": [bad_call]},
            ],
            cache=False,
        )
        blocks = prompt["messages"][0]["content"]
        assert blocks[1]["source"] == {"type": "base64", "media_type": "image/png", "data": "AAAA"}
        assert blocks[2]["source"] == {"type": "url", "url": "https://x.test/a.png"}
        assert prompt["messages"][1]["content"][0]["input"] == {"arguments": "[1, 2]"}

    @given(
        st.lists(st.sampled_from(["system", "user", "assistant", "tool"]), min_size=1, max_size=12),
        st.integers(min_value=0, max_value=12),
    )
    def test_roles_alternate_and_breakpoints_stay_within_the_limit(
        self, roles: list[str], turn_start: int
    ) -> None:
        messages = [
            {
                "role": role,
                "content": f"m{i}",
                **({"tool_call_id": f"c{i}"} if role == "tool" else {}),
            }
            for i, role in enumerate(roles)
        ]
        prompt = anthropic_prompt(messages, turn_start=turn_start)
        out = prompt["messages"]
        assert all(a["role"] != b["role"] for a, b in itertools.pairwise(out))
        assert not out or out[0]["role"] == "user"
        assert len(_breakpoints(prompt)) <= MAX_BREAKPOINTS
        # Nothing the model was told is lost: every text is still there.
        text = json.dumps(prompt)
        assert all(f"m{i}" in text for i in range(len(roles)))
