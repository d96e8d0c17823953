"""Scale-out: two `engram serve` processes on one PostgreSQL serve the same scopes consistently.

Appends go through both servers at once, prompts asked from both enqueue
compaction jobs that either server's worker runs, conversations end through
both (their memories are jobs too). Afterwards: every message stored exactly
once, a compaction committed, and the scope's memories at the cap, not above.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from tests.server.live import LiveServer

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SCOPE = "fleet"
WRITERS = 4
APPENDS = 25  # per writer, two messages each
ENDED = 6  # conversations ended (memories) with a cap of 4
CAP = 4


def _jobs_left(http: httpx.Client) -> int:
    text = http.get("/metrics").text
    left = 0
    for line in text.splitlines():
        if line.startswith(('engram_jobs{status="pending"}', 'engram_jobs{status="running"}')):
            left += int(float(line.split()[-1]))
    return left


def _write(base_urls: list[str], writer: int) -> list[str]:
    sent = []
    with httpx.Client(timeout=60) as http:
        for turn in range(APPENDS):
            base = base_urls[(writer + turn) % 2]  # alternate servers
            texts = [f"writer {writer} turn {turn} question", f"writer {writer} turn {turn} answer"]
            batch = [
                {"role": "user", "content": texts[0]},
                {"role": "assistant", "content": texts[1]},
            ]
            answer = http.post(
                f"{base}/v1/scopes/{SCOPE}/sessions/shared/messages", json={"messages": batch}
            )
            assert answer.status_code == 201, answer.text
            sent += texts
            if turn % 5 == 4:  # a prompt from either server enqueues a compaction job
                ctx = http.post(
                    f"{base}/v1/scopes/{SCOPE}/sessions/shared/context", json={"budget": 4000}
                )
                assert ctx.status_code == 200, ctx.text
    return sent


def _history(http: httpx.Client) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    after = None
    while True:
        params: dict[str, Any] = {"limit": 200}
        if after is not None:
            params["after"] = after
        page = http.get(f"/v1/scopes/{SCOPE}/sessions/shared/messages", params=params).json()
        messages += page["messages"]
        after = page["next_after"]
        if after is None:
            return messages


def test_two_servers_on_one_postgresql(request: pytest.FixtureRequest) -> None:
    from tests.pg import fresh_postgres_url

    url = fresh_postgres_url(request)
    env = {"ENGRAM_MEMORY_CAP": str(CAP)}
    with LiveServer(url, env=env) as first, LiveServer(url, env=env) as second:
        bases = [first.base_url, second.base_url]
        with httpx.Client(base_url=first.base_url, timeout=60) as http:
            made = http.put(f"/v1/scopes/{SCOPE}/sessions/shared", json={"policy": "agent_state"})
            assert made.status_code == 200
            with ThreadPoolExecutor(WRITERS) as pool:
                sent = [
                    t
                    for batch in pool.map(_write, [bases] * WRITERS, range(WRITERS))
                    for t in batch
                ]
            for index in range(ENDED):
                base = bases[index % 2]
                words = f"topic{index} alpha{index} beta{index} gamma{index} delta{index}"
                session = f"{base}/v1/scopes/{SCOPE}/sessions/chat-{index}"
                http.post(
                    f"{session}/messages", json={"role": "user", "content": f"Decide {words}"}
                )
                http.post(
                    f"{session}/messages", json={"role": "assistant", "content": f"Agreed: {words}"}
                )
                assert http.post(f"{session}/end", json={}).status_code == 202
            deadline = time.monotonic() + 90
            while _jobs_left(http) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert _jobs_left(http) == 0

            with httpx.Client(base_url=second.base_url, timeout=60) as other:
                stored = _history(other)
            contents = [m["content"] for m in stored]
            assert len(contents) == len(set(contents)) == WRITERS * APPENDS * 2  # none twice
            assert set(contents) == set(sent)  # none lost
            ids = [m["id"] for m in stored]
            assert ids == sorted(ids)
            state = http.get(f"/v1/scopes/{SCOPE}/sessions/shared/compaction").json()
            assert state["watermark"] > 0 and state["compactions"] >= 1
            memories = http.get(f"/v1/scopes/{SCOPE}/memories").json()["memories"]
            assert len(memories) == CAP
