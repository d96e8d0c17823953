"""Durability and concurrency probes, bounded: kill -9 a writer, run four writers at once.

After each, every message whose ``add`` returned is stored exactly once, in
order, with its text intact, and the store opens and serves a prompt.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import engram

WORKER = Path(__file__).with_name("writer_worker.py")
KILL_ROUNDS = 3
WRITERS = 4
PER_WRITER = 24

pytestmark = pytest.mark.slow


def _start(durable_url: str, name: str, count: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, str(WORKER), durable_url, name, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def _acks(process: subprocess.Popen[str], *, until: int | None = None) -> list[str]:
    """Read acknowledged messages; kill -9 the writer after ``until`` of them."""
    assert process.stdout is not None
    acked: list[str] = []
    for line in process.stdout:
        if line.startswith("ack "):
            acked.append(line[4:].strip())
            if until is not None and len(acked) >= until:
                process.send_signal(signal.SIGKILL)
                break
    process.wait(timeout=60)
    process.stdout.close()
    return acked


def _stored(durable_url: str) -> dict[str, list[str]]:
    with engram.open(durable_url, llm=None) as mem:
        out = {}
        for info in mem.sessions("probe", limit=1000):
            messages = mem.session(info.id, scope="probe").messages(limit=1000)
            ids = [m.id for m in messages]
            assert ids == sorted(set(ids)), "ids repeat or go backwards"
            out[info.id] = [m.content for m in messages]
            assert mem.session(info.id, scope="probe").context(budget=2000).tokens <= 2000
        return out


def _check(acked: list[str], stored: dict[str, list[str]]) -> None:
    everything = [text for texts in stored.values() for text in texts]
    assert len(everything) == len(set(everything)), "a message is stored twice"
    missing = set(acked) - set(everything)
    assert not missing, f"acknowledged but lost: {sorted(missing)[:5]}"
    for texts in stored.values():  # each writer's messages keep their order
        for writer in {t.split()[0] for t in texts}:
            mine = [int(t.split()[1]) for t in texts if t.split()[0] == writer]
            assert mine == sorted(mine)


@pytest.fixture
def durable_url(store_url: str) -> str:
    if store_url.startswith("memory://"):
        pytest.skip("the in-memory store lives in one process")
    return store_url


def test_kill_9_loses_no_acknowledged_message(durable_url: str, tmp_path: Path) -> None:
    acked: list[str] = []
    for round_ in range(KILL_ROUNDS):
        writer = _start(durable_url, f"w{round_}", 500)
        acked += _acks(writer, until=5 + 7 * round_)
        _check(acked, _stored(durable_url))
    if durable_url.startswith("jsondir://"):
        root = Path(durable_url.removeprefix("jsondir://"))
        assert not list(root.rglob("*.tmp")), "a temporary file survived the reopen"


def test_four_writer_processes_at_once(durable_url: str) -> None:
    started = time.monotonic()
    writers = [_start(durable_url, f"p{i}", PER_WRITER) for i in range(WRITERS)]
    acked = [text for writer in writers for text in _acks(writer)]
    assert all(writer.returncode == 0 for writer in writers)
    assert len(acked) == WRITERS * PER_WRITER
    stored = _stored(durable_url)
    _check(acked, stored)
    assert len(stored["shared"]) == WRITERS * PER_WRITER // 2
    assert time.monotonic() - started < 60
