"""Group commit: threads writing at once share one commit, keep their order, learn their fate.

The first commit is held open until the other threads have queued, so the
grouping is certain rather than left to timing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engram.errors import StoreError
from engram.models import NewMessage
from engram.store.jsondir import log as jsondir_log
from engram.store.jsondir.backend import JsonDirStore
from engram.store.jsondir.group_commit import GroupCommit, Request

THREADS = 6


def wait_until(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the other threads never queued"
        time.sleep(0.001)


def run_threads(target: Callable[[int], None], count: int = THREADS) -> None:
    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), "a writer is stuck"


class TestGroupCommit:
    def test_waiting_threads_are_committed_together(self) -> None:
        groups: list[list[int]] = []
        queue: GroupCommit[int, int]

        def commit(requests: list[Request[int, int]]) -> None:
            if not groups:  # hold the first commit until everyone else queued
                wait_until(lambda: len(queue._queue) == THREADS - 1)
            groups.append([r.payload for r in requests])
            for request in requests:
                request.result = request.payload * 10

        queue = GroupCommit(commit)
        results: dict[int, int] = {}

        def submit(i: int) -> None:
            results[i] = queue.submit(i)

        run_threads(submit)
        assert results == {i: i * 10 for i in range(THREADS)}
        assert len(groups) == 2 and len(groups[1]) == THREADS - 1

    def test_an_error_reaches_every_request_of_its_group_and_the_next_group_runs(self) -> None:
        calls: list[int] = []

        def commit(requests: list[Request[int, int]]) -> None:
            calls.append(len(requests))
            if len(calls) == 1:
                raise RuntimeError("disk on fire")
            for request in requests:
                request.result = request.payload

        queue: GroupCommit[int, int] = GroupCommit(commit)
        with pytest.raises(RuntimeError, match="disk on fire"):
            queue.submit(1)
        assert queue.submit(2) == 2  # the lead was given back

    def test_a_thread_keeps_its_order_and_results_are_its_own(self) -> None:
        seen: list[tuple[int, int]] = []

        def commit(requests: list[Request[tuple[int, int], tuple[int, int]]]) -> None:
            for request in requests:
                seen.append(request.payload)
                request.result = request.payload

        queue: GroupCommit[tuple[int, int], tuple[int, int]] = GroupCommit(commit)

        def submit(i: int) -> None:
            for k in range(50):
                assert queue.submit((i, k)) == (i, k)

        run_threads(submit)
        for i in range(THREADS):
            assert [k for t, k in seen if t == i] == list(range(50))


def msg(text: str) -> NewMessage:
    return NewMessage(role="user", content=text, created_at=datetime.now(UTC))


class TestJsonDirAppends:
    def test_threads_on_one_session_share_fsyncs_and_keep_their_order(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = JsonDirStore(tmp_path / "ctx")
        store.append("p", "s", [msg("first")], [1])
        store.append("p", "s", [msg("second")], [1])  # the log exists from here on
        syncs: list[int] = []
        real = jsondir_log._sync

        def counted(fd: int) -> None:
            if not syncs:  # hold the first fsync until every other writer queued
                wait_until(lambda: len(store._appends._queue) == THREADS - 1)
            syncs.append(fd)
            real(fd)

        monkeypatch.setattr(jsondir_log, "_sync", counted)

        def write(i: int) -> None:
            for k in range(5):
                store.append("p", "s", [msg(f"t{i} m{k}")], [1])

        run_threads(write)
        rows = JsonDirStore(tmp_path / "ctx").page("p", "s", limit=100)
        assert len(rows) == 2 + THREADS * 5
        assert [m.id for m in rows] == sorted({m.id for m in rows})
        for i in range(THREADS):
            mine = [m.content for m in rows if m.content.startswith(f"t{i} ")]
            assert mine == [f"t{i} m{k}" for k in range(5)]
        assert len(syncs) < THREADS * 5  # at least one group shared an fsync

    def test_a_failing_log_fails_only_its_own_session(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = JsonDirStore(tmp_path / "ctx")
        for name in ("good", "bad"):
            store.append("p", name, [msg("one")], [1])
        real = jsondir_log.append_log
        first = threading.Event()

        def failing(path: Path, *args: object, **kwargs: object) -> jsondir_log.LogView:
            if not first.is_set():  # hold the first group until the others queued
                first.set()
                wait_until(lambda: len(store._appends._queue) == 3)
            if path.name == "bad.jsonl":
                raise StoreError("No space left on device")
            return real(path, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr("engram.store.jsondir.docs.append_log", failing)
        outcome: dict[int, str] = {}

        def write(i: int) -> None:
            name = "bad" if i % 2 else "good"
            try:
                store.append("p", name, [msg(f"{name} {i}")], [1])
                outcome[i] = "stored"
            except StoreError:
                outcome[i] = "refused"

        run_threads(write, 4)
        assert outcome == {0: "stored", 1: "refused", 2: "stored", 3: "refused"}
        fresh = JsonDirStore(tmp_path / "ctx")
        assert sorted(m.content for m in fresh.page("p", "good")) == ["good 0", "good 2", "one"]
        assert [m.content for m in fresh.page("p", "bad")] == ["one"]

    def test_an_append_inside_the_write_lock_does_not_wait_for_itself(self, tmp_path: Path) -> None:
        store = JsonDirStore(tmp_path / "ctx")
        with store._locked():
            stored = store.append("p", "s", [msg("inside")], [1])
        assert [m.content for m in store.page("p", "s")] == ["inside"] == [stored[0].content]
