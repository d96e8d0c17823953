"""The agent state of a session: read it, update it safely, compact it, show it.

The state itself (facts, active tasks, tool stats, token usage, last known
environment, preferences) and its pure update functions live in
:mod:`engram.agent_state`. This module adds the storage: the
document is the session's ``"agent_state"`` state record, and every update
is a compare-and-set loop (load, apply the caller's function, save with the
version read; on a lost race start again), so concurrent updates from
threads or processes never overwrite each other.

The compaction rules (de-duplicate facts, prune finished tasks older
than 24 h) run whenever the session compacts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from engram.agent_state import (
    AGENT_STATE_KIND,
    AgentState,
    compact_agent_state,
    parse_agent_state,
)
from engram.context import Section
from engram.errors import ConfigError, CorruptedData, StoreError
from engram.policy import Policy
from engram.statedoc import compare_and_set
from engram.store import Store

log = logging.getLogger(__name__)

#: Compare-and-set attempts before an update gives up (each lost race retries).
MAX_UPDATE_ATTEMPTS = 20
#: Title of the prompt section that shows the agent state.
AGENT_STATE_TITLE = "AGENT STATE"
#: Facts shown in the prompt (the newest; all stay stored).
MAX_PROMPT_FACTS = 50


def load_agent_state(store: Store, scope: str, session: str) -> tuple[AgentState, int]:
    """Return the session's agent state and its record version (0: never saved)."""
    try:
        record = store.load_state(scope, session, AGENT_STATE_KIND)
    except CorruptedData as exc:
        raise StoreError(f"agent state of {scope}/{session} cannot be read: {exc}") from exc
    if record is None:
        return AgentState(), 0
    return parse_agent_state(record.data), record.version


def update_agent_state(
    store: Store, scope: str, session: str, change: Callable[[AgentState], AgentState]
) -> AgentState:
    """Apply ``change`` to the stored state by compare-and-set, retrying lost races.

    ``change`` may run several times (once per attempt): it must be a pure
    function of the state it is given.

    Raises:
        ConfigError: ``change`` did not return an :class:`AgentState`.
        Contention: Every attempt lost its race (heavy contention).

    """
    saved_once = False

    def load() -> tuple[AgentState, int]:
        nonlocal saved_once
        state, version = load_agent_state(store, scope, session)
        saved_once = version > 0
        return state, version

    def checked(state: AgentState) -> AgentState | None:
        new = change(state)
        if not isinstance(new, AgentState):
            raise ConfigError(
                f"the agent-state update must return an AgentState, got {type(new).__name__}"
            )
        return None if new == state and saved_once else new

    def save(state: AgentState, version: int) -> bool:
        saved = store.save_state(
            scope, session, AGENT_STATE_KIND, state.to_dict(), expected_version=version
        )
        return saved is not None

    return compare_and_set(
        load, checked, save, what=f"agent state of {scope}/{session}", attempts=MAX_UPDATE_ATTEMPTS
    )


def compact_stored_agent_state(
    store: Store, scope: str, session: str, *, now: datetime | None = None
) -> bool:
    """Apply the rules to the stored state, if there is one. True if it changed."""
    try:
        record = store.load_state(scope, session, AGENT_STATE_KIND)
    except CorruptedData:
        return False
    if record is None:
        return False
    stamp = int((now or datetime.now(UTC)).timestamp())
    changed = False

    def rules(state: AgentState) -> AgentState:
        nonlocal changed
        new, changed = compact_agent_state(state, now=stamp)
        return new

    update_agent_state(store, scope, session, rules)
    if changed:
        log.info(
            "agent state of %s/%s compacted (facts de-duplicated, old tasks pruned)", scope, session
        )
    return changed


def agent_state_section(state: AgentState) -> Section | None:
    """The agent state as a prompt section (facts, open tasks, environment, preferences)."""
    shown: dict[str, object] = {}
    if state.facts:
        shown["facts"] = list(state.facts[-MAX_PROMPT_FACTS:])
    tasks = [
        {"id": t.id, "description": t.description, "status": t.status, "progress": t.progress}
        for t in state.active_tasks
    ]
    if tasks:
        shown["active_tasks"] = tasks
    if state.last_known_environment:
        shown["last_known_environment"] = state.last_known_environment
    if state.preferences:
        shown["preferences"] = state.preferences
    if not shown:
        return None
    return Section(
        AGENT_STATE_TITLE, json.dumps(shown, indent=2, ensure_ascii=False, sort_keys=True)
    )


class AgentStateSection:
    """Shows the agent state (policies with the agent-state compaction rules)."""

    name = "agent_state"

    def applies(self, policy: Policy) -> bool:
        """Policies that fold by message count or by tokens keep an agent state."""
        return policy.max_history_messages is not None or policy.fold_over_tokens is not None

    def sections(self, store: Store, scope: str, session: str) -> list[Section]:
        """The agent-state section, when the state holds anything."""
        state, version = load_agent_state(store, scope, session)
        section = agent_state_section(state)
        return [section.from_state(AGENT_STATE_KIND, version)] if section is not None else []
