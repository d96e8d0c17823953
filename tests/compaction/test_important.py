from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.compaction import extract_offline, merge_important_data, normalize_url
from engram.compaction.important import IMPORTANT_KEYS, find_urls, validate_important_data
from engram.errors import LLMBadResponse

SEED_MESSAGES = [
    {
        "role": "user",
        "content": "I prefer dark mode. My document should have sections for "
        "Introduction, Methods, Results.",
    },
    {"role": "assistant", "content": "Noted. I'll structure your document accordingly."},
    {
        "role": "user",
        "content": "Important sources: https://example.com/paper1, https://example.com/paper2",
    },
    {
        "role": "user",
        "content": "The key finding is that X causes Y. This is critical for the paper.",
    },
]


class TestOfflineExtraction:
    def test_seed001_phase4_example(self):
        data = extract_offline(SEED_MESSAGES)
        assert data["user_preferences"] == {"theme": "dark"}
        assert data["document_structure"] == {"sections": ["Introduction", "Methods", "Results"]}
        assert data["source_urls"] == ["https://example.com/paper1", "https://example.com/paper2"]
        assert data["important_facts"] == ["X causes Y"]
        assert tuple(data) == IMPORTANT_KEYS

    def test_empty_messages_give_empty_structure(self):
        data = extract_offline([])
        assert all(not value for value in data.values())
        assert tuple(data) == IMPORTANT_KEYS

    def test_decisions_entities_and_other_preferences(self):
        data = extract_offline(
            [
                {
                    "role": "user",
                    "content": "We decided to go with Postgres. Ask @jane_doe and John Smith "
                    "from Acme Corp. Document structure: Intro, Methods, Results, Conclusion. "
                    "I like concise answers. Please always cite sources.",
                }
            ]
        )
        assert data["key_decisions"] == ["We decided to go with Postgres."]
        assert data["entities"] == ["@jane_doe", "John Smith", "Acme Corp"]
        assert data["document_structure"]["sections"] == [
            "Intro",
            "Methods",
            "Results",
            "Conclusion",
        ]
        assert data["user_preferences"]["answer_length"] == "concise"
        assert data["user_preferences"]["stated"] == ["Please always cite sources."]

    def test_assistant_does_not_state_user_preferences(self):
        data = extract_offline([{"role": "assistant", "content": "I prefer dark mode."}])
        assert data["user_preferences"] == {}


class TestURLs:
    @pytest.mark.parametrize(
        ("raw", "expected"),
        [
            ("HTTPS://Example.COM:443/Path?q=1#frag", "https://example.com/Path?q=1"),
            ("http://example.com:80/a.", "http://example.com/a"),
            ("http://example.com:8080/a),", "http://example.com:8080/a"),
            ("https://en.wikipedia.org/wiki/Foo_(bar)", "https://en.wikipedia.org/wiki/Foo_(bar)"),
            ("url1", "url1"),
        ],
    )
    def test_normalize(self, raw: str, expected: str):
        assert normalize_url(raw) == expected

    def test_find_dedupes(self):
        text = "See https://a.com/x, and HTTPS://A.COM/x#top. Also (https://b.org/y)."
        assert find_urls(text) == ["https://a.com/x", "https://b.org/y"]


class TestMerge:
    def test_seed001_merge_example(self):
        merged = merge_important_data(
            {"user_preferences": {"theme": "dark"}, "source_urls": ["url1"]},
            {"user_preferences": {"font": "arial"}, "source_urls": ["url2", "url1"]},
        )
        assert merged["user_preferences"] == {"theme": "dark", "font": "arial"}
        assert merged["source_urls"] == ["url1", "url2"]

    def test_new_wins_per_key_and_lists_dedupe_case_insensitively(self):
        merged = merge_important_data(
            {"user_preferences": {"theme": "dark"}, "important_facts": ["X causes Y"]},
            {"user_preferences": {"theme": "light"}, "important_facts": ["x  causes y", "Z"]},
        )
        assert merged["user_preferences"] == {"theme": "light"}
        assert merged["important_facts"] == ["X causes Y", "Z"]

    def test_urls_normalized_before_dedupe(self):
        merged = merge_important_data(
            {"source_urls": ["https://example.com/p"]},
            {"source_urls": ["HTTPS://EXAMPLE.com:443/p#x"]},
        )
        assert merged["source_urls"] == ["https://example.com/p"]

    def test_inputs_not_modified(self):
        old = {"user_preferences": {"theme": "dark"}, "entities": ["A B"]}
        merge_important_data(old, {"user_preferences": {"font": "x"}, "entities": ["C D"]})
        assert old == {"user_preferences": {"theme": "dark"}, "entities": ["A B"]}

    @settings(deadline=None)
    @given(st.lists(st.text(max_size=8), max_size=6), st.lists(st.text(max_size=8), max_size=6))
    def test_merge_is_idempotent_and_keeps_everything(self, a: list[str], b: list[str]):
        once = merge_important_data({"important_facts": a}, {"important_facts": b})
        twice = merge_important_data(once, {"important_facts": b})
        assert once == twice
        keys = {" ".join(x.split()).casefold() for x in once["important_facts"]}
        for item in a + b:
            if item.strip():
                assert " ".join(item.strip().split()).casefold() in keys


class TestValidate:
    def test_coerces_wrong_types(self):
        data = validate_important_data(
            {
                "user_preferences": ["not", "a", "dict"],
                "key_decisions": "one decision",
                "important_facts": [1, None, "", "fact"],
                "entities": [{"name": "Acme", "type": "org"}, {"type": "org", "name": "Acme"}],
                "source_urls": None,
                "mood": "happy",
            }
        )
        assert data["user_preferences"] == {}
        assert data["key_decisions"] == ["one decision"]
        assert data["important_facts"] == ["1", "fact"]
        assert data["entities"] == [{"name": "Acme", "type": "org"}]
        assert data["source_urls"] == []
        assert data["custom_fields"] == {"mood": "happy"}

    @pytest.mark.parametrize("bad", [None, [], "text", 3])
    def test_rejects_non_objects(self, bad: object):
        with pytest.raises(LLMBadResponse):
            validate_important_data(bad)


class TestPromptText:
    def test_prompt_shows_newest_items_and_says_how_many_are_hidden(self):
        from engram.compaction.important import PROMPT_LIST_ITEMS, to_prompt_text

        data = merge_important_data({}, {"key_decisions": [f"decision {i}" for i in range(40)]})
        assert len(data["key_decisions"]) == 40  # the state keeps everything
        shown = json.loads(to_prompt_text(data))
        assert shown["key_decisions"] == [
            f"decision {i}" for i in range(40 - PROMPT_LIST_ITEMS, 40)
        ]
        assert shown["older_items_not_shown"] == {"key_decisions": 40 - PROMPT_LIST_ITEMS}

    def test_small_data_is_shown_whole(self):
        from engram.compaction.important import to_prompt_text

        data = merge_important_data({}, {"source_urls": ["https://example.com/a"]})
        assert json.loads(to_prompt_text(data)) == {"source_urls": ["https://example.com/a"]}


class TestDecisionsOffline:
    def test_bare_agreement_is_not_a_decision_but_a_stated_one_is(self):
        data = extract_offline(
            [
                {"role": "user", "content": "Agreed."},
                {"role": "user", "content": "We decided to launch Phoenix on April 29."},
            ]
        )
        assert data["key_decisions"] == ["We decided to launch Phoenix on April 29."]


class TestEntities:
    def test_names_one_per_line_are_separate_names(self):
        notes = "Attendees\nBob Chen\nMaria Lopez\nAction items\nBob Chen fixes the login bug"
        data = extract_offline([{"role": "user", "content": notes}])
        assert data["entities"] == ["Bob Chen", "Maria Lopez"]

    def test_a_repeated_run_is_kept_once(self):
        data = extract_offline([{"role": "user", "content": "I asked Bob Chen Bob Chen about it."}])
        assert data["entities"] == ["Bob Chen"]

    def test_sentence_openers_and_dates_are_not_names(self):
        text = (
            "Due November 22, the essay is due. For Causes, see the notes. "
            "Wednesday Maria Lopez ships it."
        )
        data = extract_offline([{"role": "user", "content": text}])
        assert data["entities"] == ["Maria Lopez"]

    def test_a_name_said_by_a_longer_one_is_left_out(self):
        text = "We stay at Lisboa Carmo. The Lisboa Carmo Hotel is in Chiado."
        data = extract_offline([{"role": "user", "content": text}])
        assert data["entities"] == ["Lisboa Carmo Hotel"]

    def test_verbs_that_open_sentences_are_not_names(self):
        data = extract_offline(
            [
                {"role": "user", "content": "Has Slack review already been submitted?"},
                {"role": "assistant", "content": "Worth asking Daniel. Ask Daniel Okafor today."},
                {"role": "user", "content": "Asked Priya, she says the Slack review is done."},
                {"role": "assistant", "content": "Matches Planwise. SSO Azure testing is next."},
            ]
        )
        assert data["entities"] == ["Slack", "Daniel Okafor"]

    def test_a_single_word_is_a_name_when_written_as_one_twice(self):
        data = extract_offline(
            [
                {"role": "user", "content": "We use Slack daily and Okta for login."},
                {"role": "user", "content": "The Slack bot posts here; nothing else uses okta."},
                {"role": "user", "content": "Thanks to Loops, the list is live."},
            ]
        )
        assert data["entities"] == ["Slack"]  # Okta is also written "okta"; Loops once

    def test_section_titles_are_not_entities(self):
        text = "The sections are Introduction, Health Effects, Mitigation and Conclusion."
        data = extract_offline([{"role": "user", "content": text}] * 2)
        assert data["document_structure"]["sections"][1] == "Health Effects"
        assert data["entities"] == []

    def test_a_merge_keeps_a_name_said_by_a_longer_one_once(self):
        merged = merge_important_data(
            {"entities": ["Priya Raman"]}, {"entities": ["Priya", "Slack", {"name": "Acme"}]}
        )
        assert merged["entities"] == ["Priya Raman", "Slack", {"name": "Acme"}]
