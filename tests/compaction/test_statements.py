"""What the offline summarizer keeps: statements, written as a person taking notes writes them.

On the bundled sample conversation (what ``make run`` shows) and on small
conversations: no questions, pleasantries or quoted turns in the summary;
decisions, preferences and facts stated as such; the user in the third person.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.cli.demo import SAMPLE_FILE, sample_bytes
from engram.compaction import OfflineSummarizer, extract_offline, target_words
from engram.compaction.person import speaker_name, third_person
from engram.compaction.statements import DECISION, FACT, PREFERENCE, statements
from engram.compaction.transcript import split_sentences
from engram.compaction.words import count_words
from engram.memories.creation import extractive_memory
from engram.models import Message
from engram.transfer.importers import parse_jsonl

_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I'd|I'll|I've|me|my)\b")
_LABEL = re.compile(r"\b(?:User|Assistant|Tool result|User said):")


def _sample() -> list[dict[str, Any]]:
    (batch,) = parse_jsonl(sample_bytes(), file=SAMPLE_FILE)
    return [dict(m) for m in batch.messages]


SAMPLE = _sample()


def _as_messages(turns: list[dict[str, Any]]) -> list[Message]:
    when = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
    return [
        Message(i + 1, "p", "s", str(t["role"]), str(t["content"]), when, 10)
        for i, t in enumerate(turns)
        if t.get("content")
    ]


def _said(*turns: tuple[str, str]) -> list[tuple[str, str]]:
    return [(s.kind, s.text) for s in statements([{"role": r, "content": c} for r, c in turns])]


class TestTheSample:
    """The first screen of ``make run``: the sample folded by the offline summarizer."""

    @pytest.mark.parametrize("version", [1, 5])
    def test_the_summary_states_without_questions_labels_or_first_person(self, version: int):
        text = OfflineSummarizer().summarize(SAMPLE, previous_summary=None, version=version).text
        low, high = target_words(version)
        assert low <= count_words(text) <= high  # the preset's length rule still holds
        sentences = split_sentences(text)
        assert not [s for s in sentences if s.rstrip('"”)').endswith("?")]
        assert not _LABEL.search(text), text  # "User: ..." was every sentence
        assert not [s for s in sentences if _FIRST_PERSON.search(s)]
        assert "Has Slack review already been submitted" not in text

    def test_decisions_are_extracted_as_decisions(self):
        decisions = extract_offline(SAMPLE)["key_decisions"]
        assert (
            "Decided: Pro is $14 per user per month billed annually, $17 monthly; Business $32 "
            "annual, $38 monthly; Free stays at 3 projects and 5 members." in decisions
        )
        assert "Agreed: March 14 checkpoint for SSO." in decisions
        assert "Product Hunt launch moved to Wednesday April 9, the day after the main launch." in (
            decisions
        )
        assert len(decisions) >= 15  # it found none
        assert not [d for d in decisions if d.endswith("?") or _FIRST_PERSON.search(d)]

    def test_facts_are_stated_in_the_third_person(self):
        data = extract_offline(SAMPLE)
        assert "Maya owns the launch." in data["important_facts"]
        assert "Maya is the rollback decision maker." in data["important_facts"]
        assert not [f for f in data["important_facts"] if _FIRST_PERSON.search(f)]

    def test_an_acknowledgement_is_no_preference(self):
        data = extract_offline(SAMPLE)
        assert "framing" not in str(data["user_preferences"])  # "I like that framing."
        assert "want to know" not in str(data)  # a question, put as "I want to know ..."

    def test_entities_are_names(self):
        entities = extract_offline(SAMPLE)["entities"]
        for wrong in ("Has Slack", "Ask Daniel", "Asked Priya", "Matches Planwise", "SSO Azure"):
            assert wrong not in entities
        for name in ("Daniel Okafor", "Priya Raman", "Lumen Tasks", "Azure AD", "Slack", "Okta"):
            assert name in entities

    def test_the_memory_is_one_or_two_sentences_of_what_was_decided(self):
        memory = extractive_memory(_as_messages(SAMPLE))
        assert memory is not None
        assert 1 <= len(split_sentences(memory)) <= 2 and len(memory) <= 300
        assert not memory.startswith("User said") and not _FIRST_PERSON.search(memory)
        assert "decided" in memory.lower()


class TestStatements:
    def test_questions_pleasantries_and_requests_are_not_statements(self):
        assert (
            _said(
                ("user", "Morning. Realistic? Has Slack review already been submitted?"),
                ("user", "I want to know how many Lumen Tasks customers we're talking about."),
                ("user", "Can you write up the options? Put that in the doc too. Perfect, thanks!"),
                ("assistant", "Good morning, Maya. Good luck with the launch! Do you want more?"),
            )
            == []
        )

    def test_openers_go_and_the_user_is_in_the_third_person(self):
        assert _said(
            ("user", "Quick recap for you: Phoenix is our new app. I'm Maya, I own the launch."),
            ("user", "Ok, I'm the rollback decision maker."),
        ) == [
            (FACT, "Phoenix is our new app."),
            (FACT, "Maya owns the launch."),
            (FACT, "Maya is the rollback decision maker."),
        ]

    def test_a_marker_heads_the_decision_that_follows(self):
        assert _said(
            ("user", "Decided! Pro is $14 per user per month. Business $32. What's next?"),
            ("user", "Also decided: launch discount of 30% for the waitlist."),
        ) == [
            (DECISION, "Decided: Pro is $14 per user per month; Business $32."),
            (DECISION, "Decided: launch discount of 30% for the waitlist."),
        ]

    def test_the_assistants_record_of_a_decision_is_a_decision(self):
        said = _said(
            ("user", "Hmm. April 9 for Product Hunt then?"),
            ("assistant", "April 9 is a Wednesday, which is a reasonable day."),
            ("user", "April 9 it is."),
            ("assistant", 'Recorded: "Product Hunt launch moved to Wednesday April 9."'),
        )
        assert said == [
            ("note", "April 9 is a Wednesday, which is a reasonable day."),
            (DECISION, "Product Hunt launch moved to Wednesday April 9."),
        ]

    def test_a_correction_replaces_the_decision_it_corrects(self):
        said = _said(
            ("user", "Daniel takes Pacific, Amara takes Europe."),
            ("assistant", 'Recorded: "On-call: Daniel Okafor (Pacific), Amara Nwosu (Europe)."'),
            ("user", "Wait, I didn't say Nwosu. It's Amara Diallo."),
            ("assistant", 'Corrected: "On-call: Daniel Okafor (Pacific), Amara Diallo (Europe)."'),
        )
        decisions = [text for kind, text in said if kind == DECISION]
        assert decisions == ["On-call: Daniel Okafor (Pacific), Amara Diallo (Europe)."]

    def test_a_preference_needs_something_preferred(self):
        assert _said(
            ("user", "I like that framing. I prefer Pydantic v2 for validation."),
            ("user", "Please send updates by text, not email."),
        ) == [
            (PREFERENCE, "The user prefers Pydantic v2 for validation."),
            (PREFERENCE, "Please send updates by text, not email."),
        ]

    def test_the_assistant_speaks_of_the_user_and_of_itself_in_the_third_person(self):
        assert _said(
            ("user", "My name is Dana."),
            ("assistant", "I can see 14 invoices waiting. They will be credited to your bill."),
            ("assistant", "Set the timeout to 65 seconds. I don't have that number."),
        ) == [
            (FACT, "The user is Dana."),
            ("note", "The assistant can see 14 invoices waiting."),
            ("note", "They will be credited to Dana's bill."),
            ("note", "Suggested: set the timeout to 65 seconds."),
        ]


@pytest.mark.parametrize(
    ("sentence", "name", "expected"),
    [
        ("I'm the rollback decision maker.", "Maya", "Maya is the rollback decision maker."),
        ("I'm Maya, I own the launch.", "Maya", "Maya owns the launch."),
        ("I'm Ravi, the only backend dev.", "Ravi", "Ravi is the only backend dev."),
        (
            "I prefer tea and my manager likes coffee.",
            None,
            "The user prefers tea and the user's manager likes coffee.",
        ),
        (
            "I already tried that, so I need this fixed.",
            None,
            "The user already tried that, so the user needs this fixed.",
        ),
        ("I didn't say Nwosu.", "Maya", "Maya didn't say Nwosu."),
        ("I, for one, agree.", None, None),  # no rule for it: left out, not quoted
    ],
)
def test_third_person(sentence: str, name: str | None, expected: str | None) -> None:
    assert third_person(sentence, name) == expected


def test_speaker_name() -> None:
    assert speaker_name(["Morning.", "I'm Maya, I own the launch."]) == "Maya"
    assert speaker_name(["My name is Aiko Tanaka and I joined on Monday."]) == "Aiko Tanaka"
    assert speaker_name(["I'm French, and I'm off now."]) is None


def test_a_quotation_is_one_sentence() -> None:
    text = 'Noted as a decision: "Checkpoint on March 14. If it fails, we move." Anything else?'
    assert split_sentences(text) == [
        'Noted as a decision: "Checkpoint on March 14. If it fails, we move."',
        "Anything else?",
    ]


STATED = [
    "We decided to launch on April 8.",
    "The budget is $48,000 for the quarter.",
    "Bob Chen owns the backend.",
    "I prefer weekly reports on Fridays.",
]
ASIDES = [
    "Realistic?",
    "What about $14?",
    "Thanks, that's all!",
    "Good luck with the launch!",
    "Can you write up the options?",
    "Morning.",
    "I like that.",
]


@settings(deadline=None, max_examples=60)
@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "assistant"]), st.sampled_from(STATED + ASIDES)),
        min_size=1,
        max_size=30,
    ).filter(lambda turns: any(text in STATED for _, text in turns)),
    st.integers(min_value=1, max_value=6),
)
def test_a_summary_never_quotes_asks_or_thanks(turns: list[tuple[str, str]], version: int):
    messages = [{"role": role, "content": text} for role, text in turns]
    text = OfflineSummarizer().summarize(messages, previous_summary=None, version=version).text
    assert text and count_words(text) <= target_words(version)[1]
    assert "?" not in text and not _LABEL.search(text) and not _FIRST_PERSON.search(text)
    for aside in ("Thanks", "Good luck", "Morning", "write up", "I like that"):
        assert aside not in text
    memory = extractive_memory(_as_messages(messages))
    if any(role == "user" and text in STATED for role, text in turns):
        assert memory is not None  # the user stated something: it is remembered
    if memory is not None:
        assert len(split_sentences(memory)) <= 2
        assert "?" not in memory and not _FIRST_PERSON.search(memory)


def test_a_request_headed_by_a_name_is_a_request() -> None:
    said = _said(
        ("user", "Jonas Lindqvist, put his name down for support readiness."),
        ("assistant", 'Done: "Support readiness: Jonas Lindqvist, training on March 24."'),
    )
    assert said == [(DECISION, "Support readiness: Jonas Lindqvist, training on March 24.")]
