"""The agent state: facts, tasks, tool stats, token usage, environment, preferences.

Pure values and functions: every update returns a new :class:`AgentState`;
the engine stores ``state.to_dict()`` as the session's ``"agent_state"``
document (compare-and-set, like the compaction state).

Compaction rules, applied by :func:`compact_agent_state`:

* facts are de-duplicated. The seed sorts and removes duplicates; Engram
  keeps the *first* occurrence in insertion order instead (compared case- and
  whitespace-insensitively), so the list stays chronological and the newest
  facts stay at the end, where a prompt builder cuts last. The result is just
  as deterministic.
* tasks: running (and pending) tasks are kept; finished tasks (completed,
  failed, cancelled) are kept while updated less than 24 h ago, then pruned.

Timestamps are Unix seconds (integers), as in the seed's JSON.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engram.errors import InvalidQuery
from engram.models import AGENT_STATE_KIND as AGENT_STATE_KIND  # still importable from here
from engram.models import JSON

log = logging.getLogger(__name__)

#: Finished tasks are pruned this many seconds after their last update.
TASK_RETENTION_SECONDS = 24 * 3600
#: Task statuses (stored lowercase; the seed's "Running"/"Completed" are accepted).
TASK_STATUSES = ("pending", "running", "completed", "failed", "cancelled")
#: Statuses after which a task only waits to be pruned.
FINISHED_STATUSES = frozenset({"completed", "failed", "cancelled"})
#: Most facts kept; the oldest go first (a runaway agent must not grow the prompt forever).
MAX_FACTS = 500


@dataclass(frozen=True, slots=True)
class Task:
    """One active task of the agent."""

    id: str
    description: str
    status: str = "pending"
    progress: float = 0.0
    created_at: int = 0
    updated_at: int = 0

    def to_dict(self) -> JSON:
        """JSON-ready form."""
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class ToolStats:
    """Counts of tool calls."""

    total_calls: int = 0
    by_tool: dict[str, int] = field(default_factory=dict)
    failures: int = 0


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Tokens used by the agent; ``by_session`` is this session's total (input + output)."""

    total_input: int = 0
    total_output: int = 0
    by_session: int = 0


@dataclass(frozen=True, slots=True)
class AgentState:
    """Everything kept about an agent session besides its history."""

    facts: tuple[str, ...] = ()
    active_tasks: tuple[Task, ...] = ()
    tool_stats: ToolStats = field(default_factory=ToolStats)
    token_usage: TokenUsage = field(default_factory=TokenUsage)
    last_known_environment: JSON = field(default_factory=dict)
    preferences: JSON = field(default_factory=dict)

    def to_dict(self) -> JSON:
        """JSON-ready form (the jsondir document's field names)."""
        return {
            "facts": list(self.facts),
            "active_tasks": [task.to_dict() for task in self.active_tasks],
            "tool_stats": {
                "total_calls": self.tool_stats.total_calls,
                "by_tool": dict(self.tool_stats.by_tool),
                "failures": self.tool_stats.failures,
            },
            "token_usage": dataclasses.asdict(self.token_usage),
            "last_known_environment": dict(self.last_known_environment),
            "preferences": dict(self.preferences),
        }


# -- updates ----------------------------------------------------------------------


def add_facts(state: AgentState, *facts: str) -> AgentState:
    """Append facts (blank ones ignored), then de-duplicate."""
    new = tuple(f.strip() for f in facts if isinstance(f, str) and f.strip())
    return dataclasses.replace(state, facts=dedupe_facts((*state.facts, *new)))


def dedupe_facts(facts: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """First occurrence of each fact, in order (case/whitespace-insensitive), newest MAX_FACTS."""
    seen: set[str] = set()
    out: list[str] = []
    for fact in facts:
        key = " ".join(fact.split()).casefold()
        if key and key not in seen:
            seen.add(key)
            out.append(fact)
    return tuple(out[-MAX_FACTS:])


def upsert_task(
    state: AgentState,
    task_id: str,
    *,
    now: int,
    description: str | None = None,
    status: str | None = None,
    progress: float | None = None,
) -> AgentState:
    """Create or update a task; ``updated_at`` becomes ``now``.

    Raises:
        InvalidQuery: unknown status, progress outside 0..1, or a new task with no description.

    """
    norm = _status(status) if status is not None else None
    if progress is not None and not 0.0 <= progress <= 1.0:
        raise InvalidQuery(f"task progress must be between 0 and 1, got {progress}")
    tasks = list(state.active_tasks)
    for index, task in enumerate(tasks):
        if task.id == task_id:
            tasks[index] = dataclasses.replace(
                task,
                description=description if description is not None else task.description,
                status=norm or task.status,
                progress=progress if progress is not None else task.progress,
                updated_at=now,
            )
            break
    else:
        if not description:
            raise InvalidQuery(f"new task {task_id!r} needs a description")
        tasks.append(Task(task_id, description, norm or "pending", progress or 0.0, now, now))
    return dataclasses.replace(state, active_tasks=tuple(tasks))


def record_tool_call(state: AgentState, tool: str, *, ok: bool = True) -> AgentState:
    """Count one tool call (and a failure when ``ok`` is False)."""
    stats = state.tool_stats
    by_tool = dict(stats.by_tool)
    by_tool[tool] = by_tool.get(tool, 0) + 1
    return dataclasses.replace(
        state,
        tool_stats=ToolStats(stats.total_calls + 1, by_tool, stats.failures + (0 if ok else 1)),
    )


def record_tokens(state: AgentState, input_tokens: int, output_tokens: int) -> AgentState:
    """Add one model call's tokens."""
    if input_tokens < 0 or output_tokens < 0:
        raise InvalidQuery("token counts cannot be negative")
    usage = state.token_usage
    return dataclasses.replace(
        state,
        token_usage=TokenUsage(
            usage.total_input + input_tokens,
            usage.total_output + output_tokens,
            usage.by_session + input_tokens + output_tokens,
        ),
    )


def set_environment(
    state: AgentState,
    *,
    now: int,
    workspace: str | None = None,
    system_snapshot: Mapping[str, Any] | None = None,
    **extra: Any,
) -> AgentState:
    """Record the last known environment (workspace, system snapshot, anything else)."""
    env = dict(state.last_known_environment)
    if workspace is not None:
        env["workspace"] = workspace
    if system_snapshot is not None:
        env["system_snapshot"] = dict(system_snapshot)
    env.update(extra)
    env["last_update"] = now
    return dataclasses.replace(state, last_known_environment=env)


def set_preference(state: AgentState, key: str, value: Any) -> AgentState:
    """Set one preference (None removes it)."""
    prefs = dict(state.preferences)
    if value is None:
        prefs.pop(key, None)
    else:
        prefs[key] = value
    return dataclasses.replace(state, preferences=prefs)


# -- compaction -------------------------------------------------------------------


def prune_tasks(
    tasks: tuple[Task, ...], *, now: int, max_age: int = TASK_RETENTION_SECONDS
) -> tuple[Task, ...]:
    """Drop finished tasks last updated ``max_age`` seconds or more before ``now``."""
    cutoff = now - max_age
    return tuple(t for t in tasks if t.status not in FINISHED_STATUSES or t.updated_at > cutoff)


def compact_agent_state(state: AgentState, *, now: int) -> tuple[AgentState, bool]:
    """The rules: de-duplicate facts, prune old finished tasks.

    Returns the new state and whether anything changed.
    """
    facts = dedupe_facts(state.facts)
    tasks = prune_tasks(state.active_tasks, now=now)
    changed = facts != state.facts or tasks != state.active_tasks
    return dataclasses.replace(state, facts=facts, active_tasks=tasks), changed


# -- reading ----------------------------------------------------------------------


def parse_agent_state(data: Any) -> AgentState:
    """Read a stored document; unusable parts are dropped with a warning (never raises)."""
    if data is None:
        return AgentState()
    if not isinstance(data, Mapping):
        log.warning("agent state is %s, not an object; resetting", type(data).__name__)
        return AgentState()
    facts = data.get("facts") or []
    tasks: list[Task] = []
    for raw in data.get("active_tasks") or []:
        try:
            tasks.append(
                Task(
                    id=str(raw["id"]),
                    description=str(raw.get("description", "")),
                    status=_status(str(raw.get("status", "pending"))),
                    progress=float(raw.get("progress", 0.0)),
                    created_at=int(raw.get("created_at", 0)),
                    updated_at=int(raw.get("updated_at", 0)),
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError, InvalidQuery) as exc:
            log.warning("agent state: dropped an unreadable task %r (%s)", raw, exc)
    stats = _mapping(data.get("tool_stats"))
    usage = _mapping(data.get("token_usage"))
    by_tool = _mapping(stats.get("by_tool"))
    return AgentState(
        facts=dedupe_facts([f for f in facts if isinstance(f, str)])
        if isinstance(facts, list)
        else (),
        active_tasks=tuple(tasks),
        tool_stats=ToolStats(
            _int(stats.get("total_calls")),
            {str(k): _int(v) for k, v in by_tool.items()},
            _int(stats.get("failures")),
        ),
        token_usage=TokenUsage(
            _int(usage.get("total_input")),
            _int(usage.get("total_output")),
            _int(usage.get("by_session")),
        ),
        last_known_environment=dict(_mapping(data.get("last_known_environment"))),
        preferences=dict(_mapping(data.get("preferences"))),
    )


def _status(status: str) -> str:
    norm = status.strip().lower()
    if norm not in TASK_STATUSES:
        raise InvalidQuery(f"unknown task status {status!r}; known: {', '.join(TASK_STATUSES)}")
    return norm


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
