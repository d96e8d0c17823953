"""jsondir housekeeping: orphaned temporary files, a full disk, many threads on one store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import engram
from engram.store.jsondir.backend import JsonDirStore

WORKER = Path(__file__).with_name("full_disk_worker.py")


def test_orphaned_temporary_files_are_removed_at_open(tmp_path: Path) -> None:
    root = tmp_path / "ctx"
    with engram.open(f"jsondir://{root}", llm=None) as mem:
        mem.session("s", scope="p").add("user", "hello")
    sessions = next(root.glob("*/sessions"))
    # What a writer killed between creating its temporary file and the rename leaves.
    orphans = [
        root / ".counters.json.4242.deadbeef.tmp",
        sessions.parent / ".memories.json.4242.deadbeef.tmp",
        sessions / ".s.json.4242.cafebabe.tmp",
    ]
    for orphan in orphans:
        orphan.write_text('{"half": ')
    store = JsonDirStore(root)
    try:
        assert not [p for p in orphans if p.exists()]
        assert [m.content for m in store.page("p", "s")] == ["hello"]
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jsondir", "sqlite"])
def test_a_full_disk_serves_the_previous_state_and_end_does_not_raise(
    tmp_path: Path, backend: str
) -> None:
    root = tmp_path / "store"
    root.mkdir()
    url = f"jsondir://{root}/ctx" if backend == "jsondir" else f"sqlite:///{root}/engram.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(WORKER), url, str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stderr[-2000:]
    out = json.loads(lines[-1])
    assert out["context"] == "ok", out
    assert out["tokens"] <= 4000
    assert out["degraded"], out  # the context says the compaction could not be saved
    assert out["end"] == "returned", out


def test_eight_threads_share_one_jsondir_engram(tmp_path: Path) -> None:
    per_thread = 15
    with engram.open(f"jsondir://{tmp_path}/ctx", llm=None) as mem:

        def write(index: int) -> None:
            chat = mem.session("shared" if index % 2 else f"own-{index}", scope="p")
            for k in range(per_thread):
                chat.add("user", f"thread {index} message {k}")
                chat.context(budget=2000)

        threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        shared = mem.session("shared", scope="p").messages(limit=1000)
        assert len(shared) == 4 * per_thread
        ids = [m.id for m in shared]
        assert ids == sorted(set(ids))
        for index in range(1, 8, 2):  # each thread's messages keep their order
            mine = [m.content for m in shared if m.content.startswith(f"thread {index} ")]
            assert mine == [f"thread {index} message {k}" for k in range(per_thread)]
        for index in range(0, 8, 2):
            assert len(mem.session(f"own-{index}", scope="p").messages()) == per_thread
