"""The Store contract, written once, run on every backend (see ``tests/conftest.py``).

Each class is one behaviour promised by ``engram.store.base.Store``. Only the
Protocol is used here, never a backend's internals.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.images import image_part, png_url

from engram.errors import EngramError, InvalidMessage
from engram.models import NewMessage, UsageRecord
from engram.store import MAX_PAGE, Store, open_store

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def new(
    content: str,
    role: str = "user",
    at: datetime | None = None,
    **extra: Any,
) -> NewMessage:
    return NewMessage(role=role, content=content, created_at=at or T0, **extra)


def add(
    store: Store, scope: str, session: str, *contents: str, start: datetime = T0, role: str = "user"
) -> list[Any]:
    """Append ``contents`` one second apart; tokens = len // 4 + 1."""
    batch = [new(c, role, start + timedelta(seconds=i)) for i, c in enumerate(contents)]
    return store.append(scope, session, batch, [len(c) // 4 + 1 for c in contents])


def ids(messages: list[Any]) -> list[int]:
    return [m.id for m in messages]


class TestSessions:
    def test_missing_session_is_none(self, store: Store) -> None:
        assert store.get_session("p", "nope") is None

    def test_ensure_creates_once(self, store: Store) -> None:
        first = store.ensure_session("p", "s")
        again = store.ensure_session("p", "s")
        assert (first.scope, first.id) == ("p", "s")
        assert first.message_count == 0 and first.token_count == 0
        assert again.created_at == first.created_at
        assert first.created_at.utcoffset() == timedelta(0)
        got = store.get_session("p", "s")
        assert got is not None and got.created_at == first.created_at

    def test_policy_replaced_only_when_given(self, store: Store) -> None:
        store.ensure_session("p", "s", policy={"budget": 8000, "preset": "lean"})
        assert store.ensure_session("p", "s").policy == {"budget": 8000, "preset": "lean"}
        store.ensure_session("p", "s", policy={"budget": 4000})
        info = store.get_session("p", "s")
        assert info is not None and info.policy == {"budget": 4000}

    def test_no_policy_is_none(self, store: Store) -> None:
        assert store.ensure_session("p", "s").policy is None

    def test_running_totals(self, store: Store) -> None:
        add(store, "p", "s", "aaaa", "bbbbbbbb")
        add(store, "p", "s", "cc", start=T0 + timedelta(minutes=5))
        info = store.get_session("p", "s")
        assert info is not None
        assert info.message_count == 3
        assert info.token_count == (4 // 4 + 1) + (8 // 4 + 1) + (2 // 4 + 1)
        assert info.first_message_at == T0
        assert info.last_message_at == T0 + timedelta(minutes=5)

    def test_list_most_recently_updated_first(self, store: Store) -> None:
        for name in ("a", "b", "c"):
            store.ensure_session("p", name)
        add(store, "p", "a", "new activity")
        assert [s.id for s in store.list_sessions("p")] == ["a", "c", "b"]

    def test_list_limit_offset_and_scope(self, store: Store) -> None:
        for name in ("a", "b", "c"):
            store.ensure_session("p", name)
        store.ensure_session("q", "z")
        assert [s.id for s in store.list_sessions("p", limit=2)] == ["c", "b"]
        assert [s.id for s in store.list_sessions("p", limit=2, offset=2)] == ["a"]
        everything = {(s.scope, s.id) for s in store.list_sessions()}
        assert everything == {("p", "a"), ("p", "b"), ("p", "c"), ("q", "z")}
        assert store.list_sessions("empty") == []


class TestScopeIsolation:
    def test_same_session_id_in_two_scopes(self, store: Store) -> None:
        add(store, "alpha", "chat", "alpha secret")
        add(store, "beta", "chat", "beta words", "more beta")
        a = store.tail("alpha", "chat", limit=10)
        b = store.tail("beta", "chat", limit=10)
        assert [m.content for m in a] == ["alpha secret"]
        assert [m.content for m in b] == ["beta words", "more beta"]
        assert {m.scope for m in a} == {"alpha"}
        alpha = store.get_session("alpha", "chat")
        beta = store.get_session("beta", "chat")
        assert alpha is not None and beta is not None
        assert (alpha.message_count, beta.message_count) == (1, 2)

    def test_get_message_needs_the_right_scope(self, store: Store) -> None:
        (m,) = add(store, "alpha", "chat", "private")
        assert store.get_message("beta", m.id) is None
        got = store.get_message("alpha", m.id)
        assert got is not None and got.content == "private" and got.session == "chat"
        assert store.get_message("alpha", m.id + 1000) is None

    def test_search_and_between_never_cross(self, store: Store) -> None:
        add(store, "alpha", "chat", "the launch codes are banana")
        add(store, "beta", "other", "nothing to see")
        assert store.search("beta", "banana") == []
        assert store.search("beta", "banana", session="chat") == []
        window = (T0 - timedelta(days=1), T0 + timedelta(days=1))
        assert [m.content for m in store.between("beta", None, *window)] == ["nothing to see"]
        assert store.between("beta", "chat", *window) == []
        hits = store.search("alpha", "banana")
        assert [h.message.scope for h in hits] == ["alpha"]

    def test_state_is_per_scope(self, store: Store) -> None:
        store.save_state("alpha", "chat", "compaction", {"summary": "a"}, expected_version=0)
        assert store.load_state("beta", "chat", "compaction") is None

    def test_list_scopes(self, store: Store) -> None:
        store.ensure_session("gamma", "s")
        store.add_memory("alpha", "likes tea")
        store.ensure_session("beta", "s")
        assert store.list_scopes() == ["alpha", "beta", "gamma"]


class TestAppend:
    def test_returns_stored_messages_with_increasing_ids(self, store: Store) -> None:
        stored = add(store, "p", "s", "one", "two", "three")
        assert ids(stored) == sorted(ids(stored))
        assert len(set(ids(stored))) == 3
        assert [m.content for m in stored] == ["one", "two", "three"]
        assert store.tail("p", "s", limit=10) == stored

    def test_ids_increase_across_sessions_and_scopes(self, store: Store) -> None:
        seen: list[int] = []
        for scope, session in [("p", "a"), ("q", "b"), ("p", "a"), ("p", "c"), ("q", "b")]:
            seen += ids(add(store, scope, session, f"{scope}{session}"))
        assert seen == sorted(seen) and len(set(seen)) == len(seen)

    def test_creates_session(self, store: Store) -> None:
        add(store, "p", "fresh", "hi")
        info = store.get_session("p", "fresh")
        assert info is not None and info.message_count == 1

    def test_failed_batch_writes_nothing(self, store: Store) -> None:
        add(store, "p", "s", "before")
        bad = [new("ok 1"), new("ok 2"), new("bad", role="wizard"), new("ok 4")]
        with pytest.raises(InvalidMessage):
            store.append("p", "s", bad, [1, 1, 1, 1])
        assert [m.content for m in store.tail("p", "s", limit=10)] == ["before"]
        info = store.get_session("p", "s")
        assert info is not None and info.message_count == 1
        assert store.search("p", "ok") == []

    def test_failed_batch_does_not_create_session(self, store: Store) -> None:
        with pytest.raises(InvalidMessage):
            store.append("p", "ghost", [new("x", role="wizard")], [1])
        assert store.tail("p", "ghost", limit=10) == []
        info = store.get_session("p", "ghost")
        assert info is None or info.message_count == 0

    def test_token_count_mismatch_is_refused(self, store: Store) -> None:
        with pytest.raises(EngramError):
            store.append("p", "s", [new("a"), new("b")], [1])
        assert store.tail("p", "s", limit=10) == []


class TestPaging:
    @pytest.fixture
    def ten(self, store: Store) -> list[Any]:
        return add(store, "p", "s", *[f"m{i}" for i in range(10)])

    def test_tail_is_newest_oldest_first(self, store: Store, ten: list[Any]) -> None:
        assert store.tail("p", "s", limit=3) == ten[-3:]
        assert store.tail("p", "s", limit=100) == ten
        # A limit a little over the history (a negative slice start would cut it short).
        assert store.tail("p", "s", limit=11) == ten
        assert store.tail("p", "s", limit=5, before_id=ten[3].id) == ten[:3]

    def test_tail_before_id(self, store: Store, ten: list[Any]) -> None:
        assert store.tail("p", "s", limit=3, before_id=ten[5].id) == ten[2:5]
        assert store.tail("p", "s", limit=3, before_id=ten[0].id) == []

    def test_page_after_id(self, store: Store, ten: list[Any]) -> None:
        assert store.page("p", "s", limit=4) == ten[:4]
        assert store.page("p", "s", after_id=ten[3].id, limit=4) == ten[4:8]
        assert store.page("p", "s", after_id=ten[-1].id) == []

    def test_zero_limit_and_missing_session(self, store: Store, ten: list[Any]) -> None:
        assert store.tail("p", "s", limit=0) == []
        assert store.page("p", "s", limit=0) == []
        assert store.tail("p", "missing", limit=5) == []
        assert store.page("p", "missing") == []
        assert store.tail("other", "s", limit=5) == []

    def test_limits_clamped_to_max_page(self, store: Store) -> None:
        n = MAX_PAGE + 5
        batch = [new(f"m{i}", at=T0 + timedelta(seconds=i)) for i in range(n)]
        store.append("p", "big", batch, [1] * n)
        assert len(store.tail("p", "big", limit=n)) == MAX_PAGE
        assert len(store.page("p", "big", limit=n)) == MAX_PAGE
        assert len(store.between("p", "big", T0, T0 + timedelta(days=1), limit=n)) == MAX_PAGE
        assert store.page("p", "big", limit=n)[0].content == "m0"
        assert store.tail("p", "big", limit=n)[-1].content == f"m{n - 1}"

    @settings(
        max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(n=st.integers(0, 25), limit=st.integers(1, 7))
    def test_walks_visit_every_message_once(self, store: Store, n: int, limit: int) -> None:
        session = f"walk-{next(_counter)}"
        stored = add(store, "p", session, *[f"w{i}" for i in range(n)]) if n else []
        forward: list[Any] = []
        after = None
        while page := store.page("p", session, after_id=after, limit=limit):
            assert len(page) <= limit
            forward += page
            after = page[-1].id
        backward: list[Any] = []
        before = None
        while chunk := store.tail("p", session, limit=limit, before_id=before):
            backward = chunk + backward
            before = chunk[0].id
        assert forward == stored
        assert backward == stored


_counter = itertools.count()


class TestBetween:
    def test_half_open_range(self, store: Store) -> None:
        ms = add(store, "p", "s", "a", "b", "c", "d")  # T0, +1s, +2s, +3s
        got = store.between("p", "s", T0 + timedelta(seconds=1), T0 + timedelta(seconds=3))
        assert got == ms[1:3]

    def test_roles_and_limit(self, store: Store) -> None:
        batch = [
            new("q1", "user", T0),
            new("a1", "assistant", T0 + timedelta(seconds=1)),
            new("q2", "user", T0 + timedelta(seconds=2)),
        ]
        store.append("p", "s", batch, [1, 1, 1])
        day = (T0 - timedelta(hours=1), T0 + timedelta(hours=1))
        assert [m.content for m in store.between("p", "s", *day, roles=["user"])] == ["q1", "q2"]
        assert [m.content for m in store.between("p", "s", *day, limit=2)] == ["q1", "a1"]

    def test_whole_scope_oldest_first(self, store: Store) -> None:
        add(store, "p", "one", "late", start=T0 + timedelta(hours=2))
        add(store, "p", "two", "early", start=T0)
        add(store, "q", "one", "elsewhere", start=T0 + timedelta(hours=1))
        got = store.between("p", None, T0 - timedelta(days=1), T0 + timedelta(days=1))
        assert [(m.session, m.content) for m in got] == [("two", "early"), ("one", "late")]

    def test_other_time_zones_mean_the_same_instant(self, store: Store) -> None:
        plus2 = timezone(timedelta(hours=2))
        (m,) = store.append(
            "p", "s", [new("tz", at=datetime(2024, 5, 1, 14, 0, tzinfo=plus2))], [1]
        )
        assert m.created_at == T0
        got = store.between("p", "s", T0, T0 + timedelta(seconds=1))
        assert [x.id for x in got] == [m.id]
        assert got[0].created_at.utcoffset() == timedelta(0)


class TestSearch:
    def test_stemming(self, store: Store) -> None:
        add(store, "p", "s", "We will decide tomorrow", "The price is right", "unrelated")
        # The turns after a match hold it in their neighbour context: they rank below it.
        assert next(h.message.content for h in store.search("p", "decided")) == (
            "We will decide tomorrow"
        )
        assert next(h.message.content for h in store.search("p", "prices")) == "The price is right"
        assert store.search("p", "zzz") == []

    def test_snippet_marks_matches(self, store: Store) -> None:
        add(store, "p", "s", "We agreed the price is 40 dollars")
        (hit,) = store.search("p", "price")
        assert "[price]" in hit.snippet
        assert hit.message.content == "We agreed the price is 40 dollars"

    def test_matches_speaker_name(self, store: Store) -> None:
        store.append("p", "s", [new("hello there", "assistant", name="zorblax")], [1])
        hits = store.search("p", "zorblax")
        assert [h.message.name for h in hits] == ["zorblax"]

    def test_any_word_matches_and_all_words_rank_first(self, store: Store) -> None:
        add(store, "p", "s", "pricing other note", "pricing zebra note", "zebra other note")
        hits = store.search("p", "pricing zebra")
        assert hits[0].message.content == "pricing zebra note"
        assert {h.message.content for h in hits} == {
            "pricing other note",
            "pricing zebra note",
            "zebra other note",
        }
        assert all(a.score >= b.score for a, b in itertools.pairwise(hits))

    def test_filters(self, store: Store) -> None:
        store.append(
            "p",
            "s",
            [
                new("budget talk", "user", T0),
                new("budget answer", "assistant", T0 + timedelta(hours=1)),
            ],
            [1, 1],
        )
        add(store, "p", "other", "budget elsewhere", start=T0 + timedelta(hours=2))

        def found(**kw: Any) -> set[str]:
            return {h.message.content for h in store.search("p", "budget", **kw)}

        assert found() == {"budget talk", "budget answer", "budget elsewhere"}
        assert found(session="s") == {"budget talk", "budget answer"}
        assert found(roles=["assistant"]) == {"budget answer"}
        assert found(start=T0 + timedelta(hours=1)) == {"budget answer", "budget elsewhere"}
        assert found(end=T0 + timedelta(hours=1)) == {"budget talk"}
        assert found(session="missing") == set()
        assert len(store.search("p", "budget", limit=2)) == 2

    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            ('"quoted', "quoted"),
            ("star*", "star"),
            ("NEAR(alpha beta", "alpha"),
            ("pricing AND zebra", "pricing"),
            ("50%", "50"),
            ("snake_case", "snake"),
            ("(unbalanced", "unbalanced"),
            ("-minus", "minus"),
            ("key:value", "key"),
            ("col:content", "content"),
            ("'; DROP TABLE messages; --", "drop"),
            ("{curly} [square] ^caret", "curly"),
        ],
    )
    def test_metacharacters_are_text(self, store: Store, query: str, expected: str) -> None:
        text = (
            'we said "quoted" star* NEAR(alpha beta) pricing AND zebra 50% snake_case '
            "(unbalanced -minus key:value col:content DROP TABLE {curly} [square] ^caret"
        )
        add(store, "p", "s", "nothing relevant here", text)
        hits = store.search("p", query)
        assert [h.message.content for h in hits] == [text], query
        assert expected in hits[0].message.content.lower()
        assert store.tail("p", "s", limit=5)[-1].content == text  # nothing was dropped

    @pytest.mark.parametrize("query", ["", "   ", "%", "_", "*", '"', "()", "---", ":", "🎉"])
    def test_no_searchable_word_no_hit(self, store: Store, query: str) -> None:
        add(store, "p", "s", '% _ * " () --- : 🎉 and some words')
        assert store.search("p", query) == []

    def test_operator_words_alone_do_not_fail(self, store: Store) -> None:
        add(store, "p", "s", "near and or not")
        for query in ("AND", "OR", "NOT", "NEAR", "AND OR NOT"):
            assert all(h.message.scope == "p" for h in store.search("p", query))

    def test_unicode_words(self, store: Store) -> None:
        add(store, "p", "s", "Le café était fermé", "日本語のテスト")
        assert next(h.message.content for h in store.search("p", "café")) == "Le café était fermé"


class TestState:
    def test_missing_is_none(self, store: Store) -> None:
        assert store.load_state("p", "s", "compaction") is None

    def test_create_once(self, store: Store) -> None:
        first = store.save_state("p", "s", "compaction", {"summary": "v1"}, expected_version=0)
        assert first is not None and first.version == 1 and first.data == {"summary": "v1"}
        assert (
            store.save_state("p", "s", "compaction", {"summary": "x"}, expected_version=0) is None
        )
        loaded = store.load_state("p", "s", "compaction")
        assert loaded is not None and loaded.version == 1 and loaded.data == {"summary": "v1"}
        assert loaded.updated_at.utcoffset() == timedelta(0)

    def test_compare_and_set(self, store: Store) -> None:
        store.save_state("p", "s", "agent", {"n": 1}, expected_version=0)
        second = store.save_state("p", "s", "agent", {"n": 2}, expected_version=1)
        assert second is not None and second.version == 2
        stale = store.save_state("p", "s", "agent", {"n": 99}, expected_version=1)
        assert stale is None
        loaded = store.load_state("p", "s", "agent")
        assert loaded is not None and (loaded.version, loaded.data) == (2, {"n": 2})

    def test_wrong_version_on_missing_state_changes_nothing(self, store: Store) -> None:
        assert store.save_state("p", "s", "agent", {"n": 1}, expected_version=3) is None
        assert store.load_state("p", "s", "agent") is None

    def test_kinds_are_independent_and_data_round_trips(self, store: Store) -> None:
        data = {"facts": ["a", "ü 🎉"], "nested": {"x": [1, 2.5, None, True]}, "n": 0}
        store.save_state("p", "s", "agent", data, expected_version=0)
        store.save_state("p", "s", "tool_cache", {"k": "v"}, expected_version=0)
        agent = store.load_state("p", "s", "agent")
        cache = store.load_state("p", "s", "tool_cache")
        assert agent is not None and agent.data == data and agent.kind == "agent"
        assert cache is not None and cache.data == {"k": "v"}

    def test_racing_writers_have_one_winner(self, store: Store) -> None:
        store.ensure_session("p", "s")
        wins: list[int] = []
        barrier = threading.Barrier(4)

        def contender(n: int) -> None:
            barrier.wait()
            if store.save_state("p", "s", "compaction", {"by": n}, expected_version=0):
                wins.append(n)

        threads = [threading.Thread(target=contender, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(wins) == 1
        state = store.load_state("p", "s", "compaction")
        assert state is not None and state.version == 1 and state.data == {"by": wins[0]}


class TestMemories:
    def test_crud(self, store: Store) -> None:
        m = store.add_memory("app", "likes tea", source_session="s1", metadata={"k": 1})
        assert (m.scope, m.content, m.source_session, m.metadata) == (
            "app",
            "likes tea",
            "s1",
            {"k": 1},
        )
        assert store.get_memory("app", m.id) == m
        updated = store.update_memory("app", m.id, content="likes green tea")
        assert updated is not None and updated.content == "likes green tea"
        assert updated.metadata == {"k": 1} and updated.updated_at >= m.updated_at
        meta = store.update_memory("app", m.id, metadata={"k": 2})
        assert meta is not None and meta.metadata == {"k": 2} and meta.content == "likes green tea"
        assert store.delete_memory("app", m.id) is True
        assert store.delete_memory("app", m.id) is False
        assert store.get_memory("app", m.id) is None
        assert store.update_memory("app", m.id, content="x") is None

    def test_oldest_first(self, store: Store) -> None:
        store.add_memory("app", "newer", created_at=T0 + timedelta(days=1))
        store.add_memory("app", "older", created_at=T0)
        store.add_memory("app", "tie", created_at=T0)
        assert [m.content for m in store.list_memories("app")] == ["older", "tie", "newer"]
        assert store.list_memories("app")[0].created_at == T0

    def test_scope_isolation(self, store: Store) -> None:
        m = store.add_memory("app", "secret")
        assert store.get_memory("other", m.id) is None
        assert store.update_memory("other", m.id, content="hacked") is None
        assert store.delete_memory("other", m.id) is False
        assert store.list_memories("other") == []
        assert store.purge_memories("other") == 0
        assert [x.content for x in store.list_memories("app")] == ["secret"]

    def test_purge_keeps_audit(self, store: Store) -> None:
        store.add_memory("app", "a")
        store.add_memory("app", "b")
        store.add_audit("app", {"action": "add", "content": "a"})
        store.add_audit("app", {"action": "purge"})
        assert store.purge_memories("app") == 2
        assert store.list_memories("app") == []
        events = store.list_audit("app")
        assert [e["action"] for e in events] == ["purge", "add"]
        assert events[0]["id"] != events[1]["id"]
        for event in events:
            at = datetime.fromisoformat(event["at"])
            assert at.utcoffset() == timedelta(0)
        assert store.list_audit("other") == []
        assert len(store.list_audit("app", limit=1)) == 1

    def test_redact_audit_erases_the_text_of_events_about_memories_not_kept(
        self, store: Store
    ) -> None:
        store.add_audit("app", {"event": "create", "memory": 1, "content": "a secret"})
        store.add_audit("app", {"event": "create", "memory": 2, "content": "kept"})
        store.add_audit(
            "app",
            {"event": "compaction", "target": 2, "new_memory": 1, "new_content": "kept+secret"},
        )
        store.add_audit(
            "app", {"event": "compaction", "target": 1, "reason": "the secret", "error": "x"}
        )
        store.add_audit("app", {"event": "purge", "deleted": 3})
        store.add_audit("other", {"event": "create", "memory": 1, "content": "a secret"})
        before = {e["id"]: e["at"] for e in store.list_audit("app")}
        assert store.redact_audit("app", {2}) == 2
        assert store.redact_audit("app", {2}) == 0  # already done
        events = list(reversed(store.list_audit("app")))
        assert "secret" not in str([e for e in events if e.get("target") != 2])
        assert events[0] == {
            "event": "create",
            "memory": 1,
            "content_sha256": hashlib.sha256(b"a secret").hexdigest(),
            "redacted": True,
            "id": events[0]["id"],
            "at": events[0]["at"],
        }
        assert events[1]["content"] == "kept" and events[2]["new_content"] == "kept+secret"
        assert set(events[3]) == {"event", "target", "reason_sha256", "error_sha256",
                                  "redacted", "id", "at"}  # fmt: skip
        assert events[4] == {"event": "purge", "deleted": 3, "id": events[4]["id"],
                             "at": events[4]["at"]}  # fmt: skip
        assert {e["id"]: e["at"] for e in events} == before  # ids and times stay
        assert store.list_audit("other")[0]["content"] == "a secret"


class TestUsage:
    def test_totals(self, store: Store) -> None:
        def use(purpose: str, i: int, o: int, cost: float | None) -> UsageRecord:
            return UsageRecord("gpt-4o-mini", purpose, i, o, cost, T0)

        store.record_usage("p", "s", use("summary", 100, 10, 0.5))
        store.record_usage("p", "s", use("summary", 50, 5, None))
        store.record_usage("p", None, use("memory", 7, 3, 0.25))
        store.record_usage("q", "s", use("summary", 1000, 1000, 9.0))
        totals = store.usage_totals("p")
        assert (totals["calls"], totals["input_tokens"], totals["output_tokens"]) == (3, 157, 18)
        assert totals["cost_usd"] == pytest.approx(0.75)
        assert totals["by_purpose"]["summary"]["calls"] == 2
        assert totals["by_purpose"]["memory"]["input_tokens"] == 7
        session = store.usage_totals("p", "s")
        assert (session["calls"], session["input_tokens"]) == (2, 150)
        empty = store.usage_totals("nobody")
        assert (empty["calls"], empty["input_tokens"], empty["cost_usd"]) == (0, 0, 0)


class TestDeleteSession:
    def test_purges_session_keeps_memories(self, store: Store) -> None:
        (m,) = add(store, "p", "s", "forget this kumquat")
        add(store, "p", "keep", "keep this kumquat")
        store.save_state("p", "s", "compaction", {"x": 1}, expected_version=0)
        memory = store.add_memory("p", "remember me", source_session="s")
        assert store.delete_session("p", "s") is True
        assert store.get_session("p", "s") is None
        assert store.tail("p", "s", limit=10) == []
        assert store.get_message("p", m.id) is None
        assert store.load_state("p", "s", "compaction") is None
        assert [h.message.session for h in store.search("p", "kumquat")] == ["keep"]
        assert store.list_memories("p") == [memory]
        assert store.delete_session("p", "s") is False

    def test_recreated_session_starts_empty_with_new_ids(self, store: Store) -> None:
        (old,) = add(store, "p", "s", "old")
        store.delete_session("p", "s")
        (fresh,) = add(store, "p", "s", "fresh")
        assert fresh.id > old.id
        assert [x.content for x in store.tail("p", "s", limit=10)] == ["fresh"]
        info = store.get_session("p", "s")
        assert info is not None and info.message_count == 1

    def test_missing_is_false(self, store: Store) -> None:
        assert store.delete_session("p", "never") is False


class TestRoundTrip:
    def test_all_fields(self, store: Store) -> None:
        tool_calls = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "search_history", "arguments": '{"query": "prix"}'},
            }
        ]
        metadata = {"source": "telegram", "nested": {"list": [1, 2.5, None, True]}, "ü": "✓"}
        at = T0.replace(microsecond=123456)
        batch = [
            NewMessage("assistant", "", at, tool_calls=tool_calls, metadata=metadata),
            NewMessage("tool", '{"hits": []}', at, name="search_history", tool_call_id="call_1"),
        ]
        stored = store.append("p", "s", batch, [12, 7])
        loaded = store.tail("p", "s", limit=10)
        assert loaded == stored
        call, result = loaded
        assert call.tool_calls == tool_calls and call.metadata == metadata and call.content == ""
        assert (result.name, result.tool_call_id, result.tokens) == ("search_history", "call_1", 7)
        assert call.created_at == at and call.tokens == 12
        assert result.metadata == {} and result.tool_calls is None
        assert store.get_message("p", call.id) == call

    def test_image_parts_round_trip_whole(self, store: Store, store_url: str) -> None:
        url = png_url(3, 2)
        parts = [{"type": "text", "text": "what is this?"}, image_part(url, "low")]
        plain = new("no parts here")
        (m, text) = store.append("p", "s", [new("what is this?", parts=parts), plain], [99, 4])
        assert m.parts == parts and text.parts is None
        reads = [
            store.tail("p", "s", limit=10)[0],
            store.page("p", "s", limit=10)[0],
            store.get_message("p", m.id),
            next(h.message for h in store.search("p", "what") if h.message.id == m.id),
        ]
        for got in reads:
            assert got is not None and got == m
            assert got.parts is not None and got.parts[1]["image_url"]["url"] == url
            assert got.to_openai()["content"] == parts
        store.close()
        if ":memory:" not in store_url:
            reopened = open_store(store_url)
            try:
                assert reopened.get_message("p", m.id) == m
            finally:
                reopened.close()

    def test_unicode_emoji_and_long_content(self, store: Store) -> None:
        texts = [
            "héllo wörld 🎉 日本語 العربية 👩‍👩‍👧 \u200b zero-width",
            "line1\nline2\ttab \\ backslash 'single' \"double\"",
            "long " * 40_000,
        ]
        stored = add(store, "p", "s", *texts)
        loaded = store.tail("p", "s", limit=10)
        assert [m.content for m in loaded] == texts
        assert [m.id for m in loaded] == ids(stored)

    def test_metadata_is_a_private_copy(self, store: Store) -> None:
        meta = {"k": "v"}
        (m,) = store.append("p", "s", [new("x", metadata=meta)], [1])
        meta["k"] = "changed"
        assert m.metadata == {"k": "v"}
        assert store.tail("p", "s", limit=1)[0].metadata == {"k": "v"}

    @settings(
        max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(
        content=st.text(
            alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
            max_size=300,
        )
    )
    def test_any_text_round_trips(self, store: Store, content: str) -> None:
        (m,) = store.append("p", "prop", [new(content)], [1])
        got = store.get_message("p", m.id)
        assert got is not None and got.content == content


class TestPersistence:
    def test_reopen_sees_everything(self, store: Store, store_url: str) -> None:
        if ":memory:" in store_url:
            pytest.skip("an in-memory database does not outlive its store")
        stored = add(store, "p", "s", "persist me", "and me")
        store.save_state("p", "s", "compaction", {"v": 1}, expected_version=0)
        memory = store.add_memory("p", "durable")
        store.close()
        store.close()  # closing twice is allowed
        reopened = open_store(store_url)
        try:
            assert reopened.tail("p", "s", limit=10) == stored
            state = reopened.load_state("p", "s", "compaction")
            assert state is not None and state.data == {"v": 1}
            assert reopened.list_memories("p") == [memory]
            assert next(h.message.content for h in reopened.search("p", "persist")) == "persist me"
            (later,) = add(reopened, "p", "s", "after reopen")
            assert later.id > stored[-1].id
        finally:
            reopened.close()
