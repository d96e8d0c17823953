"""A prompt taken apart: its parts and the reply priming add up to Context.tokens exactly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.images import image_part, png_url

import engram
from engram.context import HistoryTotals
from engram.context.anatomy import RECENT, SYSTEM, describe
from engram.engine import Engram
from engram.sections.summary import SUMMARY_TITLE


@pytest.fixture
def chat_engram(tmp_path: Path) -> Iterator[Engram]:
    with engram.open(f"sqlite:///{tmp_path / 'a.db'}", llm=None) as mem:
        yield mem


def _total(anatomy) -> int:  # type: ignore[no-untyped-def]
    return sum(group.tokens for group in anatomy.groups) + anatomy.reply_priming


class TestParts:
    def test_groups_follow_the_prompt_order_and_add_up(self, chat_engram: Engram) -> None:
        chat_engram.memories("p").create("Maya owns the launch.")
        chat = chat_engram.session("s", scope="p", policy="summary_buffer")
        for i in range(60):
            chat.add("user", f"Question {i}: what about the pricing of tier {i}? " * 4)
            chat.add("assistant", f"Tier {i} costs {i} dollars per seat. " * 4)
        chat.compact()
        ctx = chat.context(1500, system="Be brief.", model="gpt-4o-mini", compact=False)
        anatomy = describe(ctx, model="gpt-4o-mini", system="Be brief.")
        titles = [g.title for g in anatomy.groups]
        assert titles[0] == SYSTEM
        assert titles[1:-1] == ctx.sections
        assert SUMMARY_TITLE in titles
        assert titles[-1] == RECENT
        recent = anatomy.groups[-1]
        assert [p.message_id for p in recent.parts] == ctx.message_ids
        assert _total(anatomy) == ctx.tokens
        assert anatomy.tokens <= anatomy.available

    def test_tool_calls_and_results_are_counted_as_sent(self, chat_engram: Engram) -> None:
        chat = chat_engram.session("s", scope="p")
        chat.add("user", "check the vendor")
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        chat.add("assistant", None, tool_calls=[call])
        chat.add("tool", '{"ok": true}', tool_call_id="c1")
        ctx = chat.context(800, compact=False)
        anatomy = describe(ctx)
        assert _total(anatomy) == ctx.tokens
        assert [p.role for p in anatomy.groups[0].parts] == ["user", "assistant", "tool"]

    def test_images_are_counted_as_sent(self, chat_engram: Engram) -> None:
        chat = chat_engram.session("s", scope="p")
        chat.add("user", [{"type": "text", "text": "Look"}, image_part(png_url(1024, 1024))])
        for model in (None, "gpt-4o-mini"):
            ctx = chat.context(40_000, compact=False, model=model)
            assert _total(describe(ctx, model=model)) == ctx.tokens

    def test_a_system_prompt_like_a_section_is_still_the_system_prompt(
        self, chat_engram: Engram
    ) -> None:
        chat = chat_engram.session("s", scope="p")
        chat.add("user", "hi")
        ctx = chat.context(500, system="[CONVERSATION SUMMARY]\nnot a section", compact=False)
        anatomy = describe(ctx, system="[CONVERSATION SUMMARY]\nnot a section")
        assert [g.title for g in anatomy.groups] == [SYSTEM, RECENT]

    def test_a_merged_system_message_is_one_part(self, chat_engram: Engram) -> None:
        chat_engram.memories("p").create("Maya owns the launch.")
        chat = chat_engram.session("s", scope="p")
        chat.add("user", "hi")
        ctx = chat.context(800, system="Be brief.", merge_system=True, compact=False)
        anatomy = describe(ctx)
        assert [g.title for g in anatomy.groups] == [SYSTEM, RECENT]
        assert _total(anatomy) == ctx.tokens

    def test_the_session_totals_travel_with_the_prompt(self, chat_engram: Engram) -> None:
        chat = chat_engram.session("s", scope="p")
        chat.add("user", "hi")
        chat.add("assistant", "hello")
        info = chat.info()
        assert info is not None
        for compact in (False, True):
            history = chat.context(800, compact=compact).history
            assert history == HistoryTotals(info.message_count, info.token_count)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.integers(1, 400), min_size=1, max_size=12),
    budget=st.integers(60, 3000),
    system=st.sampled_from([None, "", "You help.", "x " * 300]),
    model=st.sampled_from([None, "gpt-4o-mini", "gpt-4", "claude-3-5-sonnet"]),
)
def test_parts_always_add_up_to_the_prompt(
    chat_engram: Engram, sizes: list[int], budget: int, system: str | None, model: str | None
) -> None:
    chat = chat_engram.session(f"s{len(sizes)}-{budget}", scope="p")
    for i, size in enumerate(sizes):
        chat.add("user" if i % 2 == 0 else "assistant", "word " * size)
    ctx = chat.context(budget, system=system, model=model, compact=False)
    anatomy = describe(ctx, model=model, system=system)
    assert _total(anatomy) == ctx.tokens
    assert sum(len(g.parts) for g in anatomy.groups) == len(ctx.messages)
