"""Background work through the shared PostgreSQL queue: any of several engines may run it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest

import engram
from engram.background.queue import COMPACTION, MEMORY, QueueScheduler, dedupe_key
from engram.engine import Engram
from engram.store.postgres.backend import PostgresStore
from engram.store.postgres.jobs import JobQueue

pytestmark = pytest.mark.postgres

#: Every wait in these tests is bounded by this (seconds).
WAIT = 10.0


@pytest.fixture
def opened() -> Iterator[list[Engram]]:
    """Engines opened by a test, closed after it even when it fails."""
    engines: list[Engram] = []
    yield engines
    for mem in engines:
        mem.close()


def _open(opened: list[Engram], pg_url: str, *, run_jobs: bool = True) -> Engram:
    mem = engram.open(pg_url, llm=None, run_jobs=run_jobs, min_size=1, max_size=4)
    opened.append(mem)
    return mem


def _fill(mem: Engram, scope: str, session: str, count: int = 60) -> None:
    chat = mem.session(session, scope, policy="agent_state")
    chat.add_many(
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} about topic {i}"}
        for i in range(count)
    )


def _jobs(mem: Engram) -> list[tuple[str, str, str | None, int]]:
    """(kind, status, session, attempts) of every job, oldest first."""
    store = mem.store
    assert isinstance(store, PostgresStore)
    with store.connection() as conn:
        rows = conn.execute("SELECT kind, status, session, attempts FROM jobs ORDER BY id")
        return [(str(k), str(s), sess, int(a)) for k, s, sess, a in rows.fetchall()]


def _workers(mem: Engram) -> QueueScheduler:
    assert mem.jobs is not None
    return mem.jobs


class TestCompactionJobs:
    def test_enqueued_once_run_by_exactly_one_of_two_servers(
        self, pg_url: str, opened: list[Engram]
    ) -> None:
        web = _open(opened, pg_url, run_jobs=False)
        _fill(web, "p", "s")
        chat = web.session("s", "p")
        assert chat.compact_later() is True
        assert chat.compact_later() is True  # deduplicated: still one live job
        ctx = chat.context()
        assert ctx.pending_compaction is True
        assert _jobs(web) == [(COMPACTION, "pending", "s", 0)]
        time.sleep(0.3)
        assert _jobs(web)[0][1] == "pending"  # run_jobs=False: nobody here runs it

        a, b = _open(opened, pg_url), _open(opened, pg_url)
        assert web.wait_idle(WAIT)
        assert _jobs(web) == [(COMPACTION, "done", "s", 1)]
        assert _workers(a).completed + _workers(b).completed == 1
        for mem in (web, a, b):
            state = mem.session("s", "p").compaction_state()
            assert state.watermark > 0 and state.summary
        assert a.session("s", "p").compaction_state() == b.session("s", "p").compaction_state()

    def test_context_enqueues_and_the_state_appears_for_the_other_server(
        self, pg_url: str, opened: list[Engram]
    ) -> None:
        a, b = _open(opened, pg_url), _open(opened, pg_url)
        _fill(a, "p", "s")
        ctx = a.session("s", "p").context()
        assert ctx.pending_compaction is True
        assert a.wait_idle(WAIT)
        done = [job for job in _jobs(a) if job[0] == COMPACTION]
        assert done and all(status == "done" for _, status, _, _ in done)
        assert _workers(a).completed + _workers(b).completed == len(done)
        state = b.session("s", "p").compaction_state()
        assert state.watermark > 0
        after = b.session("s", "p").context()
        assert after.pending_compaction is False
        assert len(after.messages) < 60  # the folded messages are out of the prompt

    def test_a_dead_workers_job_is_reclaimed_after_its_lease(
        self, pg_url: str, opened: list[Engram]
    ) -> None:
        web = _open(opened, pg_url, run_jobs=False)
        _fill(web, "p", "s")
        assert web.session("s", "p").compact_later() is True
        store = web.store
        assert isinstance(store, PostgresStore)
        dead = JobQueue(store, worker_id="dead-server")
        job = dead.claim([COMPACTION], lease=timedelta(milliseconds=500))
        assert job is not None and job.locked_by == "dead-server"
        # While the lease holds, a live worker leaves the job alone.
        live = _open(opened, pg_url)
        time.sleep(0.2)
        assert _jobs(web)[0][1] == "running"
        assert web.wait_idle(WAIT)
        final = JobQueue(store).get(job.id)
        assert final is not None and final.status == "done" and final.attempts == 2
        assert _workers(live).completed == 1
        assert web.session("s", "p").compaction_state().watermark > 0

    def test_dedupe_key_keeps_distinct_ids_apart(self) -> None:
        assert dedupe_key("compact", "a/b", "c") != dedupe_key("compact", "a", "b/c")
        assert dedupe_key("compact", "p", "s") == "compact:p/s"


class TestMemoryJobs:
    def test_end_writes_the_memory_through_the_queue(
        self, pg_url: str, opened: list[Engram]
    ) -> None:
        a, b = _open(opened, pg_url), _open(opened, pg_url)
        chat = a.session("c1", "p")
        chat.add("user", "We decided to price the Pro plan at 14 dollars.")
        chat.add("assistant", "Noted, I will keep that in mind.")
        future = chat.end("user closed")
        assert a.wait_idle(WAIT)
        outcome = future.result(timeout=WAIT)
        assert outcome.status == "created" and outcome.memory is not None
        for mem in (a, b):
            assert [m.content for m in mem.memories("p").list()] == [outcome.memory.content]
        assert [(k, s) for k, s, _, _ in _jobs(a)] == [(MEMORY, "done")]
        # The end itself was recorded at once, and ending again adds nothing.
        assert chat.end("again").result(timeout=WAIT).status == "skipped"
        assert len(_jobs(a)) == 1

    def test_run_jobs_false_enqueues_and_another_engine_runs_it(
        self, pg_url: str, opened: list[Engram]
    ) -> None:
        web = _open(opened, pg_url, run_jobs=False)
        chat = web.session("c1", "p")
        chat.add("user", "I prefer meetings after 2pm on Tuesdays.")
        future = chat.end("timeout")
        time.sleep(0.3)
        assert not future.done()
        assert web.memories("p").list() == []
        assert not web.wait_idle(0.2)  # its job is still pending
        worker = _open(opened, pg_url)
        assert web.wait_idle(WAIT)
        outcome = future.result(timeout=WAIT)  # resolved from the job another engine ran
        assert outcome.status == "created" and outcome.memory is not None
        assert [m.content for m in web.memories("p").list()] == [outcome.memory.content]
        assert _workers(worker).completed == 1


class TestLifecycle:
    def test_close_leaves_no_thread_running(self, pg_url: str) -> None:
        before = set(threading.enumerate())
        mem = engram.open(pg_url, llm=None, min_size=1, max_size=2)
        web = engram.open(pg_url, llm=None, run_jobs=False, min_size=1, max_size=2)
        try:
            _fill(web, "p", "s")
            web.session("s", "p").compact_later()
            web.session("s", "p").end("done")
            assert mem.wait_idle(WAIT) and web.wait_idle(WAIT)
            started = set(threading.enumerate()) - before
            assert any(t.name.startswith("engram-jobs-") for t in started)
        finally:
            mem.close()
            web.close()
        left = [t for t in set(threading.enumerate()) - before if t.name.startswith("engram-jobs-")]
        assert left == []
        mem.close()  # safe twice

    def test_close_finishes_the_running_job_and_claims_no_more(
        self, pg_url: str, opened: list[Engram]
    ) -> None:
        web = _open(opened, pg_url, run_jobs=False)
        for n in range(3):
            _fill(web, "p", f"s{n}")
            web.session(f"s{n}", "p").compact_later()
        mem = engram.open(pg_url, llm=None, min_size=1, max_size=2)
        deadline = time.monotonic() + WAIT
        while _workers(mem).completed == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        mem.close()
        statuses = [s for _, s, _, _ in _jobs(web)]
        assert "running" not in statuses  # the job in hand was finished, not abandoned
        assert statuses.count("done") == _workers(mem).completed >= 1
        assert web.wait_idle(0) is (statuses.count("pending") == 0)

    def test_sqlite_keeps_the_in_process_workers(self, tmp_path: object) -> None:
        with engram.open(f"sqlite:///{tmp_path}/e.db", llm=None) as mem:
            assert mem.jobs is None
            _fill(mem, "p", "s")
            assert mem.session("s", "p").compact_later() is True
            assert mem.wait_idle(WAIT)
            assert mem.session("s", "p").compaction_state().watermark > 0
