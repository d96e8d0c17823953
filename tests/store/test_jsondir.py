"""jsondir specifics: safe file names, atomic documents, corruption, seed 002 format, processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.errors import CorruptedData
from engram.models import NewMessage
from engram.store import open_store
from engram.store.jsondir.backend import JsonDirStore
from engram.store.jsondir.filenames import MAX_NAME_CHARS, decode_id, encode_id, is_hashed

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
SAFE = set("abcdefghijklmnopqrstuvwxyz0123456789-_.%~ABCDEF")


def msg(content: str, role: str = "user") -> NewMessage:
    return NewMessage(role=role, content=content, created_at=T0)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "ctx"


@pytest.fixture
def store(root: Path) -> JsonDirStore:
    opened = open_store(f"jsondir://{root}")
    assert isinstance(opened, JsonDirStore)
    return opened


def session_files(root: Path, scope: str = "p") -> list[str]:
    return sorted(os.listdir(root / encode_id(scope) / "sessions"))


class TestFileNames:
    @given(st.text(max_size=300))
    def test_round_trip_and_safe(self, value: str) -> None:
        name = encode_id(value)
        assert set(name) <= SAFE
        assert not name.startswith(".") and len(name) <= MAX_NAME_CHARS
        if not is_hashed(name):
            assert decode_id(name) == value

    @given(st.text(max_size=200), st.text(max_size=200))
    def test_distinct_even_on_case_insensitive_disks(self, a: str, b: str) -> None:
        if a != b:
            assert encode_id(a).casefold() != encode_id(b).casefold()

    @pytest.mark.parametrize(
        "value", ["../x", "a/b", ":", "..", ".", "", "CON", "nul.txt", "Ab", "ab", "é", "🙂"]
    )
    def test_tricky_ids(self, value: str) -> None:
        name = encode_id(value)
        assert "/" not in name and name not in (".", "..")
        assert name.split(".")[0].lower() not in ("con", "nul")
        assert decode_id(name) == value

    def test_long_ids_get_a_hash_suffix(self) -> None:
        a, b = "x" * 256, "x" * 255 + "y"
        assert is_hashed(encode_id(a)) and encode_id(a) != encode_id(b)


class TestDocuments:
    def test_ids_map_to_files_inside_the_root(self, store: JsonDirStore, root: Path) -> None:
        for sid in ["../escape", "a/b", "user:agent:1", "Chat", "chat", "x" * 256, "日本"]:
            store.append("p", sid, [msg(f"in {sid[:10]}")], [1])
        assert not (root.parent / "escape.json").exists()
        assert len(session_files(root)) == 7
        for path in (root / "p" / "sessions").iterdir():
            assert path.resolve().parent == (root / "p" / "sessions").resolve()
        listed = {i.id for i in store.list_sessions("p")}
        assert listed == {"../escape", "a/b", "user:agent:1", "Chat", "chat", "x" * 256, "日本"}

    def test_document_has_seed_002_fields(self, store: JsonDirStore, root: Path) -> None:
        store.append(
            "p", "user:agent:1", [msg("Create a new file"), msg("ok", "assistant")], [5, 3]
        )
        store.save_state(
            "p",
            "user:agent:1",
            "agent_state",
            {"facts": ["User prefers verbose output"]},
            expected_version=0,
        )
        store.save_state(
            "p", "user:agent:1", "compaction", {"summary": "Made a file."}, expected_version=0
        )
        doc = json.loads((root / "p" / "sessions" / "user%3Aagent%3A1.json").read_text())
        assert doc["session_id"] == "user:agent:1"
        assert doc["facts"] == ["User prefers verbose output"]
        assert doc["long_term_summary"] == "Made a file."
        for key in (
            "system_state",
            "active_tasks",
            "tool_stats",
            "last_known_environment",
            "token_usage",
        ):
            assert key in doc
        first = doc["recent_history"][0]
        assert first["role"] == "user" and first["token_count"] == 5
        assert first["timestamp"] == int(T0.timestamp()) and isinstance(first["id"], int)

    def test_load_document_creates_when_absent(self, store: JsonDirStore) -> None:
        assert store.get_session("p", "new") is None
        doc = store.load_document("p", "new")
        assert doc["session_id"] == "new" and doc["recent_history"] == []
        assert store.get_session("p", "new") is not None

    def test_writes_leave_no_temp_files(self, store: JsonDirStore, root: Path) -> None:
        for i in range(5):
            store.append("p", "s", [msg(f"m{i}")], [1])
        store.add_memory("p", "likes tea")
        leftovers = [p for p in root.rglob("*") if p.name.endswith(".tmp")]
        assert leftovers == []

    def test_delete_and_list(self, store: JsonDirStore) -> None:
        store.append("p", "a", [msg("x")], [1])
        store.append("q", "b", [msg("y")], [1])
        assert store.list_scopes() == ["p", "q"]
        assert store.delete_session("p", "a") is True
        assert store.delete_session("p", "a") is False
        assert [i.id for i in store.list_sessions()] == ["b"]


class TestCorruption:
    def test_corrupt_file_is_set_aside_not_overwritten(
        self, store: JsonDirStore, root: Path
    ) -> None:
        store.append("p", "s", [msg("precious")], [1])
        path = root / "p" / "sessions" / "s.json"
        path.write_text('{"session_id": "s", "recent_hist')
        with pytest.raises(CorruptedData, match="moved aside"):
            store.get_session("p", "s")
        aside = [n for n in session_files(root) if n.startswith("s.json.corrupt-")]
        assert len(aside) == 1
        assert (
            root / "p" / "sessions" / aside[0]
        ).read_text() == '{"session_id": "s", "recent_hist'
        # The session starts afresh; the bad bytes stay where a person can look at them.
        store.append("p", "s", [msg("new")], [1])
        assert [m.content for m in store.tail("p", "s", limit=5)] == ["new"]

    def test_wrong_shape_is_corrupt_too(self, store: JsonDirStore, root: Path) -> None:
        store.append("p", "s", [msg("x")], [1])
        path = root / "p" / "sessions" / "s.json"
        doc = json.loads(path.read_text())
        doc["recent_history"][0]["role"] = 42
        path.write_text(json.dumps(doc))
        with pytest.raises(CorruptedData):
            store.tail("p", "s", limit=5)
        assert not path.exists()

    def test_corrupt_memories_file(self, store: JsonDirStore, root: Path) -> None:
        store.add_memory("p", "x")
        (root / "p" / "memories.json").write_text("[1, 2")
        with pytest.raises(CorruptedData):
            store.list_memories("p")
        assert store.list_memories("p") == []


class TestSearch:
    def test_stems_and_markers(self, store: JsonDirStore) -> None:
        store.append(
            "p", "s", [msg("The cats are running"), msg("a dog"), msg("one cat")], [1, 1, 1]
        )
        hits = store.search("p", "cat runs")
        # "a dog" follows a match: found by its neighbour context, ranked below that match.
        assert hits[0].message.content == "The cats are running"
        assert {h.message.content for h in hits} == {"The cats are running", "one cat", "a dog"}
        assert hits[0].snippet == "The [cats] are [running]"

    def test_index_follows_writes_of_another_store(self, store: JsonDirStore, root: Path) -> None:
        store.append("p", "s", [msg("first walrus")], [1])
        assert len(store.search("p", "walrus")) == 1  # the index is built
        other = JsonDirStore(root)  # another process, as far as the files can tell
        other.append("p", "s", [msg("second walrus")], [1])
        store.append("p", "s", [msg("third walrus")], [1])
        found = {h.message.content for h in store.search("p", "walrus")}
        assert found == {"first walrus", "second walrus", "third walrus"}
        assert store.delete_session("p", "s") and store.search("p", "walrus") == []

    def test_search_does_not_reparse_unchanged_documents(self, store: JsonDirStore) -> None:
        store.append("p", "s", [msg(f"note {i} about otters") for i in range(50)], [1] * 50)
        store.search("p", "otters")
        calls = []
        original = store._messages

        def counting(scope: str, session: str) -> Any:
            calls.append(session)
            return original(scope, session)

        store._messages = counting  # type: ignore[method-assign]
        store.append("p", "s", [msg("one more otter")], [1])
        assert store.search("p", "otter")[0].message.content == "one more otter"
        assert calls == [session for session in calls if session != "s"]  # s was not re-read


WORKER = r"""
import sys
from datetime import UTC, datetime
from engram.models import NewMessage
from engram.store import open_store
store = open_store(sys.argv[1])
for i in range(int(sys.argv[3])):
    store.append("p", "shared", [NewMessage("user", f"{sys.argv[2]}-{i}", datetime.now(UTC))], [1])
store.close()
"""


def test_two_processes_append_to_one_session(root: Path) -> None:
    url = f"jsondir://{root}"
    open_store(url).close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, name, "25"], stderr=subprocess.PIPE, text=True
        )
        for name in ("a", "b")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    store = open_store(url)
    rows = store.page("p", "shared", limit=100)
    assert len(rows) == 50 and len({m.id for m in rows}) == 50
    assert [m.id for m in rows] == sorted(m.id for m in rows)
    for name in ("a", "b"):
        assert [m.content for m in rows if m.content.startswith(name)] == [
            f"{name}-{i}" for i in range(25)
        ]
    info = store.get_session("p", "shared")
    assert info is not None and info.message_count == 50


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["s1", "S1", "../s", "a/b"]), min_size=1, max_size=8))
def test_ids_unique_and_increasing_across_sessions(
    tmp_path_factory: pytest.TempPathFactory, order: list[str]
) -> None:
    store = open_store(f"jsondir://{tmp_path_factory.mktemp('ids')}")
    seen = [store.append("p", sid, [msg(sid)], [1])[0].id for sid in order]
    assert seen == sorted(set(seen))


def test_returned_values_are_private_copies(store: JsonDirStore) -> None:
    # Documents are cached between reads; mutating a result must not leak into the store.
    store.append("p", "s", [NewMessage("user", "x", T0, metadata={"k": [1]})], [1])
    store.save_state("p", "s", "compaction", {"facts": ["a"]}, expected_version=0)
    state = store.load_state("p", "s", "compaction")
    assert state is not None
    state.data["facts"].append("leaked")
    store.tail("p", "s", limit=1)[0].metadata["k"].append(2)
    again = store.load_state("p", "s", "compaction")
    assert again is not None and again.data == {"facts": ["a"]}
    assert store.tail("p", "s", limit=1)[0].metadata == {"k": [1]}
