"""PostgreSQL specifics: migrations, pool recovery, search, CAS and jobs under concurrency."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from engram.errors import ConfigError, ConnectionLost, NotFound
from engram.models import NewMessage
from engram.store import open_store
from engram.store.postgres.backend import PostgresStore
from engram.store.postgres.jobs import JobQueue
from engram.store.postgres.migrations import MIGRATIONS, migrate

pytestmark = pytest.mark.postgres

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    opened = open_store(pg_url, max_size=4)
    assert isinstance(opened, PostgresStore)
    try:
        yield opened
    finally:
        opened.close()


def msg(content: str, *, name: str | None = None, at: datetime = T0) -> NewMessage:
    return NewMessage(role="user", content=content, created_at=at, name=name)


class TestMigrations:
    def test_every_migration_recorded_once(self, store: PostgresStore, pg_url: str) -> None:
        with psycopg.connect(pg_url) as conn:
            rows = conn.execute("SELECT version, name FROM engram_migrations ORDER BY 1").fetchall()
            assert rows == [(v, n) for v, n, _ in MIGRATIONS]
            assert migrate(conn) == []  # already up to date: nothing reapplied

    def test_concurrent_opens_migrate_once(self, pg_url: str) -> None:
        stores: list[PostgresStore] = []
        errors: list[BaseException] = []

        def opener() -> None:
            try:
                stores.append(PostgresStore.from_url(pg_url, min_size=1, max_size=1))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=opener) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s in stores:
            s.close()
        assert errors == [] and len(stores) == 4
        with psycopg.connect(pg_url) as conn:
            (count,) = conn.execute("SELECT count(*) FROM engram_migrations").fetchone() or (0,)
        assert count == len(MIGRATIONS)

    def test_tables_live_in_the_url_schema(self, store: PostgresStore, pg_url: str) -> None:
        schema = pg_url.rsplit("search_path%3D", 1)[1]
        with psycopg.connect(pg_url) as conn:
            found = conn.execute(
                "SELECT table_schema FROM information_schema.tables WHERE table_name = 'messages'"
            ).fetchall()
        assert (schema,) in found


class TestUrls:
    def test_password_is_masked(self) -> None:
        with pytest.raises(ConnectionLost) as caught:
            PostgresStore.from_url(
                "postgresql://bob:hunter2@127.0.0.1:1/engram?connect_timeout=1", timeout=1.0
            )
        assert "hunter2" not in str(caught.value)
        assert "***" in str(caught.value)

    def test_unknown_option_is_config_error(self, pg_url: str) -> None:
        with pytest.raises(ConfigError, match="pool_size"):
            open_store(pg_url, pool_size=3)

    def test_not_a_postgres_url(self) -> None:
        with pytest.raises(ConfigError):
            PostgresStore.from_url("mysql://x/y")

    def test_scheme_variants_accepted(self, pg_url: str) -> None:
        for prefix in ("postgres://", "postgresql+psycopg://"):
            s = open_store(prefix + pg_url.split("://", 1)[1], max_size=1)
            try:
                assert s.list_scopes() == []
            finally:
                s.close()


class TestConnectionLoss:
    def _kill_backends(self, pg_url: str) -> int:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND datname = current_database() "
                "AND application_name = ''"
            ).fetchall()
        return len(rows)

    def test_pool_recovers_after_backends_are_killed(
        self, store: PostgresStore, pg_url: str
    ) -> None:
        store.append("p", "s", [msg("before")], [1])
        assert self._kill_backends(pg_url) >= 1
        # The pool checks connections before handing them out: the next call just works.
        assert [m.content for m in store.tail("p", "s", limit=5)] == ["before"]
        store.append("p", "s", [msg("after")], [1])
        assert [m.content for m in store.tail("p", "s", limit=5)] == ["before", "after"]

    def test_connection_dying_mid_call_is_connection_lost(
        self, store: PostgresStore, pg_url: str
    ) -> None:
        store.ensure_session("p", "s")

        def work(conn: psycopg.Connection[tuple[object, ...]]) -> None:
            (pid,) = conn.execute("SELECT pg_backend_pid()").fetchone() or (0,)
            with psycopg.connect(pg_url, autocommit=True) as killer:
                killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
            conn.execute("SELECT 1")

        with pytest.raises(ConnectionLost, match="lost the connection"):
            store._write(work)
        assert store.get_session("p", "s") is not None  # and the pool carries on


class TestSearch:
    def test_stems_ranking_and_markers(self, store: PostgresStore) -> None:
        store.append(
            "p",
            "s",
            [
                msg("cats are running"),
                msg("one cat"),
                msg("dogs sleep"),
                msg("hi", name="runner_bob"),
            ],
            [1, 1, 1, 1],
        )
        hits = store.search("p", "cat run")
        assert [h.message.content for h in hits][:2] == ["cats are running", "one cat"]
        assert hits[0].snippet == "[cats] are [running]"
        assert hits[0].score > hits[1].score
        assert [h.message.content for h in store.search("p", "bob")] == ["hi"]

    @pytest.mark.parametrize("query", ["a & b", "x:*", "!(", "' OR 1=1 --", "<-> | ! &", "\\"])
    def test_tsquery_syntax_is_plain_text(self, store: PostgresStore, query: str) -> None:
        store.append("p", "s", [msg("a b x or 1 1")], [1])
        store.search("p", query)  # never a syntax error

    def test_punctuation_splits_words_like_search_query(self, store: PostgresStore) -> None:
        store.append("p", "s", [msg("pi is 3.14, mail bob@example.com, foo_bar")], [1])
        for word in ("3", "14", "example", "bar"):
            (hit,) = store.search("p", word)
            assert f"[{word}]" in hit.snippet

    def test_stop_words_are_searchable(self, store: PostgresStore) -> None:
        store.append("p", "s", [msg("to be or not to be")], [1])
        assert len(store.search("p", "not")) == 1

    def test_uses_gin_index(self, store: PostgresStore, pg_url: str) -> None:
        with psycopg.connect(pg_url) as conn:
            (definition,) = conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'messages_search'"
            ).fetchone() or ("",)
        assert "gin" in definition.lower()


class TestConcurrency:
    def test_threads_appending_to_one_session_keep_id_order(self, store: PostgresStore) -> None:
        def writer(i: int) -> None:
            for j in range(10):
                store.append("p", "s", [msg(f"w{i}-{j}"), msg(f"w{i}-{j}b")], [1, 1])

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rows = store.page("p", "s", limit=1000)
        assert len(rows) == 80
        for i in range(4):
            mine = [m.content for m in rows if m.content.startswith(f"w{i}-")]
            assert mine == [f"w{i}-{j}{s}" for j in range(10) for s in ("", "b")]
        info = store.get_session("p", "s")
        assert info is not None and info.message_count == 80


class TestJobs:
    def test_each_job_claimed_once_across_workers(self, store: PostgresStore) -> None:
        queue = JobQueue(store, worker_id="enqueuer")
        ids = [queue.enqueue("compaction", scope="p", session=f"s{i}") for i in range(20)]
        claimed: list[int] = []
        lock = threading.Lock()

        def worker(n: int) -> None:
            q = JobQueue(store, worker_id=f"w{n}")
            while (job := q.claim(["compaction"])) is not None:
                q.complete(job.id, {"ok": True})
                with lock:
                    claimed.append(job.id)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(claimed) == sorted(ids)
        assert queue.counts() == {"done": 20}

    def test_dedupe_key_enqueues_once_while_live(self, store: PostgresStore) -> None:
        queue = JobQueue(store, worker_id="w")
        first = queue.enqueue("compaction", scope="p", dedupe_key="p/s")
        assert queue.enqueue("compaction", scope="p", dedupe_key="p/s") == first
        job = queue.claim()
        assert job is not None and job.id == first
        queue.complete(first)
        assert queue.enqueue("compaction", scope="p", dedupe_key="p/s") != first

    def test_dedupe_survives_the_live_job_finishing_between_insert_and_lookup(
        self, store: PostgresStore
    ) -> None:
        """Regression: the conflicting job was done by the time it was looked up (500 in serve)."""
        live = JobQueue(store, worker_id="w")
        first = live.enqueue("compaction", scope="p", dedupe_key="p/s")
        assert (job := live.claim()) is not None and job.id == first

        class FinishFirst:
            """Connections that complete the live job just before enqueue looks it up."""

            @contextmanager
            def connection(self) -> Iterator[Any]:
                with store.connection() as conn:
                    yield _Racing(conn)

        class _Racing:
            def __init__(self, conn: Any) -> None:
                self.conn = conn

            def execute(self, sql: str, params: Any = None) -> Any:
                if sql.startswith("SELECT id FROM jobs") and live.get(first).status == "running":
                    live.complete(first)
                return self.conn.execute(sql, params)

        again = JobQueue(FinishFirst(), worker_id="w").enqueue(  # type: ignore[arg-type]
            "compaction", scope="p", dedupe_key="p/s"
        )
        assert again != first
        assert live.get(again) is not None and live.get(again).status == "pending"

    def test_failure_retries_then_fails(self, store: PostgresStore) -> None:
        queue = JobQueue(store, worker_id="w")
        job_id = queue.enqueue("memory", scope="p", max_attempts=2)
        job = queue.claim()
        assert job is not None and job.attempts == 1
        again = queue.fail(job_id, "llm down")
        assert again.status == "pending" and again.run_after > datetime.now(UTC)
        assert queue.claim() is None  # not ready before its retry delay
        with store.connection() as conn:
            conn.execute("UPDATE jobs SET run_after = now() WHERE id = %s", (job_id,))
        job = queue.claim()
        assert job is not None and job.attempts == 2
        assert queue.fail(job_id, "still down").status == "failed"

    def test_expired_lease_is_reclaimed(self, store: PostgresStore) -> None:
        dead = JobQueue(store, worker_id="dead")
        alive = JobQueue(store, worker_id="alive")
        job_id = dead.enqueue("compaction", scope="p")
        assert dead.claim(lease=timedelta(milliseconds=1)) is not None
        with store.connection() as conn:
            conn.execute("SELECT pg_sleep(0.01)")
        job = alive.claim()
        assert job is not None and job.id == job_id and job.locked_by == "alive"
        with pytest.raises(NotFound):
            dead.complete(job_id)
        assert alive.complete(job_id).status == "done"
