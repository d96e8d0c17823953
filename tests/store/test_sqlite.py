"""SQLite-only guarantees: URLs, pragmas, migrations, FTS triggers, atomicity, threads."""

from __future__ import annotations

import re
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.errors import (
    ConfigError,
    CorruptedData,
    InvalidMessage,
    MigrationError,
    StoreError,
)
from engram.models import NewMessage
from engram.store import open_store
from engram.store.sqlite import backend as sqlite_module
from engram.store.sqlite.backend import BUSY_TIMEOUT_MS, SQLiteStore
from engram.store.sqlite.migrations import MIGRATIONS, applied, m001_initial, migrate

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

ROLES = ["system", "user", "assistant", "tool"]
#: Turns of a session: statements, questions, answers, and one of Engram's own tool results.
_TURNS = [
    ("user", "The budget review is on Monday."),
    ("user", "What about the budget review?"),
    ("assistant", "The review plan moved: budget first."),
    ("assistant", "budget budget budget"),
    ("user", "Any plan for the review?"),
    ("call", ""),
    ("tool", "budget review found in an earlier session"),
]


def new(content: str, role: str = "user", at: datetime = T0) -> NewMessage:
    return NewMessage(role=role, content=content, created_at=at)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "engram.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(db_path)
    try:
        yield opened
    finally:
        opened.close()


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


class TestOpening:
    def test_absolute_url(self, db_path: Path) -> None:
        with SQLiteStore.from_url(f"sqlite:///{db_path}") as store:
            store.ensure_session("p", "s")
            assert store.url == f"sqlite:///{db_path}"
        assert db_path.exists()

    def test_relative_url(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(tmp_path)
        store = open_store("sqlite:///./engram.db")
        try:
            store.ensure_session("p", "s")
        finally:
            store.close()
        assert (tmp_path / "engram.db").exists()

    @pytest.mark.parametrize("url", ["sqlite:///:memory:", "sqlite://"])
    def test_memory(self, url: str) -> None:
        with SQLiteStore.from_url(url) as store:
            store.append("p", "s", [new("in memory")], [1])
            assert [m.content for m in store.tail("p", "s", limit=5)] == ["in memory"]

    def test_memory_is_one_database_across_threads(self) -> None:
        with SQLiteStore(":memory:") as store:
            store.append("p", "s", [new("main")], [1])
            seen: list[str] = []
            worker = threading.Thread(
                target=lambda: seen.extend(m.content for m in store.tail("p", "s", limit=5))
            )
            worker.start()
            worker.join()
            assert seen == ["main"]

    def test_path_object(self, db_path: Path) -> None:
        with SQLiteStore(db_path) as store:
            assert store.path == str(db_path)

    def test_missing_directory(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="does not exist"):
            SQLiteStore.from_url(f"sqlite:///{tmp_path}/nope/engram.db")
        assert not (tmp_path / "nope").exists()

    def test_directory_path(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="directory"):
            SQLiteStore(tmp_path)

    @pytest.mark.parametrize(
        "url", ["sqlite:///", "sqlite://host/x.db", "postgresql://x/y", "sqlite:x.db"]
    )
    def test_bad_urls(self, url: str) -> None:
        with pytest.raises(ConfigError):
            SQLiteStore.from_url(url)

    def test_unknown_option(self, db_path: Path) -> None:
        with pytest.raises(ConfigError, match="unknown"):
            SQLiteStore.from_url(f"sqlite:///{db_path}", colour="blue")

    def test_synchronous_normal_by_default_full_on_request(self, db_path: Path) -> None:
        # PRAGMA synchronous: 1 = NORMAL (survives a process crash), 2 = FULL (fsync per commit)
        with SQLiteStore.from_url(f"sqlite:///{db_path}") as store:
            assert store._conn().execute("PRAGMA synchronous").fetchone() == (1,)
        with SQLiteStore.from_url(f"sqlite:///{db_path}?synchronous=full") as store:
            assert store._conn().execute("PRAGMA synchronous").fetchone() == (2,)
            assert store.path == str(db_path)
        with SQLiteStore.from_url(f"sqlite:///{db_path}", synchronous="FULL") as store:
            assert store._conn().execute("PRAGMA synchronous").fetchone() == (2,)
        with SQLiteStore.from_url(f"sqlite:///{db_path}?busy_timeout_ms=50") as store:
            assert store._busy_timeout_ms == 50

    @pytest.mark.parametrize(
        ("suffix", "says"),
        [("?synchronous=off", "synchronous='off'"), ("?colour=blue", "unknown"), ("?x", "options")],
    )
    def test_bad_url_options_are_named(self, db_path: Path, suffix: str, says: str) -> None:
        with pytest.raises(ConfigError, match=re.escape(says)):
            SQLiteStore.from_url(f"sqlite:///{db_path}{suffix}")
        assert not db_path.exists()

    def test_not_a_database(self, db_path: Path) -> None:
        db_path.write_bytes(b"this is not sqlite at all, just some bytes" * 100)
        with pytest.raises(CorruptedData, match="not an SQLite database"):
            SQLiteStore(db_path)

    def test_closed_store_raises_store_error(self, db_path: Path) -> None:
        store = SQLiteStore(db_path)
        store.close()
        store.close()
        with pytest.raises(StoreError, match="closed"):
            store.tail("p", "s", limit=1)


class TestPragmas:
    def test_wal_and_connection_settings(self, store: SQLiteStore, db_path: Path) -> None:
        conn = store._conn()
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_TIMEOUT_MS == 5000
        with raw(db_path) as other:
            # WAL is a property of the file: every later connection sees it.
            assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        other.close()

    def test_one_connection_per_thread(self, store: SQLiteStore) -> None:
        mine = store._conn()
        theirs: list[sqlite3.Connection] = []
        worker = threading.Thread(target=lambda: theirs.append(store._conn()))
        worker.start()
        worker.join()
        assert theirs and theirs[0] is not mine
        assert store._conn() is mine


class TestMigrations:
    def test_blank_database_gets_every_migration(self, store: SQLiteStore, db_path: Path) -> None:
        conn = raw(db_path)
        try:
            assert applied(conn) == [m.__name__ for m in MIGRATIONS]
            tables = {
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            for table in (
                "scopes",
                "sessions",
                "messages",
                "messages_fts",
                "session_state",
                "memories",
                "memory_audit",
                "llm_usage",
                "jobs",
                "_migrations",
            ):
                assert table in tables
        finally:
            conn.close()

    def test_reopen_is_idempotent(self, db_path: Path) -> None:
        SQLiteStore(db_path).close()
        conn = raw(db_path)
        try:
            assert migrate(conn) == []
            assert applied(conn) == [m.__name__ for m in MIGRATIONS]
        finally:
            conn.close()
        with SQLiteStore(db_path) as store:
            store.ensure_session("p", "s")

    def test_failed_migration_leaves_previous_version(self, db_path: Path) -> None:
        def m002_broken(conn: sqlite3.Connection) -> None:
            conn.execute("CREATE TABLE half_done (x INTEGER)")
            conn.execute("INSERT INTO scopes(name, created_at) VALUES ('leak', 'x')")
            raise RuntimeError("disk on fire")

        conn = raw(db_path)
        try:
            with pytest.raises(MigrationError, match=r"m002_broken.*m001_initial"):
                migrate(conn, [m001_initial, m002_broken])
            assert applied(conn) == ["m001_initial"]
            assert (
                conn.execute("SELECT name FROM sqlite_master WHERE name='half_done'").fetchone()
                is None
            )
            assert conn.execute("SELECT count(*) FROM scopes").fetchone()[0] == 0
            assert not conn.in_transaction
        finally:
            conn.close()
        with SQLiteStore(db_path) as store:  # still usable at the previous version
            store.append("p", "s", [new("fine")], [1])

    def test_failed_first_migration_leaves_empty_schema(self, db_path: Path) -> None:
        def m001_boom(conn: sqlite3.Connection) -> None:
            conn.execute("CREATE TABLE t (x)")
            raise ValueError("nope")

        conn = raw(db_path)
        try:
            with pytest.raises(MigrationError, match="empty schema"):
                migrate(conn, [m001_boom])
            assert (
                conn.execute("SELECT count(*) FROM sqlite_master WHERE name='t'").fetchone()[0] == 0
            )
        finally:
            conn.close()

    def test_newer_database_is_refused(self, db_path: Path) -> None:
        SQLiteStore(db_path).close()
        conn = raw(db_path)
        conn.execute("INSERT INTO _migrations(name, applied_at) VALUES ('m999_future', 'x')")
        conn.close()
        with pytest.raises(MigrationError, match="m999_future"):
            SQLiteStore(db_path)


class TestFullTextIndex:
    def fts_count(self, store: SQLiteStore, word: str) -> int:
        row = (
            store._conn()
            .execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", (f'"{word}"',))
            .fetchone()
        )
        return int(row[0])

    def integrity(self, store: SQLiteStore) -> None:
        store._conn().execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")

    def test_delete_session_removes_index_entries(self, store: SQLiteStore) -> None:
        store.append("p", "gone", [new("platypus one"), new("platypus two")], [1, 1])
        store.append("p", "kept", [new("platypus three")], [1])
        assert self.fts_count(store, "platypus") == 3
        store.delete_session("p", "gone")
        assert self.fts_count(store, "platypus") == 1
        self.integrity(store)

    def test_batch_append_indexes_every_message(self, store: SQLiteStore) -> None:
        stored = store.append("p", "s", [new(f"walrus number {i}") for i in range(300)], [1] * 300)
        store.append("p", "other", [new("walrus alone")], [1])
        assert self.fts_count(store, "walrus") == 301
        hits = store.search("p", "walrus", session="s", limit=500)
        assert sorted(h.message.id for h in hits) == [m.id for m in stored]
        self.integrity(store)

    def test_database_indexed_by_the_old_trigger_stays_searchable(self, db_path: Path) -> None:
        conn = raw(db_path)
        try:
            migrate(conn, [m001_initial])  # written before m002: its trigger indexes inserts
            conn.execute("INSERT INTO scopes(name, created_at) VALUES ('p', 'x')")
            conn.execute(
                "INSERT INTO sessions(scope_id, external_id, created_at, updated_at)"
                " VALUES (1, 's', 'x', 'x')"
            )
            conn.execute(
                "INSERT INTO messages(session_id, role, content, created_at, tokens)"
                " VALUES (1, 'user', 'narwhal by trigger', ?, 1)",
                (T0.isoformat(timespec="microseconds"),),
            )
        finally:
            conn.close()
        with SQLiteStore(db_path) as store:
            store.append("p", "s", [new("narwhal by store"), new("narwhal again")], [1, 1])
            assert len(store.search("p", "narwhal")) == 3
            self.integrity(store)

    def test_history_reads_decode_like_single_reads(self, store: SQLiteStore) -> None:
        # tail and page fetch name/tool_calls/tool_call_id/metadata packed in one JSON
        # column; get_message reads them one by one. Both must give the same values.
        calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
        meta = {"big": 2**70, "f": 0.1, "esc": 'q"b\\n\u2028', "emoji": "🎉", "nested": [None, {}]}
        batch = [
            new("plain"),
            NewMessage(role="assistant", content="", created_at=T0, tool_calls=calls),
            NewMessage(role="tool", content="r", created_at=T0, tool_call_id="c1", name="f"),
            NewMessage(role="user", content="m", created_at=T0, metadata=meta),
        ]
        stored = store.append("p", "s", batch, [1, 2, 3, 4])
        singles = [store.get_message("p", m.id) for m in stored]
        assert store.tail("p", "s", limit=10) == singles == stored
        assert store.page("p", "s", limit=10) == singles
        assert singles[3] is not None and singles[3].metadata == meta

    def test_update_trigger_keeps_index_in_step(self, store: SQLiteStore) -> None:
        (m,) = store.append("p", "s", [new("original wording")], [1])
        # Messages are append-only through the API; the trigger guards manual repairs.
        store._conn().execute(
            "UPDATE messages SET content = 'corrected text' WHERE id = ?", (m.id,)
        )
        assert store.search("p", "original") == []
        assert [h.message.id for h in store.search("p", "corrected")] == [m.id]
        self.integrity(store)

    def test_index_uses_explicit_ids_across_vacuum(self, store: SQLiteStore) -> None:
        store.append("p", "a", [new(f"first {i}") for i in range(5)], [1] * 5)
        store.append("p", "b", [new("survivor zebra")], [1])
        store.delete_session("p", "a")
        store._conn().execute("VACUUM")
        (hit,) = store.search("p", "zebra")
        assert hit.message.content == "survivor zebra"
        self.integrity(store)

    def test_content_weighs_more_than_name(self, store: SQLiteStore) -> None:
        store.append(
            "p",
            "s",
            [
                NewMessage("assistant", "hello", T0, name="walrus"),
                NewMessage("user", "about the walrus", T0),
            ],
            [1, 1],
        )
        hits = store.search("p", "walrus")
        assert [h.message.content for h in hits] == ["about the walrus", "hello"]


class TestAtomicWrites:
    @pytest.fixture
    def exploding(self, store: SQLiteStore) -> SQLiteStore:
        # A real failure inside SQLite, halfway through a batch.
        store._conn().execute(
            "CREATE TRIGGER explode BEFORE INSERT ON messages WHEN NEW.content = 'boom'"
            " BEGIN SELECT RAISE(ABORT, 'boom refused'); END"
        )
        return store

    def test_halfway_failure_writes_nothing(self, exploding: SQLiteStore) -> None:
        store = exploding
        store.append("p", "s", [new("before")], [3])
        with pytest.raises(StoreError, match=r"append.*boom refused"):
            store.append("p", "s", [new("one"), new("two"), new("boom"), new("four")], [1] * 4)
        assert [m.content for m in store.tail("p", "s", limit=10)] == ["before"]
        info = store.get_session("p", "s")
        assert info is not None and (info.message_count, info.token_count) == (1, 3)
        assert store.search("p", "two") == []
        assert not store._conn().in_transaction

    def test_halfway_failure_creates_no_session_and_no_stale_cache(
        self, exploding: SQLiteStore
    ) -> None:
        store = exploding
        with pytest.raises(StoreError):
            store.append("new-scope", "new", [new("ok"), new("boom")], [1, 1])
        assert store.get_session("new-scope", "new") is None
        assert store.list_scopes() == []
        # Another session now takes whatever ids were rolled back; the failed one must not alias it.
        store.append("other", "x", [new("other")], [1])
        (m,) = store.append("new-scope", "new", [new("works")], [1])
        assert store.get_message("new-scope", m.id) == m
        assert [x.content for x in store.tail("other", "x", limit=5)] == ["other"]
        assert store.list_scopes() == ["new-scope", "other"]

    def test_invalid_input_is_refused_before_writing(self, store: SQLiteStore) -> None:
        for bad in (
            NewMessage("user", "x", T0, metadata={"f": float("nan")}),
            NewMessage("user", "x", T0, metadata={"o": object()}),
            NewMessage("user", "lone \ud800 surrogate", T0),
        ):
            with pytest.raises(InvalidMessage):
                store.append("p", "s", [new("fine"), bad], [1, 1])
        with pytest.raises(InvalidMessage):
            store.append("p", "s", [new("neg")], [-1])
        assert store.tail("p", "s", limit=5) == []

    def test_busy_database_gives_a_clear_error(self, db_path: Path) -> None:
        with SQLiteStore(db_path, busy_timeout_ms=50) as store:
            store.ensure_session("p", "s")
            blocker = raw(db_path)
            blocker.execute("BEGIN IMMEDIATE")
            try:
                with pytest.raises(StoreError, match="locked"):
                    store.append("p", "s", [new("x")], [1])
            finally:
                blocker.execute("ROLLBACK")
                blocker.close()
            store.append("p", "s", [new("after")], [1])
            assert len(store.tail("p", "s", limit=5)) == 1


class TestConcurrentWriters:
    def test_four_threads_one_session_no_loss(self, store: SQLiteStore) -> None:
        per_thread, batch = 40, 2
        results: dict[int, list[int]] = {}
        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                got: list[int] = []
                for i in range(per_thread):
                    msgs = [new(f"t{n} m{i} part{j}") for j in range(batch)]
                    got += [m.id for m in store.append("p", "shared", msgs, [1] * batch)]
                results[n] = got
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        total = 4 * per_thread * batch
        all_ids = [i for ids in results.values() for i in ids]
        assert len(set(all_ids)) == total
        for ids in results.values():
            assert ids == sorted(ids)
        stored = store.page("p", "shared", limit=1000)
        assert [m.id for m in stored] == sorted(all_ids)
        info = store.get_session("p", "shared")
        assert info is not None and (info.message_count, info.token_count) == (total, total)

    def test_two_stores_on_one_file(self, db_path: Path) -> None:
        with SQLiteStore(db_path) as a, SQLiteStore(db_path) as b:

            def work(store: SQLiteStore, tag: str) -> None:
                for i in range(30):
                    store.append("p", "s", [new(f"{tag}{i}")], [1])

            threads = [threading.Thread(target=work, args=(s, t)) for s, t in ((a, "a"), (b, "b"))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            info = a.get_session("p", "s")
            assert info is not None and info.message_count == 60
            assert len(b.page("p", "s", limit=100)) == 60


class TestSessionCache:
    def test_purge_through_another_store_is_noticed(self, db_path: Path) -> None:
        with SQLiteStore(db_path) as a, SQLiteStore(db_path) as b:
            a.append("p", "s", [new("old")], [1])
            assert len(a.tail("p", "s", limit=5)) == 1  # id now cached in a
            b.delete_session("p", "s")
            b.append("p", "s", [new("recreated")], [1])
            assert [m.content for m in a.tail("p", "s", limit=5)] == ["recreated"]
            a.append("p", "s", [new("from a")], [1])
            info = b.get_session("p", "s")
            assert info is not None and info.message_count == 2
            b.delete_session("p", "s")
            (m,) = a.append("p", "s", [new("again")], [1])
            assert b.get_message("p", m.id) == m


class TestQueries:
    def test_tail_walks_the_session_index(self, store: SQLiteStore) -> None:
        plan = " ".join(
            str(row[3])
            for row in store._conn().execute(
                "EXPLAIN QUERY PLAN " + sqlite_module._TAIL, (1, 10, 5)
            )
        )
        assert "USING INDEX messages_session_id (session_id=? AND id<?)" in plan
        assert "TEMP B-TREE" not in plan

    def test_session_search_ranks_from_the_session_index(self, store: SQLiteStore) -> None:
        store.append("p", "s", [new(f"budget review {i}") for i in range(30)], [5] * 30)
        assert _index_columns(store, "messages_session_id") == ["session_id", "id", "search_flags"]
        # A plain search within a session reads no message row to rank; a filter on
        # the role (or a boost, or a whole scope) reads the rows as before.
        assert "COVERING INDEX messages_session_id" in _ranking_plan(store, session="s")
        assert "PRIMARY KEY" in _ranking_plan(store, session="s", roles=["user"])
        assert "PRIMARY KEY" in _ranking_plan(store)

    @settings(max_examples=40, deadline=None)
    @given(st.lists(st.sampled_from(_TURNS), min_size=1, max_size=24), st.integers(1, 12))
    def test_session_index_ranks_as_the_rows_do(
        self, turns: list[tuple[str, str]], limit: int
    ) -> None:
        with tempfile.TemporaryDirectory() as tmp, SQLiteStore(Path(tmp) / "e.db") as store:
            store.append("p", "other", [new("budget elsewhere")], [1])
            batch = [_turn(role, content, i) for i, (role, content) in enumerate(turns)]
            store.append("p", "s", batch, [3] * len(batch))
            for text in ("budget", "budget review", "review plan?", '"budget review"'):
                fast = store.search("p", text, session="s", limit=limit)
                rows = store.search("p", text, session="s", roles=ROLES, limit=limit)
                assert [(h.message.id, h.score, h.snippet) for h in fast] == [
                    (h.message.id, h.score, h.snippet) for h in rows
                ]

    def test_timestamps_stored_fixed_width_utc(self, store: SQLiteStore) -> None:
        store.append("p", "s", [new("x", at=datetime(2024, 1, 2, 3, 4, 5))], [1])  # noqa: DTZ001 (naive = UTC)
        (text,) = store._conn().execute("SELECT created_at FROM messages").fetchone()
        assert text == "2024-01-02T03:04:05.000000+00:00"
        (m,) = store.tail("p", "s", limit=1)
        assert m.created_at == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)

    def test_empty_json_columns_are_null(self, store: SQLiteStore) -> None:
        store.append("p", "s", [new("plain")], [1])
        row = store._conn().execute("SELECT metadata, tool_calls FROM messages").fetchone()
        assert row == (None, None)

    def test_search_on_many_long_matches_stays_fast(self, store: SQLiteStore) -> None:
        text = "budget review " * 200
        store.append("p", "s", [new(text) for _ in range(500)], [400] * 500)
        hits = store.search("p", "budget review", limit=10)
        assert len(hits) == 10 and "[budget]" in hits[0].snippet


class TestCost:
    def test_tail_cost_does_not_grow_with_history(self, store: SQLiteStore) -> None:
        def vm_steps(session: str) -> int:
            steps = [0]

            def tick() -> int:
                steps[0] += 1
                return 0

            conn = store._conn()
            conn.set_progress_handler(tick, 1)  # called on every SQLite VM instruction
            try:
                assert len(store.tail("p", session, limit=20)) == 20
            finally:
                conn.set_progress_handler(None, 1)
            return steps[0]

        for session, n in (("small", 50), ("large", 5000)):
            batch = [new(f"m{i}", at=T0 + timedelta(seconds=i)) for i in range(n)]
            store.append("p", session, batch, [1] * n)
        store.tail("p", "small", limit=1)
        store.tail("p", "large", limit=1)  # both ids cached: no lookup in the count
        small, large = vm_steps("small"), vm_steps("large")
        assert large <= small * 1.2
        last = store.tail("p", "large", limit=20)
        assert [m.content for m in last] == [f"m{i}" for i in range(4980, 5000)]


def _turn(role: str, content: str, i: int) -> NewMessage:
    """One message of ``_TURNS``: a ``call`` is a search_history call the next tool answers."""
    if role == "call":
        function = {"name": "search_history", "arguments": "{}"}
        call = {"id": f"c{i}", "type": "function", "function": function}
        return NewMessage(role="assistant", content="", created_at=T0, tool_calls=[call])
    if role == "tool":
        return NewMessage(role="tool", content=content, created_at=T0, tool_call_id=f"c{i - 1}")
    return new(content, role)


def _index_columns(store: SQLiteStore, index: str) -> list[str]:
    return [row[2] for row in store._conn().execute(f"PRAGMA index_info('{index}')")]


def _ranking_plan(store: SQLiteStore, **filters: object) -> str:
    """The query plan of the statement that ranks the matches of a search."""
    ranking: list[str] = []
    conn = store._conn()
    conn.set_trace_callback(lambda sql: ranking.append(sql) if " AS own," in sql else None)
    try:
        store.search("p", "budget review", **filters)  # type: ignore[arg-type]
    finally:
        conn.set_trace_callback(None)
    assert ranking
    return " ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + ranking[0]))
