"""Receipts of forgetting: what a deletion removed, and what became of everything derived from it.

Every deletion (a message, a cleared session, a forgotten scope, a memory)
returns a :class:`Receipt`: the messages removed, and one :class:`Derived`
line for each thing that was made from stored messages (summary and important
data, agent-state entries, tool-cache entries, memories, vectors, search-index
rows) saying what happened to it:

* :data:`REBUILT`: made again from what remains (before the call returned);
* :data:`PENDING`: marked stale, rebuilt from what remains at the next turn;
* :data:`REMOVED`: it held the forgotten text and is gone;
* :data:`UNCHANGED`: it did not use the forgotten messages;
* :data:`FAILED`: it could not be changed (other writers kept changing it): the
  detail says what to do.

A receipt never holds the forgotten text: ``to_dict`` (what the audit trail,
REST and the CLI show) names things by ids, versions and counts only. The
library also hands back the removed :class:`~engram.models.Message` objects
(``messages``), as the deletion verbs always did.

Pure values; :mod:`engram.forgetting` writes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engram.compaction.citations import from_ids, to_json
from engram.models import JSON, Message

REBUILT = "rebuilt"
PENDING = "rebuild pending"
REMOVED = "removed"
UNCHANGED = "unchanged"
FAILED = "failed"
#: Outcomes, in the order a receipt lists them.
OUTCOMES = (REMOVED, REBUILT, PENDING, UNCHANGED, FAILED)

# What a line is about.
SUMMARY = "summary"
IMPORTANT_DATA = "important_data"
AGENT_STATE = "agent_state"
TOOL_CACHE = "tool_cache"
MEMORY = "memory"
VECTORS = "vectors"
SEARCH_INDEX = "search_index"
SESSION = "session"
#: Kinds, in the order a receipt lists them.
KINDS = (SUMMARY, IMPORTANT_DATA, AGENT_STATE, TOOL_CACHE, MEMORY, VECTORS, SEARCH_INDEX, SESSION)


@dataclass(frozen=True, slots=True)
class Derived:
    """One thing made from stored messages, and what the deletion did to it.

    Attributes:
        kind: What it is (:data:`KINDS`).
        ref: Which one, by id or version (``"version 4"``, ``"memory 12"``), never its text.
        outcome: :data:`REBUILT`, :data:`PENDING`, :data:`REMOVED`, :data:`UNCHANGED`
            or :data:`FAILED`.
        detail: Why, in words.

    """

    kind: str
    ref: str
    outcome: str
    detail: str = ""

    def to_dict(self) -> JSON:
        """Plain JSON-ready data."""
        return {"kind": self.kind, "ref": self.ref, "outcome": self.outcome, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Receipt:
    """What one deletion removed and what happened to everything derived from it.

    Attributes:
        action: The deletion: ``delete``, ``clear``, ``forget_scope``, ``memory_delete``,
            or an edit verb (``pop_answer``, ``edit``...).
        scope: The scope.
        session: The session (None for a scope or a memory).
        message_ids: The removed messages' ids, oldest first.
        derived: One line per derived thing, in :data:`KINDS` order.
        rebuilt: The caller asked for rebuilds before returning (``rebuild=True``).
        counts: For a forgotten scope: how many sessions, messages and memories went.
        messages: The removed messages themselves (library only, never serialized).

    """

    action: str
    scope: str
    session: str | None
    message_ids: tuple[int, ...] = ()
    derived: tuple[Derived, ...] = ()
    rebuilt: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    messages: tuple[Message, ...] = field(default=(), compare=False, repr=False)

    @property
    def message_count(self) -> int:
        """How many messages the deletion removed."""
        return self.counts.get("messages", len(self.message_ids))

    def of(self, kind: str) -> list[Derived]:
        """The lines about one kind of derived thing."""
        return [line for line in self.derived if line.kind == kind]

    def to_dict(self) -> JSON:
        """Plain JSON-ready data, without any message text (the audit trail keeps this)."""
        out: JSON = {
            "action": self.action,
            "scope": self.scope,
            "session": self.session,
            "message_count": self.message_count,
            "messages": to_json(from_ids(self.message_ids)),
            "derived": [line.to_dict() for line in self.derived],
            "rebuilt": self.rebuilt,
        }
        if self.counts:
            out["counts"] = dict(self.counts)
        return out


def ordered(lines: list[Derived]) -> tuple[Derived, ...]:
    """Lines in :data:`KINDS` order (stable inside a kind)."""
    rank = {kind: index for index, kind in enumerate(KINDS)}
    return tuple(sorted(lines, key=lambda line: rank.get(line.kind, len(KINDS))))


__all__ = [
    "AGENT_STATE",
    "FAILED",
    "IMPORTANT_DATA",
    "KINDS",
    "MEMORY",
    "OUTCOMES",
    "PENDING",
    "REBUILT",
    "REMOVED",
    "SEARCH_INDEX",
    "SESSION",
    "SUMMARY",
    "TOOL_CACHE",
    "UNCHANGED",
    "VECTORS",
    "Derived",
    "Receipt",
    "ordered",
]
