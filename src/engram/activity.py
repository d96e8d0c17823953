"""What happened to a session or a scope: compactions run and prompts sent.

Read-only roll-ups for people (the dashboard, stats): each session's
compaction state gives its committed compactions and summary version, and
its prompt log (:mod:`engram.prompt_log`) the tokens sent against the full
history's size. A scope's activity adds up its sessions', read a page of
sessions at a time through the :class:`~engram.store.base.Store` protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engram.compaction.cycle import load_compaction_state
from engram.prompt_log import PromptLog, load_prompt_log
from engram.scopes import all_sessions
from engram.store.base import Store

__all__ = ["Activity", "scope_activity", "session_activity"]


@dataclass(frozen=True, slots=True)
class Activity:
    """Compactions committed and prompts recorded, for one session or a whole scope.

    Attributes:
        compactions: Committed compaction cycles.
        summary_version: The summary's version (a session's; a scope's highest).
        prompts: The prompt log (a scope's holds totals only).

    """

    compactions: int = 0
    summary_version: int = 0
    prompts: PromptLog = field(default_factory=PromptLog)

    def merge(self, other: Activity) -> Activity:
        """The activity of both (for a scope)."""
        return Activity(
            compactions=self.compactions + other.compactions,
            summary_version=max(self.summary_version, other.summary_version),
            prompts=self.prompts.merge(other.prompts),
        )


def session_activity(store: Store, scope: str, session: str) -> Activity:
    """One session's compactions and prompt log."""
    state = load_compaction_state(store, scope, session)[0]
    return Activity(
        compactions=state.compactions,
        summary_version=state.summary_version,
        prompts=load_prompt_log(store, scope, session),
    )


def scope_activity(store: Store, scope: str) -> Activity:
    """The activity of every session of ``scope``, added up."""
    total = Activity()
    for info in all_sessions(store, scope):
        total = total.merge(session_activity(store, scope, info.id))
    return total
