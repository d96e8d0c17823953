"""When to compact and what to fold: pure planning over stored rows, no I/O.

The engine gives the planner the rows *after the watermark* (the last message
already folded into the summary), the policy, and the current state; the
planner answers with a :class:`CompactionPlan` or None.

Triggers (any of them, whichever the policy sets):

* ``summarize_over_tokens``: system prompt + fixed sections +
  summary + unfolded messages exceed it; keep the newest ``keep_tokens``.
* ``max_history_messages``: more unfolded messages than that;
  keep the newest ``keep_messages`` ("take the oldest len - 30 entries").
* ``max_exchanges``: more exchanges than that; keep that many.
* ``fold_over_tokens``: unfolded messages exceed it; fold the
  oldest half. Checked after the rules above, as the seed's flowchart does.

The keep window is the newest suffix that satisfies every keep limit the
policy sets, cut only at group boundaries: an assistant message with
``tool_calls`` and the tool results that follow it are one group, never split.
The window always keeps at least the newest group. Everything before the
window and after the watermark is folded: on the first cycle that is all the
history before the window; later cycles fold only what is new since the
watermark (the summarizer folds it together with the previous summary).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from engram.models import Message


class PlannerPolicy(Protocol):
    """The policy fields the planner reads (``engram.policy.Policy`` has them all)."""

    @property
    def summarize_over_tokens(self) -> int | None: ...  # noqa: D102
    @property
    def keep_tokens(self) -> int | None: ...  # noqa: D102
    @property
    def max_history_messages(self) -> int | None: ...  # noqa: D102
    @property
    def keep_messages(self) -> int | None: ...  # noqa: D102
    @property
    def fold_over_tokens(self) -> int | None: ...  # noqa: D102
    @property
    def max_exchanges(self) -> int | None: ...  # noqa: D102


@dataclass(frozen=True, slots=True)
class Row:
    """What the planner needs of one stored message."""

    id: int
    role: str
    tokens: int
    has_tool_calls: bool = False
    tool_call_id: str | None = None

    @classmethod
    def from_message(cls, message: Message) -> Row:
        """Build the planning row of a stored message."""
        return cls(
            id=message.id,
            role=message.role,
            tokens=message.tokens,
            has_tool_calls=bool(message.tool_calls),
            tool_call_id=message.tool_call_id,
        )


@dataclass(frozen=True, slots=True)
class PlanState:
    """The parts of the compaction state the planner needs.

    Attributes:
        watermark: Id of the last message folded into the summary (0: none).
        summary_version: Version of the current summary (0: no summary yet).
        summary_tokens: Tokens of the summary section as the prompt shows it.
        fixed_tokens: Tokens of the system prompt and the other fixed sections
            (important data, memories) as the prompt shows them.

    """

    watermark: int = 0
    summary_version: int = 0
    summary_tokens: int = 0
    fixed_tokens: int = 0


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What one compaction cycle folds.

    Attributes:
        fold_ids: Ids of the messages to fold, oldest first (all after the old watermark).
        new_watermark: The last folded id: the watermark to commit.
        keep_from_id: First id of the kept window (None if nothing is left after it).
        reason: Which trigger fired: "tokens", "messages", "exchanges" or
            "fold_half" (several joined by "+").
        first_cycle: True when there is no summary yet.
        next_version: Summary version the fold produces.
        fold_tokens: Tokens of the folded messages.
        keep_tokens: Tokens of the kept window.

    """

    fold_ids: tuple[int, ...]
    new_watermark: int
    keep_from_id: int | None
    reason: str
    first_cycle: bool
    next_version: int
    fold_tokens: int
    keep_tokens: int


def rows_from_messages(messages: Iterable[Message]) -> list[Row]:
    """Planning rows of stored messages, in order."""
    return [Row.from_message(m) for m in messages]


def group_starts(rows: Sequence[Row]) -> list[int]:
    """Return the indexes where a group may start.

    Every message starts a group except tool results, which belong to the
    assistant message with tool calls before them (or to another such result).

    A tool result with no assistant call before it (an orphan) also stays with
    whatever precedes it, so no cut ever lands on a tool result.
    """
    return [i for i, row in enumerate(rows) if i == 0 or not _is_tool_result(row)]


def _is_tool_result(row: Row) -> bool:
    return row.role == "tool" or (row.tool_call_id is not None and row.role != "assistant")


def count_exchanges(rows: Sequence[Row]) -> int:
    """Count exchanges: one per user message.

    Messages before the first user message belong to the first exchange.
    """
    users = sum(1 for row in rows if row.role == "user")
    if users == 0:
        return 1 if rows else 0
    return users


def trigger_reasons(
    policy: PlannerPolicy, rows: Sequence[Row], state: PlanState = PlanState()
) -> list[str]:
    """List the triggers that fire for ``rows`` (the unfolded messages), in check order."""
    rows = _after(rows, state.watermark)
    reasons: list[str] = []
    history = sum(row.tokens for row in rows)
    if policy.summarize_over_tokens is not None:
        total = state.fixed_tokens + state.summary_tokens + history
        if total > policy.summarize_over_tokens:
            reasons.append("tokens")
    if policy.max_history_messages is not None and len(rows) > policy.max_history_messages:
        reasons.append("messages")
    if policy.max_exchanges is not None and count_exchanges(rows) > policy.max_exchanges:
        reasons.append("exchanges")
    if policy.fold_over_tokens is not None and history > policy.fold_over_tokens:
        reasons.append("fold_half")
    return reasons


def should_compact(
    policy: PlannerPolicy, rows: Sequence[Row], state: PlanState = PlanState()
) -> bool:
    """Tell whether a trigger fires and there is something to fold."""
    return plan_compaction(policy, rows, state) is not None


def plan_compaction(
    policy: PlannerPolicy, rows: Sequence[Row], state: PlanState = PlanState()
) -> CompactionPlan | None:
    """Plan the fold of one cycle; None when no trigger fires or nothing can be folded.

    Args:
        policy: Supplies triggers and keep limits.
        rows: The session's messages after the watermark, oldest first (rows
            at or before ``state.watermark`` are ignored).
        state: Watermark, summary version and the fixed token costs.

    """
    rows = _after(rows, state.watermark)
    reasons = trigger_reasons(policy, rows, state)
    if not rows or not reasons:
        return None
    starts = group_starts(rows)
    start = 0
    if any(r in reasons for r in ("tokens", "messages", "exchanges")):
        start = _keep_start(policy, rows, starts, state)
    if policy.fold_over_tokens is not None:
        kept = rows[start:]
        if sum(row.tokens for row in kept) > policy.fold_over_tokens:
            # The agent runtime: "take the oldest 50% of entries".
            start = _snap(start + len(kept) // 2, starts)
            if "fold_half" not in reasons:
                reasons.append("fold_half")
    start = min(start, starts[-1])  # keep at least the newest group
    if start <= 0:
        return None
    folded, kept = rows[:start], rows[start:]
    return CompactionPlan(
        fold_ids=tuple(row.id for row in folded),
        new_watermark=folded[-1].id,
        keep_from_id=kept[0].id if kept else None,
        reason="+".join(reasons),
        first_cycle=state.summary_version == 0,
        next_version=state.summary_version + 1,
        fold_tokens=sum(row.tokens for row in folded),
        keep_tokens=sum(row.tokens for row in kept),
    )


#: Share of the token threshold left free after a fold, for the next messages.
HEADROOM = 0.3


def _after(rows: Sequence[Row], watermark: int) -> Sequence[Row]:
    if rows and rows[0].id <= watermark:
        return [row for row in rows if row.id > watermark]
    return rows


def _keep_limit(policy: PlannerPolicy, state: PlanState) -> int | None:
    """Tokens the kept window may hold.

    ``keep_tokens``, lowered when the fixed parts (system prompt, important
    data, summary) already take most of the token threshold: otherwise the
    next turn would be over the threshold again and every turn would compact.
    What stays free is :data:`HEADROOM` of the threshold, room for new messages.
    """
    limit = policy.keep_tokens
    threshold = policy.summarize_over_tokens
    if threshold is not None:
        room = threshold - state.fixed_tokens - state.summary_tokens - int(threshold * HEADROOM)
        limit = room if limit is None else min(limit, room)
    return None if limit is None else max(limit, 0)


def _keep_start(
    policy: PlannerPolicy, rows: Sequence[Row], starts: list[int], state: PlanState
) -> int:
    """Index of the first kept row: the largest suffix within every keep limit."""
    n = len(rows)
    start = 0
    keep_tokens = _keep_limit(policy, state)
    if keep_tokens is not None:
        total = 0
        index = n
        while index > 0 and total + rows[index - 1].tokens <= keep_tokens:
            index -= 1
            total += rows[index].tokens
        start = max(start, index)
    if policy.keep_messages is not None:
        start = max(start, n - policy.keep_messages)
    if policy.max_exchanges is not None:
        users = [i for i, row in enumerate(rows) if row.role == "user"]
        if len(users) > policy.max_exchanges:
            start = max(start, users[-policy.max_exchanges])
    return _snap(start, starts)


def _snap(index: int, starts: list[int]) -> int:
    """Return the first group start at or after ``index`` (shrinks the window, never splits)."""
    for start in starts:
        if start >= index:
            return start
    return starts[-1]
