"""Two conversations of one scope ending at once leave exactly N memories and a clean audit."""

from __future__ import annotations

import re
import threading

import engram
from engram.background.local import MemoryWorker, end_session
from engram.engine import Engram
from engram.llm import LLMClient
from engram.memories import Memories
from engram.testing import FakeLLMServer, FakeResponse, RecordedRequest

from .helpers import DECISION_MARK, converse, fill, listed_ids, prompt_of

_TOPIC = re.compile(r"user: My favourite (\w+) is (\w+)\.")


def slow_responder(request: RecordedRequest) -> FakeResponse:
    """Distinct memories per conversation, decisions deleting the oldest; both a bit slow."""
    prompt = prompt_of(request)
    if prompt.startswith(DECISION_MARK):
        ids = listed_ids(prompt)
        body = f'{{"action": "delete", "targetMemoryId": {ids[0]}, "reason": "oldest"}}'
        return FakeResponse(content=body, delay=0.05)
    match = _TOPIC.search(prompt)
    assert match, prompt
    return FakeResponse(
        content=f"User's favourite {match.group(1)} is {match.group(2)}.", delay=0.1
    )


class TestConcurrentEnds:
    def test_two_sessions_ending_at_once_leave_exactly_the_cap(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient, worker: MemoryWorker
    ) -> None:
        fake_llm.default = slow_responder
        memories = Memories(mem.store, "app", llm=client, cap=5)
        fill(memories, 5)
        converse(mem, "s1", "app", [("My favourite colour is teal.", "Nice.")])
        converse(mem, "s2", "app", [("My favourite city is Lisbon.", "Lovely.")])
        futures = [
            end_session(memories, "s1", "closed", worker=worker),
            end_session(memories, "s2", "closed", worker=worker),
        ]
        outcomes = [f.result(timeout=30) for f in futures]
        assert [o.status for o in outcomes] == ["created", "created"]
        contents = [m.content for m in memories.list()]
        assert len(contents) == 5
        assert "User's favourite colour is teal." in contents
        assert "User's favourite city is Lisbon." in contents
        audit = list(reversed(memories.audit()))  # oldest first
        compactions = [e for e in audit if e["event"] == "compaction"]
        creates = [e for e in audit if e["event"] == "create"]
        assert len(creates) == 7 and len(compactions) == 2
        # Serialized: every compaction went from cap + 1 to cap, never interleaved.
        assert [(e["count_before"], e["count_after"]) for e in compactions] == [(6, 5), (6, 5)]
        assert len({e["target"] for e in compactions}) == 2

    def test_two_engines_on_one_file_in_threads(self, store_url: str) -> None:
        first, second = engram.open(store_url), engram.open(store_url)
        try:
            fill(Memories(first.store, "app", cap=4), 4)
            for number, handle in enumerate((first, second)):
                converse(handle, f"s{number}", "app", [(f"My team is called Team{number}.", "Ok.")])
            barrier = threading.Barrier(2)
            results = []

            def end(handle: Engram, session: str) -> None:
                barrier.wait()
                results.append(end_session(Memories(handle.store, "app", cap=4), session, "x"))

            threads = [
                threading.Thread(target=end, args=(first, "s0")),
                threading.Thread(target=end, args=(second, "s1")),
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert sorted(r.result().status for r in results) == ["created", "created"]
            assert len(Memories(second.store, "app").list()) == 4
            events = [e for e in second.store.list_audit("app") if e["event"] == "compaction"]
            assert [(e["count_before"], e["count_after"]) for e in events] == [(5, 4), (5, 4)]
        finally:
            first.close()
            second.close()


def test_scope_locks_do_not_accumulate(mem: Engram) -> None:
    import gc

    from engram import named_lock
    from engram.memories import service

    for n in range(200):
        mem.memories(f"scope-{n}").list()
    gc.collect()
    assert not any(key[1].startswith("memories:scope-") for key in list(named_lock._SHARED))
    held = mem.memories("kept")
    assert service.scope_lock(mem.store, "kept").shared is held._lock.shared  # shared while alive
