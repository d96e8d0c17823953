from __future__ import annotations

import pytest

from engram.agent_state import (
    AgentState,
    add_facts,
    compact_agent_state,
    parse_agent_state,
    record_tokens,
    record_tool_call,
    set_environment,
    set_preference,
    upsert_task,
)
from engram.errors import InvalidQuery

NOW = 1_708_654_321
DAY = 86_400


def test_facts_deduplicated_in_order():
    state = add_facts(AgentState(), "Project uses Rust 1.75", "User prefers verbose output")
    state = add_facts(state, "project uses  rust 1.75", "", "New fact")
    assert state.facts == ("Project uses Rust 1.75", "User prefers verbose output", "New fact")


def test_task_pruning_with_fixed_now():
    state = AgentState()
    state = upsert_task(state, "old-done", description="a", status="Completed", now=NOW - DAY - 1)
    state = upsert_task(state, "fresh-done", description="b", status="completed", now=NOW - 3600)
    state = upsert_task(state, "old-running", description="c", status="Running", now=NOW - 10 * DAY)
    state = upsert_task(state, "exactly-24h", description="d", status="completed", now=NOW - DAY)
    compacted, changed = compact_agent_state(state, now=NOW)
    assert changed
    assert [t.id for t in compacted.active_tasks] == ["fresh-done", "old-running"]
    again, changed_again = compact_agent_state(compacted, now=NOW)
    assert again == compacted and not changed_again


def test_task_updates():
    state = upsert_task(AgentState(), "t1", description="Monitor", now=100)
    state = upsert_task(state, "t1", status="running", progress=0.5, now=200)
    (task,) = state.active_tasks
    assert (task.status, task.progress, task.created_at, task.updated_at) == (
        "running",
        0.5,
        100,
        200,
    )
    with pytest.raises(InvalidQuery):
        upsert_task(state, "t1", status="exploded", now=300)
    with pytest.raises(InvalidQuery):
        upsert_task(state, "t1", progress=1.5, now=300)
    with pytest.raises(InvalidQuery):
        upsert_task(state, "t2", now=300)


def test_tool_stats_tokens_environment_preferences_roundtrip():
    state = record_tool_call(AgentState(), "file_write")
    state = record_tool_call(state, "file_write", ok=False)
    state = record_tool_call(state, "echo")
    state = record_tokens(state, 100, 40)
    state = record_tokens(state, 10, 5)
    state = set_environment(
        state, now=NOW, workspace="/home/user/project", system_snapshot={"memory_usage_mb": 8192}
    )
    state = set_preference(state, "verbosity", "high")
    data = state.to_dict()
    assert data["tool_stats"] == {
        "total_calls": 3,
        "by_tool": {"file_write": 2, "echo": 1},
        "failures": 1,
    }
    assert data["token_usage"] == {"total_input": 110, "total_output": 45, "by_session": 155}
    assert data["last_known_environment"]["last_update"] == NOW
    assert parse_agent_state(data) == state


def test_parse_tolerates_garbage():
    state = parse_agent_state(
        {
            "facts": "nope",
            "active_tasks": [{"no": "id"}, 3],
            "tool_stats": [],
            "token_usage": {"total_input": -5},
        }
    )
    assert state == AgentState()
    assert parse_agent_state("corrupt") == AgentState()
