"""Four processes add to one SQLite session while each keeps compacting it (invariant 5).

Every worker (a spawned interpreter with its own ``Engram``) appends its own
numbered messages and calls ``Session.compact()`` after every few appends,
recording each commit it wins. Afterwards: no message lost or duplicated
(ids and contents), each worker's messages in its own order, and the commits
of all workers together form one version chain 1..n with strictly increasing
watermarks: one committed state per watermark.
"""

from __future__ import annotations

import itertools
import multiprocessing

import pytest

import engram
from engram.compaction.state import STATE_KIND

WORKERS = 4
ROUNDS = 15
POLICY = {"name": "mp", "max_history_messages": 6, "keep_messages": 3}


def worker(url: str, wid: int) -> list[tuple[int, int]]:
    commits: list[tuple[int, int]] = []
    with engram.open(url, llm=None) as mem:
        chat = mem.session("shared", scope="p")
        for r in range(ROUNDS):
            chat.add_many(
                [
                    {"role": "user", "content": f"w{wid} r{r} question"},
                    {"role": "assistant", "content": f"w{wid} r{r} answer"},
                ]
            )
            if r % 2 == 1:
                result = chat.compact(policy=POLICY)
                if result.committed:
                    commits.append((result.version, result.watermark))
    return commits


@pytest.mark.slow  # four processes
def test_four_processes_add_and_compact_one_session(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/mp.db"
    with engram.open(url, llm=None) as mem:
        mem.session("shared", scope="p", policy=POLICY)  # created and migrated up front
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(WORKERS) as pool:
        pending = [pool.apply_async(worker, (url, w)) for w in range(WORKERS)]
        results = [p.get(timeout=120) for p in pending]
    commits = sorted(c for worker_commits in results for c in worker_commits)
    with engram.open(url, llm=None) as mem:
        chat = mem.session("shared", scope="p")
        stored = chat.messages(limit=1000)
        record = mem.store.load_state("p", "shared", STATE_KIND)
        final = chat.compaction_state()
    contents = [m.content for m in stored]
    expected = {
        f"w{w} r{r} {kind}"
        for w in range(WORKERS)
        for r in range(ROUNDS)
        for kind in ("question", "answer")
    }
    assert len(stored) == len(expected) == len(set(contents))
    assert set(contents) == expected
    assert len({m.id for m in stored}) == len(stored)
    assert [m.id for m in stored] == sorted(m.id for m in stored)
    for w in range(WORKERS):  # each worker's messages in its order, each pair contiguous
        mine = [m for m in stored if m.content.startswith(f"w{w} ")]
        assert [m.content for m in mine] == [
            f"w{w} r{r} {kind}" for r in range(ROUNDS) for kind in ("question", "answer")
        ]
        for q, a in zip(mine[::2], mine[1::2], strict=True):
            assert a.id == q.id + 1
    assert commits, "no compaction committed"
    versions = [v for v, _ in commits]
    assert versions == list(range(1, len(commits) + 1))  # one chain, no version twice
    marks = [w for _, w in commits]
    assert all(a < b for a, b in itertools.pairwise(marks))
    assert record is not None and record.version == versions[-1]
    assert final.watermark == marks[-1]
    ids = {m.id for m in stored}
    assert all(mark in ids for mark in marks)
