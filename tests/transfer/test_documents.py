"""Moving data: export/import documents; round trip sqlite -> jsondir -> postgres -> sqlite."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from engram.cli.migrate import migrate
from engram.compaction.state import parse_state
from engram.errors import ConfigError, ImportFormatError, SessionNotFound
from engram.models import NewMessage
from engram.store import Store, open_store
from engram.transfer.documents import copy_store, copy_store_url, export_session, import_document

try:
    from tests.pg import fresh_postgres_url
except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
    from pg import fresh_postgres_url  # type: ignore[import-not-found,no-redef]

T0 = datetime(2024, 2, 23, 2, 12, 1, 123456, tzinfo=UTC)

TOOL_CALLS = [
    {
        "id": "call_1",
        "type": "function",
        "function": {"name": "file_write", "arguments": '{"path": "a.txt", "z": 1, "a": 2}'},
    }
]


def fill(store: Store) -> None:
    """Two scopes, several sessions, every kind of data the store keeps."""
    store.ensure_session("phoenix", "chat-1", policy={"preset": "lean", "budget": 8000})
    store.append(
        "phoenix",
        "chat-1",
        [
            NewMessage("system", "You are helpful.", T0),
            NewMessage("user", "Créé un fichier 🙂", T0 + timedelta(seconds=1), name="alice_1"),
            NewMessage("assistant", "", T0 + timedelta(seconds=2), tool_calls=TOOL_CALLS),
            NewMessage(
                "tool",
                '{"success": true}',
                T0 + timedelta(seconds=3),
                tool_call_id="call_1",
                metadata={"tool": "file_write", "nested": {"k": [1, 2.5, None]}},
            ),
            NewMessage("assistant", "Done.\nLine two\ttab", T0 + timedelta(seconds=4)),
        ],
        [9, 12, 20, 8, 7],
    )
    store.append(
        "phoenix", "user:agent:123", [NewMessage("user", "hi", T0 + timedelta(days=1))], [4]
    )
    store.save_state(
        "phoenix", "chat-1", "compaction", {"summary": "S", "watermark": 3}, expected_version=0
    )
    store.save_state(
        "phoenix",
        "chat-1",
        "agent_state",
        {"facts": ["Rust 1.75"], "active_tasks": []},
        expected_version=0,
    )
    store.add_memory(
        "phoenix", "prefers tea", source_session="chat-1", metadata={"w": 1}, created_at=T0
    )
    store.add_memory("phoenix", "lives in Lyon", created_at=T0 + timedelta(hours=1))
    store.add_audit("phoenix", {"action": "add", "content": "prefers tea", "at": T0.isoformat()})
    store.add_audit("phoenix", {"action": "add", "content": "lives in Lyon"})
    store.append("other/app", "../x", [NewMessage("user", "isolated", T0)], [3])


def snapshot(store: Store) -> dict[str, Any]:
    """Everything comparable across backends (ids and store-assigned times left out)."""
    out: dict[str, Any] = {}
    for scope in store.list_scopes():
        sessions = {}
        for info in store.list_sessions(scope, limit=1000):
            messages = [
                (
                    m.role,
                    m.content,
                    m.name,
                    m.tool_calls,
                    m.tool_call_id,
                    m.created_at,
                    m.tokens,
                    m.metadata,
                )
                for m in store.page(scope, info.id, limit=1000)
            ]
            states = {}
            for kind in ("compaction", "agent_state"):
                state = store.load_state(scope, info.id, kind)
                if state is not None:
                    states[kind] = state.data
            sessions[info.id] = {
                "policy": info.policy,
                "messages": messages,
                "states": states,
                "totals": (
                    info.message_count,
                    info.token_count,
                    info.first_message_at,
                    info.last_message_at,
                ),
            }
        memories = [
            (m.content, m.source_session, m.metadata, m.created_at)
            for m in store.list_memories(scope)
        ]
        audit = [
            {k: v for k, v in e.items() if k not in ("id", "at")} for e in store.list_audit(scope)
        ]
        out[scope] = {"sessions": sessions, "memories": memories, "audit": audit}
    return out


@pytest.mark.postgres
def test_round_trip_sqlite_jsondir_postgres_sqlite(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    urls = [
        f"sqlite:///{tmp_path}/a.db",
        f"jsondir://{tmp_path}/ctx",
        fresh_postgres_url(request),
        f"sqlite:///{tmp_path}/b.db",
    ]
    stores = [open_store(u) for u in urls]
    try:
        fill(stores[0])
        expected = snapshot(stores[0])
        assert set(expected) == {"phoenix", "other/app"}
        for src, dst in itertools.pairwise(stores):
            report = copy_store(src, dst)
            assert report.messages == 7 and report.memories == 2 and report.audit_events == 2
            assert snapshot(dst) == expected
        # Audit keeps its times, and its order (newest first).
        first, last = stores[0].list_audit("phoenix"), stores[-1].list_audit("phoenix")
        assert [e["at"] for e in last][-1] == [e["at"] for e in first][-1]
        assert [e["content"] for e in last] == ["lives in Lyon", "prefers tea"]
    finally:
        for s in stores:
            s.close()


class TestDocuments:
    def test_export_then_import_elsewhere(self, tmp_path: Path) -> None:
        src = open_store(f"sqlite:///{tmp_path}/a.db")
        dst = open_store(f"jsondir://{tmp_path}/ctx")
        try:
            fill(src)
            doc = export_session(src, "phoenix", "chat-1")
            json.dumps(doc)  # plain JSON
            assert doc["session_id"] == "chat-1" and doc["facts"] == ["Rust 1.75"]
            info = import_document(dst, doc)
            assert info.message_count == 5 and info.policy == {"preset": "lean", "budget": 8000}
            again = export_session(dst, "phoenix", "chat-1")

            def strip(d: dict[str, Any]) -> list[dict[str, Any]]:
                return [{k: v for k, v in e.items() if k != "id"} for e in d["recent_history"]]

            assert strip(again) == strip(doc)
            with pytest.raises(ConfigError, match="already has 5 messages"):
                import_document(dst, doc)
        finally:
            src.close()
            dst.close()

    def test_seed_002_file_imports(self, tmp_path: Path) -> None:
        seed_doc = {
            "session_id": "user:agent:timestamp",
            "system_state": {"last_workspace": "/home/user/project", "preferences": {}},
            "facts": ["User prefers verbose output"],
            "recent_history": [
                {
                    "timestamp": 1708654321,
                    "role": "user",
                    "content": "Create a new file",
                    "token_count": 5,
                },
                {
                    "timestamp": 1708654322,
                    "role": "assistant",
                    "content": "I'll create the file for you",
                },
            ],
            "long_term_summary": "User requested file creation.",
        }
        store = open_store(f"sqlite:///{tmp_path}/a.db")
        try:
            info = import_document(store, seed_doc)
            assert info.scope == "default" and info.message_count == 2
            rows = store.page("default", "user:agent:timestamp")
            assert rows[0].tokens == 5 and rows[1].tokens > 0  # missing count measured exactly
            assert rows[0].created_at == datetime.fromtimestamp(1708654321, tz=UTC)
            agent = store.load_state("default", "user:agent:timestamp", "agent_state")
            assert agent is not None and agent.data["facts"] == ["User prefers verbose output"]
            compaction = store.load_state("default", "user:agent:timestamp", "compaction")
            assert compaction is not None and compaction.data == {
                "summary": "User requested file creation.",
                "summary_version": 1,
                "watermark": 0,
                "origin": "imported",
            }
        finally:
            store.close()

    def test_malformed_document_writes_nothing(self, tmp_path: Path) -> None:
        store = open_store(f"sqlite:///{tmp_path}/a.db")
        try:
            bad = {
                "session_id": "s",
                "recent_history": [{"role": "user", "content": "ok"}, {"role": "user"}],
            }
            with pytest.raises(ImportFormatError):
                import_document(store, bad)
            assert store.get_session("default", "s") is None
            with pytest.raises(SessionNotFound):
                export_session(store, "default", "s")
        finally:
            store.close()


def test_migrate_command(tmp_path: Path) -> None:
    src_url, dst_url = f"sqlite:///{tmp_path}/a.db", f"jsondir://{tmp_path}/ctx"
    src = open_store(src_url)
    try:
        fill(src)
        expected = snapshot(src)
    finally:
        src.close()
    result = CliRunner().invoke(migrate, ["--from", src_url, "--to", dst_url, "--progress"])
    assert result.exit_code == 0, result.output
    assert "Copied 2 scope(s), 3 session(s), 7 message(s)" in result.output
    dst = open_store(dst_url)
    try:
        assert snapshot(dst) == expected
    finally:
        dst.close()
    same = CliRunner().invoke(migrate, ["--from", src_url, "--to", src_url])
    assert same.exit_code == 2


def test_copy_store_url_names_both_stores_and_refuses_one_url(tmp_path: Path) -> None:
    src_url, dst_url = f"sqlite:///{tmp_path}/a.db", f"memory://{tmp_path}/copy"
    src = open_store(src_url)
    try:
        fill(src)
    finally:
        src.close()
    report = copy_store_url(src_url, dst_url)
    assert (report.source, report.target) == (src_url, dst_url)
    assert (report.scopes, report.sessions, report.messages) == (2, 3, 7)
    with pytest.raises(ConfigError, match="same URL"):
        copy_store_url(src_url, src_url)


class TestSeed002Documents:
    def test_summary_and_system_state_survive_import_and_export(self, tmp_path: Path) -> None:
        doc = {
            "session_id": "user:agent:1",
            "system_state": {"last_workspace": "/home/u/p", "preferences": {"verbose": True}},
            "facts": ["User prefers verbose output"],
            "recent_history": [
                {"timestamp": 1708654321, "role": "user", "content": "Create a file"},
            ],
            "long_term_summary": "User requested file creation earlier.",
            "last_known_environment": {"workspace": "/home/u/p", "last_update": 1708654321},
        }
        store = open_store(f"sqlite:///{tmp_path}/a.db")
        try:
            import_document(store, doc)
            state = store.load_state("default", "user:agent:1", "compaction")
            assert state is not None
            parsed = parse_state(state.data)
            assert parsed.reset_reason is None  # imported summary is a valid state
            assert parsed.summary == "User requested file creation earlier."
            again = export_session(store, "default", "user:agent:1")
            assert again["long_term_summary"] == "User requested file creation earlier."
            assert again["system_state"] == {
                "last_workspace": "/home/u/p",
                "preferences": {"verbose": True},
            }
        finally:
            store.close()
