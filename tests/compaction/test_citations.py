"""Citations: summaries and important data name the messages they came from.

Pure parts (ranges, markers, cited text) are property-tested; the offline
summarizer is checked on the bundled sample conversation (every paragraph and
item cites messages that exist, and ``expand`` returns them), the model path
against the scripted server (it is asked to cite; what it cites outside the
fold is dropped and counted).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram import tools
from engram.cli.demo import DEMO_SCOPE, store_sample
from engram.compaction.citations import (
    CITE_INSTRUCTIONS,
    check_ranges,
    cited_text,
    covers,
    from_ids,
    marker,
    parse_cited,
    parse_ranges,
)
from engram.compaction.data_cites import cites_of
from engram.compaction.state import STATE_KIND, parse_state
from engram.engine import Engram, Session
from engram.policy import get_policy
from engram.sections.summary import SUMMARY_TITLE
from engram.testing import FakeLLMServer, FakeResponse, RecordedRequest

from .engine_support import long_text

WORD = re.compile(r"[A-Za-z0-9$%][\w$%,.'-]*\w|\d")


class TestRanges:
    def test_neighbours_in_the_fold_share_a_range(self) -> None:
        order = [10, 11, 12, 13, 20, 21, 40]
        assert from_ids([10, 12, 20], order) == ((10, 20),)
        assert from_ids([10, 12, 21], order) == ((10, 12), (21, 21))
        assert from_ids([10, 40], order) == ((10, 10), (40, 40))
        assert marker(((112, 140), (150, 150))) == "[#112-#140, #150]"
        assert marker(((1, 1), (3, 3), (5, 5)), limit=2) == "[#1, #3, …]"

    def test_written_forms_are_read(self) -> None:
        assert parse_ranges("[#112-#140, #150]") == ((112, 140), (150, 150))
        assert parse_ranges("#30-#12") == ((12, 30),)
        assert parse_ranges("messages 4 and 6") == ((4, 4), (6, 6))
        assert parse_ranges("none") == ()

    def test_a_model_that_cites_each_sentence_gives_a_paragraph_each(self) -> None:
        text = "Pro is $14 [#12]. Business is $32. [#14]\n\nUncited closing words."
        assert parse_cited(text) == [
            ("Pro is $14.", ((12, 12),)),
            ("Business is $32.", ((14, 14),)),
            ("Uncited closing words.", ()),
        ]
        assert parse_cited("We agreed [#3] to raise prices.") == [
            ("We agreed to raise prices.", ((3, 3),))
        ]

    def test_ranges_outside_the_fold_are_dropped_and_counted(self) -> None:
        kept, dropped = check_ranges(((5, 7), (9, 9), (50, 60)), {5, 6, 7}, earlier=((1, 4),))
        assert kept == ((5, 7),) and dropped == 2
        kept, dropped = check_ranges(((2, 6),), {5, 6}, earlier=((1, 4),))
        assert kept == ((2, 6),) and dropped == 0

    @given(
        st.lists(
            st.tuples(
                st.text(st.characters(codec="utf-8", exclude_characters="[]#\n\r"), min_size=1)
                .map(lambda t: " ".join(t.split()))
                .filter(lambda t: t.strip(".!?…,;: ") != ""),
                st.lists(st.integers(1, 10_000), max_size=4),
            ),
            min_size=1,
            max_size=6,
        )
    )
    def test_cited_text_reads_back(self, items: list[tuple[str, list[int]]]) -> None:
        paragraphs = [(text.strip(), from_ids(ids)) for text, ids in items]
        back = parse_cited(cited_text(paragraphs))
        assert [c for _, c in back] == [c for _, c in paragraphs]
        for (text, _), (read, _) in zip(paragraphs, back, strict=True):
            assert WORD.findall(read) == WORD.findall(text)


class TestState:
    def test_a_state_written_before_citations_loads_without_them(self) -> None:
        state = parse_state({"summary": "Old summary.", "summary_version": 2, "watermark": 9})
        assert state.summary == "Old summary." and state.reset_reason is None
        assert state.paragraphs() == [("Old summary.", ())]
        assert state.important_cites == {}

    def test_unreadable_citations_are_dropped_not_the_summary(self) -> None:
        unreadable = ({"summary": "junk"}, {"summary": [[[5, 1]]]}, "junk", {"summary": [[]] * 3})
        for citations in unreadable:
            document = {"summary": "A.\n\nB.", "summary_version": 1, "watermark": 9}
            state = parse_state({**document, "citations": citations})
            assert state.summary == "A.\n\nB." and state.reset_reason is None
            assert state.summary_cites == ()

    def test_citations_round_trip(self) -> None:
        state = parse_state(
            {
                "summary": "A.\n\nB.",
                "summary_version": 1,
                "watermark": 9,
                "citations": {
                    "summary": [[[1, 3]], [[5, 5], [7, 9]]],
                    "important_data": {"entities": {"s:maya": [[1, 1]]}},
                },
                "covers": ["2025-03-03T09:00:00+00:00", "not a date"],
            }
        )
        assert state.covers_from is not None and state.covers_from.day == 3
        assert state.covers_until is None
        assert state.paragraphs() == [("A.", ((1, 3),)), ("B.", ((5, 5), (7, 9)))]
        assert state.cited_summary() == "A. [#1-#3]\n\nB. [#5, #7-#9]"
        assert parse_state(state.to_dict()) == state


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """The bundled sample conversation, replayed turn by turn under ``summary_buffer``."""
    import engram

    path = tmp_path_factory.mktemp("sample") / "engram.db"
    with engram.open(f"sqlite:///{path}", llm=None) as opened:
        yield store_sample(opened, replay_turns=True)


def _expanded(chat: Session, cites: tuple[tuple[int, int], ...]) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    ids = marker(cites)
    while ids:
        result = json.loads(tools.dispatch(chat, "expand", {"ids": ids, "max_tokens": 4000}))
        assert "error" not in result, result
        found += result["messages"]
        ids = result["rest"]
    return found


class TestSample:
    def test_every_paragraph_and_item_cites_messages_that_exist(self, sample: Session) -> None:
        state = sample.compaction_state()
        assert state.summary_version >= 2
        stored = {m.id: m for m in sample.messages(limit=1000)}
        cited = [c for _, c in state.paragraphs()] + [
            c for _, _, c in cites_of(state.important_data, state.important_cites)
        ]
        assert cited and all(cited), "a paragraph or item without a citation"
        for cites in cited:
            for low, high in cites:
                assert low in stored and high in stored and high <= state.watermark

    def test_expand_returns_the_cited_text(self, sample: Session) -> None:
        state = sample.compaction_state()
        stored = {m.id: m for m in sample.messages(limit=1000)}
        for text, cites in state.paragraphs():
            messages = _expanded(sample, cites)
            ids = [m["id"] for m in messages]
            assert ids == sorted(i for i in stored if covers(cites, i))
            for message in messages:
                assert message["content"] == stored[int(str(message["id"]))].content
            said = " ".join(str(m["content"]) for m in messages)
            numbers = re.findall(r"\d[\d,.:]*\d|\d", text)
            assert all(n in said for n in numbers), (text, numbers)

    def test_items_come_from_their_messages(self, sample: Session) -> None:
        state = sample.compaction_state()
        for name, item, cites in cites_of(state.important_data, state.important_cites):
            said = " ".join(str(m["content"]) for m in _expanded(sample, cites))
            words = {w.lower() for w in re.findall(r"[A-Za-z]{4,}", item)} - {"maya"}
            assert not words or any(w in said.lower() for w in words), (name, item)

    def test_the_prompt_shows_the_citations(self, sample: Session) -> None:
        ctx = sample.context(3000, compact=False)
        summary = next(m["content"] for m in ctx.messages if SUMMARY_TITLE in m["content"])
        assert "not instructions" in summary
        state = sample.compaction_state()
        span = f"messages up to #{state.watermark} (2025-03-03 to {state.covers_until:%Y-%m-%d})"
        assert span in summary.splitlines()[1]
        assert re.search(r"\. \[#\d+(-#\d+)?(, #\d+(-#\d+)?)*\]\n", summary)
        plain_policy = {"name": "summary_buffer", "citations": False}
        off = sample.context(3000, compact=False, policy=plain_policy)
        plain = next(m["content"] for m in off.messages if SUMMARY_TITLE in m["content"])
        assert "[#" not in plain and off.tokens < ctx.tokens

    def test_expand_is_bound_to_the_session(self, sample: Session) -> None:
        first = sample.messages(limit=1)[0]
        elsewhere = _session(sample, "another-conversation")
        result = json.loads(tools.dispatch(elsewhere, "expand", {"ids": f"#{first.id}"}))
        assert result["count"] == 0 and result["messages"] == []
        bad = json.loads(tools.dispatch(sample, "expand", {"ids": "the pricing part"}))
        assert bad["error"]["type"] == "invalid_arguments" and "#12-#30" in bad["error"]["message"]


def _session(chat: Session, name: str) -> Session:
    other = Session(chat.runtime, DEMO_SCOPE, name, None)
    other.add("user", "A different conversation.")
    return other


# -- a model that cites ------------------------------------------------------------


def citing_responder(request: RecordedRequest) -> FakeResponse:
    """Summaries cite the first id of the transcript and an id far outside it; data cites too."""
    last = str(request.messages[-1].get("content", "")) if request.messages else ""
    ids = [int(i) for i in re.findall(r"\[#(\d+)\]", last)]
    first = ids[0] if ids else 1
    if ((request.body or {}).get("response_format") or {}).get("type") == "json_object":
        return FakeResponse(
            content=json.dumps(
                {"key_decisions": [f"Pro costs $14 [#{first}]", "Invented [#999999]"]}
            )
        )
    return FakeResponse(
        content=f"The team discussed pricing. [#{first}-#{first + 1}]\n\n"
        f"They decided nothing else. [#999999]\n\nNo citation here."
    )


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(default=citing_responder) as server:
        yield server


def _fill(chat: Session, pairs: int) -> None:
    for i in range(pairs):
        chat.add_many(
            [
                {"role": "user", "content": long_text(f"User message {i}:", 150)},
                {"role": "assistant", "content": long_text(f"Response {i}:", 150)},
            ]
        )


def test_a_model_is_asked_to_cite_and_what_it_cites_outside_is_dropped(
    mem_llm: Engram, fake_llm: FakeLLMServer
) -> None:
    chat = mem_llm.session("cites", policy="summary_buffer")
    _fill(chat, 12)
    chat.context(system="S")
    state = chat.compaction_state()
    assert state.summary_version == 1
    summary_requests = [r for r in fake_llm.requests if "Word count target" in str(r.messages)]
    assert summary_requests and CITE_INSTRUCTIONS in str(summary_requests[0].messages)
    assert re.search(r"\[#\d+\] user: User message 0", str(summary_requests[0].messages))
    first = chat.messages(limit=1)[0].id
    assert state.paragraphs() == [
        ("The team discussed pricing.", ((first, first + 1),)),
        ("They decided nothing else.", ()),
        ("No citation here.", ()),
    ]
    assert state.important_data["key_decisions"] == ["Pro costs $14", "Invented"]
    items = list(cites_of(state.important_data, state.important_cites))
    assert items == [
        ("key_decisions", "Pro costs $14", ((first, first),)),
        ("key_decisions", "Invented", ()),
    ]
    assert mem_llm.compaction_metrics.citations_dropped == 2
    stored = mem_llm.store.load_state("default", "cites", STATE_KIND)
    assert stored is not None and "999999" not in json.dumps(stored.data)


def test_metrics_count_dropped_citations(mem_llm: Engram, fake_llm: FakeLLMServer) -> None:
    pytest.importorskip("prometheus_client")
    from engram.server.metrics import ServerMetrics

    assert get_policy("summary_buffer").citations is True
    chat = mem_llm.session("cites", policy="summary_buffer")
    _fill(chat, 12)
    chat.context(system="S")
    text = ServerMetrics(mem_llm).render().decode()
    assert "engram_compaction_citations_dropped_total 2.0" in text
