"""Edit and regenerate: the explicit, audited ways a stored message goes away.

Messages are append-only; nothing rewrites one in place. An edit is a
deletion plus a new message whose metadata names what it replaces
(``edited_from`` / ``replaces``), so history never changes silently:

* :func:`delete` removes messages of a session (a tool call goes with the
  results that answer it, so the history stays a valid chat);
* every deletion writes one event to the scope's audit trail (event
  :data:`AUDIT_EVENT`: what was done, the session and the ids; never the
  deleted text, which must be gone);
* the search index follows in the store's transaction;
* the compaction state is touched by compare-and-set after every deletion: a
  summary or important data that used a deleted message (by its citations, see
  :meth:`~engram.compaction.state.CompactionState.uses`) is marked stale
  (rebuilt at the next turn from the messages that remain, see
  :mod:`engram.compaction.state`), and otherwise the state's version still
  moves, so a compaction that read the deleted message before it went cannot
  commit;
* the older summary versions kept to replay recorded prompts go too when they
  covered a deleted message (:func:`engram.provenance.retention.forget_covering`):
  a replay of a turn that showed one then says it was pruned.

What else was derived from the messages (memories, agent state, tool cache,
vectors) and the receipt of it all are :mod:`engram.forgetting`'s.

:func:`forget_scope` deletes a whole scope ("forget this user").
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from engram.compaction.cycle import UNREADABLE, load_compaction_state
from engram.compaction.state import FORMAT, STALE_KEY, STATE_KIND, fresh_state
from engram.errors import ConfigError, Contention
from engram.models import JSON, Message
from engram.provenance.retention import forget_covering, forget_quoting
from engram.statedoc import compare_and_set
from engram.store import Store
from engram.store.base import MessageEditor, can_edit

log = logging.getLogger("engram")

#: ``event`` of the audit entries written by edits.
AUDIT_EVENT = "messages_deleted"
#: ``event`` of the audit entry left when a scope is forgotten (counts only).
FORGOTTEN_EVENT = "scope_forgotten"


class Deleted(NamedTuple):
    """What :func:`delete` removed: the messages, and the kept summary versions that held them."""

    messages: list[Message]
    summary_versions_dropped: int


def editor(store: Store) -> MessageEditor:
    """The store as a :class:`MessageEditor`.

    Raises:
        ConfigError: the store cannot delete messages.

    """
    if not can_edit(store):
        raise ConfigError(f"the store {store.url} cannot delete messages")
    return store


def with_tool_group(history: Sequence[Message], chosen: Iterable[int]) -> list[int]:
    """``chosen`` ids plus the tool calls and results tied to them, sorted.

    A tool result goes with the assistant call it answers and every other
    result of that call; a call goes with its results.
    """
    ids = set(chosen)
    by_call: dict[str, int] = {}
    for message in history:
        for call in message.tool_calls or ():
            by_call[str(call.get("id"))] = message.id
    ids |= {by_call[m.tool_call_id] for m in history if m.id in ids and m.tool_call_id in by_call}
    for message in history:
        if message.tool_call_id is not None and by_call.get(message.tool_call_id) in ids:
            ids.add(message.id)
    return sorted(ids)


def delete(
    store: Store,
    scope: str,
    session: str,
    ids: Sequence[int],
    *,
    action: str,
    audit: bool = True,
    **extra: object,
) -> Deleted:
    """Delete messages of one session, audit it, and make the compaction state follow.

    With ``audit=False`` the caller writes the audit event (with its receipt).
    """
    gone = editor(store).delete_messages(scope, session, ids)
    if not gone:
        return Deleted([], 0)
    touch_compaction(store, scope, session, gone, action)
    # Older summaries kept for replaying recorded prompts may hold the deleted text.
    dropped = forget_covering(store, scope, session, STATE_KIND, min(m.id for m in gone))
    # So may the session's recorded tool rounds, views and whole prompts.
    forget_quoting(store, scope, [session], [m.content for m in gone])
    if audit:
        store.add_audit(scope, audit_event(action, session, gone, dropped) | dict(extra))
    log.info("%s: %d message(s) of %s/%s deleted", action, len(gone), scope, session)
    return Deleted(gone, dropped)


def audit_event(action: str, session: str, gone: Sequence[Message], dropped: int = 0) -> JSON:
    """The audit entry of a deletion: what was done, where, which ids (never the text).

    ``dropped``: older summary versions kept for replay that went with them.
    """
    event: JSON = {"event": AUDIT_EVENT, "action": action, "session": session}
    event["ids"] = [m.id for m in gone]
    if dropped:
        event["summary_versions_dropped"] = dropped
    return event


def touch_compaction(
    store: Store, scope: str, session: str, gone: Sequence[Message], action: str
) -> bool:
    """Mark the state stale if it used a deleted message; else just move its version.

    Returns whether it was marked stale.
    """
    first = min(m.id for m in gone)
    reason = f"{action} removed message {first}" + (
        f" and {len(gone) - 1} more" if len(gone) > 1 else ""
    )
    ids = [m.id for m in gone]
    stale = False

    if load_compaction_state(store, scope, session)[1] == UNREADABLE:
        return False  # already rebuilt from the messages at the next turn

    def load() -> tuple[JSON, int]:
        nonlocal stale
        state, version = load_compaction_state(store, scope, session)
        stale = version > 0 and any(state.uses(ids))
        if stale:
            return {"format": FORMAT, STALE_KEY: reason}, version
        record = store.load_state(scope, session, STATE_KIND) if version > 0 else None
        return (dict(record.data) if record is not None else state.to_dict()), version

    def save(data: JSON, version: int) -> bool:
        saved = store.save_state(scope, session, STATE_KIND, data, expected_version=version)
        return saved is not None

    try:
        compare_and_set(load, lambda data: data, save, what=f"compaction of {scope}/{session}")
    except Contention:
        log.warning("compaction state of %s/%s not touched after %s", scope, session, action)
    return stale


def clear_session(
    store: Store,
    scope: str,
    session: str,
    policy: Mapping[str, Any] | None,
    *,
    audit: bool = True,
) -> None:
    """Delete the session's messages and states; keep it (empty) with its policy.

    A fresh compaction state is saved at once, so a compaction that read the
    old messages cannot commit its summary afterwards. With ``audit=False`` the
    caller writes the audit entry.
    """
    count = store.get_session(scope, session)
    store.delete_session(scope, session)
    store.ensure_session(scope, session, policy=policy)
    store.save_state(scope, session, STATE_KIND, fresh_state().to_dict(), expected_version=0)
    if audit:
        store.add_audit(
            scope,
            {
                "event": AUDIT_EVENT,
                "action": "clear",
                "session": session,
                "count": count.message_count if count is not None else 0,
            },
        )
    log.info("session %s/%s cleared", scope, session)


def forget_scope(store: Store, scope: str, *, audit: bool = True) -> dict[str, int]:
    """Delete everything of ``scope``; the audit trail keeps one entry with the counts.

    With ``audit=False`` the caller writes that entry.
    """
    counts = editor(store).delete_scope(scope)
    if audit:
        store.add_audit(scope, {"event": FORGOTTEN_EVENT, **counts})
    log.info("scope %s forgotten: %s", scope, counts)
    return counts


__all__ = [
    "AUDIT_EVENT",
    "FORGOTTEN_EVENT",
    "audit_event",
    "clear_session",
    "delete",
    "editor",
    "forget_scope",
    "with_tool_group",
]
