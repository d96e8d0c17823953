"""Seed 002's agent state on a session, and seed 002's compaction example with ``agent_state``."""

from __future__ import annotations

import threading
import time

import pytest

from engram import agent_state as A
from engram.engine import Engram
from engram.errors import ConfigError


def test_seed_002_compaction_example(mem: Engram) -> None:
    # 52 entries: "Message 1" / "Response 1" ... over the 50-entry trigger.
    chat = mem.session("user:agent:123", policy="agent_state")
    for i in range(1, 27):
        chat.add("user", f"Message {i}")
        chat.add("assistant", f"Response {i}")
    assert chat.stats()["total_messages"] == 52
    result = chat.compact()
    assert result.committed and result.reason == "messages"
    assert result.folded == 22  # "take the oldest (len - 30) entries"
    ctx = chat.context()
    assert len(ctx.message_ids) == 30
    assert ctx.messages[-30]["content"] == "Message 12"
    assert ctx.messages[-1]["content"] == "Response 26"
    assert "CONVERSATION SUMMARY" in ctx.sections
    state = chat.compaction_state()
    assert "Message 1" in state.summary
    assert len(chat.messages(limit=100)) == 52  # every entry still stored
    # Under the trigger again: nothing to do.
    assert not chat.compact().committed


def test_update_and_read_agent_state(mem: Engram) -> None:
    chat = mem.session("s", policy="agent_state")
    assert chat.agent_state() == A.AgentState()
    now = int(time.time())
    chat.update_agent_state(lambda s: A.add_facts(s, "User prefers verbose output"))
    chat.update_agent_state(
        lambda s: A.upsert_task(s, "task_001", now=now, description="Monitor", status="Running")
    )
    chat.update_agent_state(lambda s: A.record_tool_call(s, "file_write"))
    chat.update_agent_state(lambda s: A.record_tokens(s, 100, 50))
    chat.update_agent_state(lambda s: A.set_environment(s, now=now, workspace="/home/user/p"))
    chat.update_agent_state(lambda s: A.set_preference(s, "verbosity", "high"))
    state = chat.agent_state()
    assert state.facts == ("User prefers verbose output",)
    assert state.active_tasks[0].status == "running"
    assert state.tool_stats.by_tool == {"file_write": 1}
    assert state.token_usage.by_session == 150
    assert state.last_known_environment["workspace"] == "/home/user/p"
    assert state.preferences == {"verbosity": "high"}
    ctx = mem.session("s").context(policy="agent_state")
    assert ctx.sections == ["AGENT STATE"]
    assert "User prefers verbose output" in ctx.messages[0]["content"]
    with pytest.raises(ConfigError):
        chat.update_agent_state(lambda s: None)  # type: ignore[arg-type,return-value]


def test_concurrent_updates_are_never_lost(mem: Engram) -> None:
    chat = mem.session("s")
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            for i in range(10):
                chat.update_agent_state(lambda s, i=i: A.add_facts(s, f"fact {w}-{i}"))
                chat.update_agent_state(lambda s: A.record_tool_call(s, "echo"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    state = chat.agent_state()
    assert len(state.facts) == 40
    assert state.tool_stats.total_calls == 40


def test_compaction_applies_the_agent_rules(mem: Engram) -> None:
    chat = mem.session("s", policy="agent_state")
    old = int(time.time()) - 2 * 24 * 3600
    stale = A.AgentState(
        facts=("Project uses Rust 1.75", "project uses  rust 1.75", "User speaks English"),
        active_tasks=(
            A.Task("t1", "old done", "completed", 1.0, old, old),
            A.Task("t2", "still running", "running", 0.5, old, old),
            A.Task("t3", "recent done", "completed", 1.0, old, int(time.time())),
        ),
    )
    mem.store.save_state("default", "s", A.AGENT_STATE_KIND, stale.to_dict(), expected_version=0)
    chat.add("user", "hi")
    chat.compact()  # nothing folded, but seed 002's rules still run
    state = chat.agent_state()
    assert state.facts == ("Project uses Rust 1.75", "User speaks English")
    assert [t.id for t in state.active_tasks] == ["t2", "t3"]
