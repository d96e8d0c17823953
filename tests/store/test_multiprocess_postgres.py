"""Several processes, one PostgreSQL: appends and compactions racing on the same sessions.

Four worker processes (separate interpreters, each with its own pool) append
to the same three sessions and, after every append, try to "compact": load the
``compaction`` state and commit a new one whose watermark is their view of the
last message id, by compare-and-set. Afterwards: no message lost or
duplicated, every worker's messages in its own order with each batch
contiguous, and per session the committed versions form a chain 1..n with
strictly increasing watermarks (one compaction per watermark).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict

import pytest

from engram.store import open_store

try:
    from tests.pg import fresh_postgres_url
except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
    from pg import fresh_postgres_url  # type: ignore[import-not-found,no-redef]

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # four processes

WORKERS = 4
ROUNDS = 12
SESSIONS = ("s0", "s1", "s2")

WORKER = r"""
import json, sys
from datetime import UTC, datetime
from engram.models import NewMessage
from engram.store import open_store

url, wid, rounds, sessions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
store = open_store(url, min_size=1, max_size=2)
commits = []
try:
    for r in range(rounds):
        for s in sessions:
            now = datetime.now(UTC)
            batch = [
                NewMessage("user", f"w{wid} r{r} {s} a", now),
                NewMessage("assistant", f"w{wid} r{r} {s} b", now),
            ]
            store.append("p", s, batch, [7, 7])
            last = store.tail("p", s, limit=1)[-1].id
            state = store.load_state("p", s, "compaction")
            version = state.version if state else 0
            mark = state.data["watermark"] if state else 0
            if last > mark:
                saved = store.save_state(
                    "p", s, "compaction", {"watermark": last, "by": wid}, expected_version=version
                )
                if saved is not None:
                    commits.append([s, saved.version, last])
finally:
    store.close()
print(json.dumps(commits))
"""


def test_four_processes_append_and_compact(request: pytest.FixtureRequest) -> None:
    url = fresh_postgres_url(request)
    open_store(url).close()  # migrate once up front; workers would also cope
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, str(w), str(ROUNDS), *SESSIONS],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WORKERS)
    ]
    commits: list[list[object]] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        commits.extend(json.loads(out))

    store = open_store(url)
    try:
        all_ids: list[int] = []
        for s in SESSIONS:
            rows = store.page("p", s, limit=1000)
            all_ids += [m.id for m in rows]
            contents = [m.content for m in rows]
            # Nothing lost, nothing duplicated.
            assert sorted(contents) == sorted(
                f"w{w} r{r} {s} {x}" for w in range(WORKERS) for r in range(ROUNDS) for x in "ab"
            )
            # Order by id: each worker's messages in its own order, each batch contiguous.
            for w in range(WORKERS):
                mine = [c for c in contents if c.startswith(f"w{w} ")]
                assert mine == [f"w{w} r{r} {s} {x}" for r in range(ROUNDS) for x in "ab"]
            for i, c in enumerate(contents):
                if c.endswith(" a"):
                    assert contents[i + 1] == c[:-1] + "b"
            info = store.get_session("p", s)
            assert info is not None and info.message_count == WORKERS * ROUNDS * 2
            assert info.token_count == WORKERS * ROUNDS * 2 * 7

            # Compactions: a chain of versions, strictly increasing watermarks.
            chain = sorted((int(v), int(m)) for sess, v, m in commits if sess == s)  # type: ignore[call-overload]
            versions = [v for v, _ in chain]
            marks = [m for _, m in chain]
            assert versions == list(range(1, len(chain) + 1))
            assert marks == sorted(set(marks))
            assert set(marks) <= {m.id for m in rows}
            final = store.load_state("p", s, "compaction")
            assert final is not None and final.version == len(chain)
            assert final.data["watermark"] == marks[-1]
        assert len(all_ids) == len(set(all_ids))
    finally:
        store.close()
    by_worker: dict[object, int] = defaultdict(int)
    for s, _, _ in commits:
        by_worker[s] += 1
    assert sum(by_worker.values()) == len(commits) > 0
