"""EngramStore under the real LangGraph: its items are Engram memories.

LangGraph ships no conformance suite for stores (langgraph-checkpoint-conformance
covers checkpoint savers only), so the store is checked against LangGraph's own
reference, ``InMemoryStore``: the same random operations, the same answers.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph", reason="the 'langgraph' extra is not installed")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError
from langgraph.store.memory import InMemoryStore

import engram
from engram.engine import Engram
from engram.errors import InvalidQuery
from engram.integrations.langgraph import EngramStore
from engram.memories.keyed import KeyedMemories

NAMESPACES = [("users", "a"), ("users", "b"), ("teams", "x", "y")]
KEYS = ["k1", "k2", "k3"]
# "n" always there: the reference raises on a range filter over a missing field.
VALUES = st.fixed_dictionaries(
    {
        "content": st.sampled_from(["likes tea", "prefers dark mode", "works on billing"]),
        "n": st.integers(0, 5),
    },
    optional={"tag": st.sampled_from(["red", "blue"])},
)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS), VALUES),
        st.tuples(st.just("delete"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS)),
    ),
    max_size=12,
)
FILTERS = [None, {"tag": "red"}, {"n": {"$gte": 2}}, {"n": {"$lt": 3}, "tag": {"$ne": "blue"}}]


def view(store: BaseStore) -> dict[str, Any]:
    """Everything a caller can read, in a form that does not depend on the store."""

    # InMemoryStore lists a namespace once touched, even emptied or only read: only
    # namespaces holding items are compared (EngramStore lists no other: test_async_twins).
    def listed(**how: Any) -> list[tuple[str, ...]]:
        return [ns for ns in store.list_namespaces(**how) if store.search(ns, limit=1)]

    out: dict[str, Any] = {
        "namespaces": listed(),
        "depth1": listed(max_depth=1),
        "suffix": listed(suffix=("a",)),
        "wild": listed(prefix=("*", "x")),
    }
    for ns in NAMESPACES:
        for key in KEYS:
            item = store.get(ns, key)
            out[f"get {ns} {key}"] = (
                None if item is None else (item.namespace, item.key, item.value)
            )
    for prefix in [(), ("users",), ("teams", "x")]:
        for wanted in FILTERS:
            found = store.search(prefix, filter=wanted, limit=100)
            out[f"search {prefix} {wanted}"] = sorted(
                (i.namespace, i.key, repr(i.value)) for i in found
            )
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_answers_like_langgraphs_reference_store(ops: list[tuple[Any, ...]]) -> None:
    reference = InMemoryStore()
    with engram.open(f"memory://{uuid.uuid4()}", llm=None) as mem:
        ours = EngramStore(mem)
        for op in ops:
            for store in (reference, ours):
                if op[0] == "put":
                    store.put(op[1], op[2], op[3])
                else:
                    store.delete(op[1], op[2])
        assert view(ours) == view(reference)


class TestStore:
    def test_items_are_the_scopes_memories(self, mem: Engram) -> None:
        store = EngramStore(mem)
        store.put(("users", "42"), "theme", {"content": "Prefers a dark theme.", "mode": "dark"})
        (memory,) = mem.memories("users.42").list()
        assert memory.content == "Prefers a dark theme."
        assert memory.metadata["value"] == {"content": "Prefers a dark theme.", "mode": "dark"}
        session = mem.session("chat", scope="users.42")
        session.add("user", "Hello")
        sent = " ".join(str(m["content"]) for m in session.context().messages)
        assert "Prefers a dark theme." in sent
        item = store.get(("users", "42"), "theme")
        assert item is not None and item.value["mode"] == "dark"
        assert item.created_at.tzinfo is not None

    def test_a_memory_engram_wrote_is_an_item_keyed_by_its_id(self, mem: Engram) -> None:
        created = mem.memories("users.42").create("The user is called Dana.").record()
        store = EngramStore(mem)
        item = store.get(("users", "42"), str(created.id))
        assert item is not None and item.value == {"content": "The user is called Dana."}
        store.put(("users", "42"), str(created.id), {"content": "The user is called Dana Li."})
        assert [m.content for m in mem.memories("users.42").list()] == [
            "The user is called Dana Li."
        ]

    def test_search_with_a_query_is_engrams_ranked_search(self, mem: Engram) -> None:
        store = EngramStore(mem)
        store.put(("u", "1"), "a", {"content": "Meetings only after 2pm.", "kind": "pref"})
        store.put(("u", "1"), "b", {"content": "The invoice number is INV-4471."})
        store.put(("u", "2"), "c", {"content": "Weekly meeting on Mondays.", "kind": "pref"})
        found = store.search(("u",), query="meeting")
        assert [i.key for i in found] == ["c", "a"]  # equal scores: newest first
        assert all(i.score is not None and i.score > 0 for i in found)
        assert [i.key for i in store.search(("u",), query="invoice", filter={"kind": "pref"})] == []
        assert [i.key for i in store.search(("u", "2"), query="meeting")] == ["c"]

    def test_a_new_key_past_the_cap_is_refused_and_nothing_is_lost(self, open_engram: Any) -> None:
        mem = open_engram(memory_cap=2)
        store = EngramStore(mem)
        store.put(("u",), "a", {"content": "one"})
        store.put(("u",), "b", {"content": "two"})
        with pytest.raises(InvalidQuery, match="memory_cap"):
            store.put(("u",), "c", {"content": "three"})
        store.put(("u",), "a", {"content": "one, updated"})  # an existing key still updates
        assert sorted(i.key for i in store.search(("u",))) == ["a", "b"]

    def test_bad_namespaces_and_values_are_refused(self, mem: Engram) -> None:
        store = EngramStore(mem)
        with pytest.raises(InvalidNamespaceError):
            store.put(("a.b",), "k", {"content": "x"})
        with pytest.raises(InvalidQuery, match="metadata"):
            store.put(("a",), "k", {"blob": "x" * 5000})
        assert mem.memories("a").list() == []

    @pytest.mark.slow
    def test_ttl_expires_and_is_swept(self, mem: Engram) -> None:
        store = EngramStore(mem)
        store.put(("t",), "short", {"content": "gone soon"}, ttl=0.05)  # 3 s, even under load
        store.put(("t",), "long", {"content": "stays"})
        assert store.get(("t",), "short") is not None
        time.sleep(3.5)
        assert store.get(("t",), "short") is None
        assert [i.key for i in store.search(("t",))] == ["long"]
        assert [m.content for m in mem.memories("t").list()] == ["stays"]
        events = [e["event"] for e in mem.memories("t").audit()]
        assert "expired" in events

    def test_default_ttl_and_sweep(self, mem: Engram) -> None:
        store = EngramStore(mem, ttl={"default_ttl": 0.002})
        store.put(("t",), "a", {"content": "gone soon"})
        time.sleep(0.3)
        assert store.sweep_ttl() == 1
        assert mem.memories("t").list() == []

    def test_async_twins(self, mem: Engram) -> None:
        store = EngramStore(mem)

        async def main() -> list[str]:
            await store.aput(("a",), "k", {"content": "async value"})
            item = await store.aget(("a",), "k")
            assert item is not None and item.value == {"content": "async value"}
            found = await store.asearch(("a",), query="async")
            await store.adelete(("a",), "k")
            assert await store.aget(("a",), "k") is None
            assert await store.alist_namespaces() == []
            return [i.key for i in found]

        assert asyncio.run(main()) == ["k"]


class TestKeyedRefresh:
    def test_a_refreshed_read_pushes_the_expiry_back(self, mem: Engram) -> None:
        keyed = KeyedMemories(mem.memories("s"))
        start = datetime(2026, 1, 1, tzinfo=UTC)
        keyed.put("k", "value", ttl=10, now=start)
        later = start + timedelta(minutes=8)
        assert keyed.get("k", refresh=True, now=later) is not None
        assert keyed.get("k", now=later + timedelta(minutes=9)) is not None  # refreshed at 8
        assert keyed.get("k", now=later + timedelta(minutes=11)) is None
        assert mem.memories("s").list() == []


class Notes(TypedDict):
    user: str
    text: str
    answer: str


def graph(store: BaseStore) -> Any:
    """A graph whose one node remembers what each user said, across runs."""

    def remember(state: Notes, *, store: BaseStore) -> dict[str, str]:
        namespace = ("notes", state["user"])
        seen = [i.value["content"] for i in store.search(namespace)]
        store.put(namespace, f"n{len(seen)}", {"content": state["text"]})
        return {"answer": " | ".join([*seen, state["text"]])}

    builder = StateGraph(Notes)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    return builder.compile(store=store)


class TestGraph:
    def test_a_node_reads_and_writes_the_store_across_runs(self, mem: Engram) -> None:
        app = graph(EngramStore(mem))
        app.invoke({"user": "dana", "text": "I like tea.", "answer": ""})
        out = app.invoke({"user": "dana", "text": "I work on billing.", "answer": ""})
        assert out["answer"] == "I like tea. | I work on billing."
        other = app.invoke({"user": "lee", "text": "Hi.", "answer": ""})
        assert other["answer"] == "Hi."  # another namespace, another scope
        assert [m.content for m in mem.memories("notes.dana").list()] == [
            "I like tea.",
            "I work on billing.",
        ]

    def test_the_graph_runs_async_too(self, mem: Engram) -> None:
        app = graph(EngramStore(mem))

        async def main() -> str:
            await app.ainvoke({"user": "dana", "text": "First.", "answer": ""})
            out = await app.ainvoke({"user": "dana", "text": "Second.", "answer": ""})
            return str(out["answer"])

        assert asyncio.run(main()) == "First. | Second."
