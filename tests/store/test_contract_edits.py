"""The Store contract's deletion verbs (``MessageEditor``), run on every backend.

Messages are otherwise append-only: these are the only verbs besides
``delete_session`` that remove one, and nothing ever rewrites one.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from engram.models import UsageRecord
from engram.store import Store
from engram.store.base import MessageEditor, can_edit

from .test_contract import T0, add, ids


@pytest.fixture
def editor(store: Store) -> MessageEditor:
    assert can_edit(store), f"{store.url} cannot delete messages"
    return store


class TestDeleteMessages:
    def test_deletes_only_the_given_messages_of_that_session(
        self, store: Store, editor: MessageEditor
    ) -> None:
        first, second, third, fourth = add(store, "p", "s", "one", "two kiwi", "three", "four")
        (elsewhere,) = add(store, "p", "other", "other kiwi")
        (foreign,) = add(store, "q", "s", "foreign kiwi")
        gone = editor.delete_messages("p", "s", [fourth.id, second.id, elsewhere.id, foreign.id])
        assert ids(gone) == [second.id, fourth.id]
        assert gone[0].content == "two kiwi" and gone[0].scope == "p"
        assert ids(store.page("p", "s")) == [first.id, third.id]
        assert store.get_message("p", second.id) is None
        assert store.get_message("p", elsewhere.id) is not None
        assert store.get_message("q", foreign.id) is not None
        assert {h.message.id for h in store.search("p", "kiwi")} == {elsewhere.id}
        assert editor.delete_messages("p", "s", [second.id]) == []  # already gone
        assert editor.delete_messages("p", "nope", [first.id]) == []
        assert editor.delete_messages("p", "s", []) == []

    def test_totals_follow(self, store: Store, editor: MessageEditor) -> None:
        first, second, third = add(store, "p", "s", "aaaa", "bbbbbbbb", "cc")
        editor.delete_messages("p", "s", [first.id, third.id])
        info = store.get_session("p", "s")
        assert info is not None
        assert (info.message_count, info.token_count) == (1, second.tokens)
        assert info.first_message_at == info.last_message_at == T0 + timedelta(seconds=1)
        editor.delete_messages("p", "s", [second.id])
        emptied = store.get_session("p", "s")
        assert emptied is not None  # the session stays
        assert (emptied.message_count, emptied.token_count) == (0, 0)
        assert emptied.first_message_at is None and emptied.last_message_at is None

    def test_ids_are_never_reused(self, store: Store, editor: MessageEditor) -> None:
        *_, last = add(store, "p", "s", "one", "two")
        editor.delete_messages("p", "s", [last.id])
        (fresh,) = add(store, "p", "s", "three")
        assert fresh.id > last.id
        assert ids(store.tail("p", "s", limit=10))[-1] == fresh.id


class TestDeleteScope:
    def test_forgets_everything_of_the_scope_and_nothing_else(
        self, store: Store, editor: MessageEditor
    ) -> None:
        add(store, "user-1", "a", "secret plum", "more")
        add(store, "user-1", "b", "plum again")
        (kept,) = add(store, "user-2", "a", "plum of user two")
        store.save_state("user-1", "a", "compaction", {"x": 1}, expected_version=0)
        store.save_state("user-2", "a", "compaction", {"x": 2}, expected_version=0)
        store.add_memory("user-1", "likes plums")
        other_memory = store.add_memory("user-2", "likes pears")
        store.add_audit("user-1", {"event": "create", "content": "likes plums"})
        store.add_audit("user-2", {"event": "create"})
        usage = UsageRecord("gpt-4o-mini", "summary", 10, 1, None, T0)
        store.record_usage("user-1", "a", usage)
        store.record_usage("user-2", "a", usage)

        counts = editor.delete_scope("user-1")

        assert counts == {"sessions": 2, "messages": 3, "memories": 1}
        assert store.list_sessions("user-1") == []
        assert store.get_session("user-1", "a") is None
        assert store.load_state("user-1", "a", "compaction") is None
        assert store.search("user-1", "plum") == []
        assert store.list_memories("user-1") == []
        assert store.list_audit("user-1") == []
        assert store.usage_totals("user-1")["calls"] == 0
        assert "user-1" not in store.list_scopes()
        # The other scope is whole.
        assert ids(store.page("user-2", "a")) == [kept.id]
        assert store.list_memories("user-2") == [other_memory]
        assert store.load_state("user-2", "a", "compaction") is not None
        assert len(store.list_audit("user-2")) == 1
        assert store.usage_totals("user-2")["calls"] == 1
        # The scope can be used again, from nothing.
        (again,) = add(store, "user-1", "a", "new start")
        assert again.id > kept.id and ids(store.page("user-1", "a")) == [again.id]
        assert editor.delete_scope("nobody") == {"sessions": 0, "messages": 0, "memories": 0}
