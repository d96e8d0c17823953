"""Deciding which memory goes when a scope has more than its cap. Pure code.

The model gets the decision prompt (:data:`DECISION_PROMPT`, verbatim,
with the real counts) and answers ``{"action": "delete" | "edit",
"targetMemoryId": <id>, "newContent": "...", "reason": "..."}``.
:func:`validate_decision` accepts it only when:

* ``action`` is "delete" or "edit" (any case);
* ``targetMemoryId`` is the id of a memory of **this scope** listed in the
  prompt (an id of another scope or a missing id is refused alike);
* an edit has a new memory to merge, targets another memory, and carries
  ``newContent`` that is non-empty text of at most
  :data:`~engram.memories.records.MAX_CONTENT_CHARS` characters;
* ``reason``, when given, is text.

Meaning: *delete* removes the target (it may be the new memory itself, when
it adds nothing); *edit* replaces the target's content with ``newContent``
(the merge) and removes the new memory, which the merge absorbed. Either
way exactly one memory goes and nothing else changes. Anything refused, an
LLM error or a timeout falls back to :func:`fifo_decision`: delete the oldest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from engram.errors import InvalidQuery, LLMBadResponse
from engram.memories.records import check_content
from engram.models import JSON, MemoryRecord

DECISION_PROMPT = """You are a memory management assistant. You have {count} memories but can only keep {cap}.

Analyze these memories and decide which ONE to either:
1. DELETE (remove entirely)
2. EDIT (merge with another or update content)

Existing memories:
{existing}

New memory:
{new}

Decision format:
{{
  "action": "delete" | "edit",
  "targetMemoryId": <id>,
  "newContent": "<merged content if editing>",
  "reason": "<explanation>"
}}"""  # noqa: E501 (the prompt, verbatim)

#: Answer cap of the decision call, in tokens (a merged memory and a reason).
MAX_DECISION_TOKENS = 400
#: Characters of a reason kept in the audit trail.
MAX_REASON_CHARS = 500

Action = Literal["delete", "edit"]


@dataclass(frozen=True, slots=True)
class Decision:
    """One compaction step: what to do, to which memory, and why.

    ``source`` is "llm" or "fifo"; ``fallback`` is True when FIFO replaced a
    model decision that failed, with ``error`` saying what failed.
    """

    action: Action
    target_id: int
    reason: str
    source: Literal["llm", "fifo"]
    new_content: str | None = None
    fallback: bool = False
    error: str | None = None


def decision_messages(
    memories: Sequence[MemoryRecord], new_memory: MemoryRecord | None, cap: int
) -> list[dict[str, str]]:
    """The chat request of a decision: the prompt with every memory and its id."""
    existing = [m for m in memories if new_memory is None or m.id != new_memory.id]
    prompt = DECISION_PROMPT.format(
        count=len(memories),
        cap=cap,
        existing="\n".join(_line(m) for m in existing) or "(none)",
        new=_line(new_memory) if new_memory is not None else "(none)",
    )
    return [{"role": "user", "content": prompt}]


def validate_decision(
    data: Mapping[str, Any], memories: Sequence[MemoryRecord], new_memory: MemoryRecord | None
) -> Decision:
    """The model's decision, if it is valid for exactly these memories of this scope.

    Raises:
        LLMBadResponse: the decision is invalid; the message says why.

    """
    action = data.get("action")
    if not isinstance(action, str) or action.strip().lower() not in ("delete", "edit"):
        raise LLMBadResponse(f"decision action must be 'delete' or 'edit', got {action!r}")
    verb: Action = "delete" if action.strip().lower() == "delete" else "edit"
    target = _as_id(data.get("targetMemoryId"))
    ids = {m.id for m in memories}
    if target is None or target not in ids:
        raise LLMBadResponse(
            f"decision targets memory {data.get('targetMemoryId')!r}, which is not a memory"
            " of this scope"
        )
    reason = data.get("reason", "")
    if not isinstance(reason, str):
        raise LLMBadResponse(f"decision reason must be text, got {type(reason).__name__}")
    content: str | None = None
    if verb == "edit":
        if new_memory is None:
            raise LLMBadResponse("decision edits, but there is no new memory to merge")
        if target == new_memory.id:
            raise LLMBadResponse("decision edits the new memory itself, which removes nothing")
        try:
            content = check_content(data.get("newContent"))
        except InvalidQuery as exc:
            raise LLMBadResponse(f"decision edit has unusable newContent: {exc}") from None
    return Decision(
        action=verb,
        target_id=target,
        reason=reason.strip()[:MAX_REASON_CHARS] or "(no reason given)",
        source="llm",
        new_content=content,
    )


def fifo_decision(memories: Sequence[MemoryRecord], *, error: str | None = None) -> Decision:
    """Delete the oldest memory (by creation time, then id). ``error``: why FIFO replaced the LLM.

    Raises:
        ValueError: no memories (a programming error: nothing to compact).

    """
    if not memories:
        raise ValueError("FIFO compaction of an empty scope")
    oldest = min(memories, key=lambda m: (m.created_at, m.id))
    reason = "FIFO: delete the oldest memory"
    if error:
        reason += f" (fallback: {error})"
    return Decision(
        action="delete",
        target_id=oldest.id,
        reason=reason[:MAX_REASON_CHARS],
        source="fifo",
        fallback=error is not None,
        error=error,
    )


def audit_event(
    decision: Decision, *, new_memory: MemoryRecord | None, before: int, after: int, cap: int
) -> JSON:
    """The audit-trail entry of one applied compaction step."""
    event: JSON = {
        "event": "compaction",
        "action": decision.action,
        "target": decision.target_id,
        "source": decision.source,
        "fallback": decision.fallback,
        "reason": decision.reason,
        "new_memory": new_memory.id if new_memory is not None else None,
        "count_before": before,
        "count_after": after,
        "cap": cap,
    }
    if decision.new_content is not None:
        event["new_content"] = decision.new_content
    if decision.error:
        event["error"] = decision.error[:MAX_REASON_CHARS]
    return event


def _line(memory: MemoryRecord) -> str:
    day = memory.created_at.date().isoformat()
    return f"- id {memory.id} [Created: {day}]: {' '.join(memory.content.split())}"


def _as_id(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None
