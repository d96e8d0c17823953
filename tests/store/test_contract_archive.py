"""The Store contract's prompt archive (``PromptArchive``), run on every backend.

Recipes per turn numbered from 1, texts stored once, superseded versions of
the versioned state kinds kept until pruned, and all of it gone with its session.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from engram.models import JSON
from engram.store import Store
from engram.store.base import MessageEditor, PromptArchive, archives_prompts, can_edit

from .test_contract import T0, add


@pytest.fixture
def archive(store: Store) -> PromptArchive:
    assert archives_prompts(store), f"{store.url} keeps no prompt recipes"
    return store


def recipes(*names: str) -> list[tuple[datetime, JSON]]:
    return [(T0 + timedelta(seconds=i), {"name": name}) for i, name in enumerate(names)]


class TestTurns:
    def test_a_session_never_written_records_nothing(self, archive: PromptArchive) -> None:
        assert archive.add_prompts("p", "s", recipes("a"), {"h": "text"}) == []
        assert archive.list_prompts("p", "s") == []

    def test_turns_are_numbered_from_one_in_order(
        self, store: Store, archive: PromptArchive
    ) -> None:
        add(store, "p", "s", "hello")
        assert archive.add_prompts("p", "s", recipes("a", "b"), {}) == [1, 2]
        assert archive.add_prompts("p", "s", recipes("c"), {}) == [3]
        listed = archive.list_prompts("p", "s")
        assert [(r.turn, r.data["name"]) for r in listed] == [(1, "a"), (2, "b"), (3, "c")]
        assert listed[0].at == T0 and listed[0].usage is None
        assert [r.turn for r in archive.list_prompts("p", "s", after=1, limit=1)] == [2]
        assert [r.turn for r in archive.list_prompts("p", "s", limit=2, newest=True)] == [2, 3]

    def test_usage_is_attached_to_known_turns(self, store: Store, archive: PromptArchive) -> None:
        add(store, "p", "s", "hello")
        archive.add_prompts("p", "s", recipes("a", "b"), {})
        archive.set_prompt_usage("p", "s", {2: {"cached_tokens": 1024}, 9: {"cached_tokens": 1}})
        listed = archive.list_prompts("p", "s")
        assert [r.usage for r in listed] == [None, {"cached_tokens": 1024}]

    def test_texts_are_kept_once_and_read_by_hash(
        self, store: Store, archive: PromptArchive
    ) -> None:
        add(store, "p", "s", "hello")
        archive.add_prompts("p", "s", recipes("a"), {"h1": "one", "h2": "two"})
        archive.add_prompts("p", "s", recipes("b"), {"h1": "one"})
        assert archive.prompt_texts("p", "s", ["h1", "h2", "nope"]) == {"h1": "one", "h2": "two"}
        assert archive.prompt_texts("q", "s", ["h1"]) == {}

    def test_scopes_are_isolated(self, store: Store, archive: PromptArchive) -> None:
        add(store, "p", "s", "hello")
        add(store, "q", "s", "hello")
        archive.add_prompts("p", "s", recipes("a"), {"h": "p's"})
        assert archive.list_prompts("q", "s") == []
        assert archive.prompt_texts("q", "s", ["h"]) == {}


class TestStateVersions:
    def test_a_versioned_kind_keeps_what_it_replaces(
        self, store: Store, archive: PromptArchive
    ) -> None:
        for n in range(3):
            assert store.save_state("p", "s", "compaction", {"n": n}, expected_version=n)
        assert store.save_state("p", "s", "prompt_log", {"n": 0}, expected_version=0)
        assert store.save_state("p", "s", "prompt_log", {"n": 1}, expected_version=1)
        for version in (1, 2, 3):
            record = archive.load_state_version("p", "s", "compaction", version)
            assert record is not None and record.data == {"n": version - 1}
            assert record.version == version
        assert archive.load_state_version("p", "s", "compaction", 4) is None
        assert archive.load_state_version("p", "s", "prompt_log", 1) is None  # not versioned
        assert archive.load_state_version("q", "s", "compaction", 1) is None

    def test_a_lost_compare_and_set_keeps_nothing(
        self, store: Store, archive: PromptArchive
    ) -> None:
        store.save_state("p", "s", "compaction", {"n": 0}, expected_version=0)
        store.save_state("p", "s", "compaction", {"n": 1}, expected_version=1)
        assert store.save_state("p", "s", "compaction", {"n": 9}, expected_version=1) is None
        first = archive.load_state_version("p", "s", "compaction", 1)
        assert first is not None and first.data == {"n": 0}


class TestPruning:
    def test_prune_drops_what_is_not_kept(self, store: Store, archive: PromptArchive) -> None:
        add(store, "p", "s", "hello")
        for n in range(4):
            store.save_state("p", "s", "compaction", {"n": n}, expected_version=n)
        archive.add_prompts("p", "s", recipes("a", "b", "c"), {"h1": "1", "h2": "2"})
        archive.prune_prompts(
            "p", "s", before_turn=3, keep_versions={"compaction": [2]}, keep_texts=["h2"]
        )
        assert [r.turn for r in archive.list_prompts("p", "s")] == [3]
        assert archive.load_state_version("p", "s", "compaction", 1) is None
        assert archive.load_state_version("p", "s", "compaction", 2) is not None
        assert archive.load_state_version("p", "s", "compaction", 3) is None
        assert archive.load_state_version("p", "s", "compaction", 4) is not None  # current
        assert archive.prompt_texts("p", "s", ["h1", "h2"]) == {"h2": "2"}
        # Numbers are never reused after a prune.
        assert archive.add_prompts("p", "s", recipes("d"), {}) == [4]


class TestGoesWithItsSession:
    def test_purge_and_forget(self, store: Store, archive: PromptArchive) -> None:
        assert can_edit(store)
        editor: MessageEditor = store
        for scope in ("p", "q"):
            add(store, scope, "s", "hello")
            store.save_state(scope, "s", "compaction", {"n": 0}, expected_version=0)
            store.save_state(scope, "s", "compaction", {"n": 1}, expected_version=1)
            archive.add_prompts(scope, "s", recipes("a"), {"h": "t"})
        assert store.delete_session("p", "s")
        add(store, "p", "s", "again")
        assert archive.list_prompts("p", "s") == []
        assert archive.load_state_version("p", "s", "compaction", 1) is None
        assert archive.prompt_texts("p", "s", ["h"]) == {}
        assert archive.add_prompts("p", "s", recipes("b"), {}) == [1]
        editor.delete_scope("q")
        add(store, "q", "s", "again")
        assert archive.list_prompts("q", "s") == []
        assert archive.load_state_version("q", "s", "compaction", 1) is None
