"""The text of list content: stored, counted, sent on and folded with one rule."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engram.compaction.transcript import text_of
from engram.context.shapes import merge_system
from engram.intake.parts import PARTS_JOINER, content_text
from engram.intake.validation import build_message
from engram.proxy.request import parse_request
from engram.tokens import count_chat_message, count_message, storage_counter

_TEXT = st.builds(
    "w{}".format, st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)
)
_PART = st.one_of(
    st.builds(
        lambda kind, text: {"type": kind, "text": text},
        st.sampled_from(["text", "input_text", "output_text"]),
        _TEXT,
    ),
    st.builds(lambda text: {"type": "refusal", "refusal": text}, _TEXT),
)
_PARTS = st.lists(_PART, min_size=1, max_size=5)


@settings(deadline=None)  # the first call loads the tokenizer
@given(_PARTS)
def test_every_reader_takes_the_text_the_store_keeps(parts: list[dict[str, Any]]) -> None:
    stored = build_message("user", parts)
    assert content_text(parts) == stored.content
    assert text_of({"role": "user", "content": parts}) == stored.content
    counter = storage_counter()
    sized = count_chat_message(counter, {"role": "user", "content": parts})
    assert sized == count_message(counter, "user", stored.content)


def test_the_parts_of_a_system_prompt_are_not_glued_together() -> None:
    parts = [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use SI units."}]
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "system", "content": parts}, {"role": "user", "content": "hi"}],
    }
    assert parse_request(body).system == f"Be brief.{PARTS_JOINER}Use SI units."
    merged = merge_system(
        [{"role": "system", "content": parts}, {"role": "system", "content": "x"}]
    )
    assert merged[0]["content"].startswith(f"Be brief.{PARTS_JOINER}Use SI units.")
