"""Forgetting with a receipt: delete messages, then follow everything made from them.

:func:`forget_messages` (one message with its tool group, an edit, a regenerate,
a proxied client's edited history), :func:`clear` (a session's every message),
:func:`delete_session` (a session, whole), :func:`purge_scope` (every session and
memory of a scope) and :func:`forget_scope` (a whole scope, its audit trail too)
delete through the store or :mod:`engram.edits`, then visit every derived thing
(:mod:`engram.forget_derived`): the summary and important data (marked stale
when their citations used a deleted message, rebuilt at once with
``rebuild=True``, else at the next turn), agent-state and tool-cache entries,
memories, vectors and search-index rows. The :class:`~engram.receipts.Receipt`
says what became of each and is written to the scope's audit trail (ids,
versions and counts; never the forgotten text).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from engram import edits
from engram import scopes as scope_ops
from engram.compaction.cycle import load_compaction_state
from engram.compaction.important import is_empty
from engram.compaction.state import CompactionState
from engram.forget_derived import (
    agent_state_lines,
    compaction_lines,
    index_lines,
    memory_lines,
    memory_used,
    quotes,
    tool_cache_lines,
    vector_lines,
)
from engram.models import MemoryRecord, Message
from engram.policy import Policy
from engram.receipts import (
    AGENT_STATE,
    IMPORTANT_DATA,
    MEMORY,
    PENDING,
    REBUILT,
    REMOVED,
    SEARCH_INDEX,
    SESSION,
    SUMMARY,
    TOOL_CACHE,
    UNCHANGED,
    VECTORS,
    Derived,
    Receipt,
    ordered,
)
from engram.runtime import Runtime
from engram.search.vectors import keeps_vectors
from engram.sections.agent_state import load_agent_state
from engram.sections.tool_cache import load_exchange_state
from engram.store.base import MAX_PAGE

log = logging.getLogger("engram")

#: ``action`` of a deleted session's receipt, and of a purged scope's.
DELETE_SESSION = "delete_session"
PURGE_SCOPE = "purge_scope"
#: ``event`` of the audit entry a purged scope leaves (its memories' purge leaves one too).
PURGED_EVENT = "scope_purged"
_WITH_STATE = "with its summary, important data, agent state and cache"


def forget_messages(
    runtime: Runtime,
    scope: str,
    session: str,
    ids: Sequence[int],
    *,
    action: str,
    policy: Policy,
    rebuild: bool = False,
    **extra: object,
) -> Receipt:
    """Delete messages of one session and everything made from them; the receipt says what.

    Args:
        runtime: The engine's runtime.
        scope: The session's scope.
        session: The session.
        ids: The messages to delete (already grown to their tool groups).
        action: The verb, for the audit trail (``delete``, ``edit``, ...).
        policy: The session's policy (rebuilds compact with it).
        rebuild: Rebuild the summary, important data and memories before returning
            (else the summary is rebuilt at the next turn; a memory is removed).
        extra: More fields for the audit entry.

    """
    store = runtime.store
    before, _ = load_compaction_state(store, scope, session)
    had = store.vector_ids(scope, session, ids) if keeps_vectors(store) else None
    runtime.prompts.flush(scope, session)  # recorded prompts that quote them lose that text
    gone, dropped = edits.delete(store, scope, session, ids, action=action, audit=False)
    if not gone:
        return Receipt(action, scope, session)
    gone_ids = [m.id for m in gone]
    texts = [m.content for m in gone if m.content.strip()]
    stale = any(before.uses(gone_ids))
    lines = compaction_lines(before, gone_ids, stale)
    if dropped:
        kept = f"{dropped} older version" + ("s" if dropped > 1 else "")
        lines.append(Derived(SUMMARY, kept, REMOVED, "kept to replay recorded prompts"))
    lines += agent_state_lines(store, scope, session, texts)
    lines += tool_cache_lines(store, scope, session, gone)
    memories = runtime.memories(scope)
    existing = memories.list()
    used = [m for m in existing if memory_used(m, session, gone_ids, texts)]
    lines += memory_lines(memories, session, used, rebuild=rebuild, total=len(existing))
    lines += vector_lines(had)
    lines += index_lines(len(gone))
    if rebuild and stale:
        lines = _rebuild_state(runtime, scope, session, policy, lines)
    receipt = Receipt(
        action, scope, session, tuple(gone_ids), ordered(lines), rebuild, messages=tuple(gone)
    )
    _audit(runtime, receipt, edits.audit_event(action, session, gone, dropped) | dict(extra))
    return receipt


def _rebuild_state(
    runtime: Runtime, scope: str, session: str, policy: Policy, lines: list[Derived]
) -> list[Derived]:
    """Compact now from what remains; pending lines become rebuilt (or removed: nothing left)."""
    result = runtime.compact(scope, session, policy)
    state = result.state
    if state is None:
        return lines
    out = []
    for line in lines:
        if line.kind not in (SUMMARY, IMPORTANT_DATA) or line.outcome != PENDING:
            out.append(line)
            continue
        if line.kind == SUMMARY:
            has = bool(state.summary.strip())
        else:
            has = not is_empty(state.important_data)
        if state.summary_version and has:
            detail = f"rebuilt from the remaining messages as version {state.summary_version}"
            out.append(Derived(line.kind, line.ref, REBUILT, detail))
        else:
            detail = "nothing left to fold: the remaining messages are shown as they are"
            out.append(Derived(line.kind, line.ref, REMOVED, detail))
    return out


class _Held(NamedTuple):
    """What a whole session holds before it goes: ids, vectors, state, memories made from it."""

    ids: list[int]
    had: set[int] | None
    before: CompactionState
    agent: bool
    cache: bool
    existing: list[MemoryRecord]
    made_from: list[MemoryRecord]


def _held(runtime: Runtime, scope: str, session: str) -> _Held:
    """Read what the session holds, a page at a time (before a clear or a delete)."""
    store = runtime.store
    ids: list[int] = []
    existing = runtime.memories(scope).list()
    used: dict[int, bool] = {m.id: False for m in existing}
    had: set[int] | None = set() if keeps_vectors(store) else None
    for page in _pages(runtime, scope, session):
        page_ids = [m.id for m in page]
        ids += page_ids
        texts = [m.content for m in page if m.content.strip()]
        for memory in existing:
            used[memory.id] = used[memory.id] or memory_used(memory, session, page_ids, texts)
        if had is not None and keeps_vectors(store):
            had |= store.vector_ids(scope, session, page_ids)
    return _Held(
        ids,
        had,
        load_compaction_state(store, scope, session)[0],
        load_agent_state(store, scope, session)[1] > 0,
        bool(load_exchange_state(store, scope, session)[0].entries),
        existing,
        [m for m in existing if used[m.id]],
    )


def _state_lines(held: _Held, why: str) -> list[Derived]:
    """The session's summary, important data, agent state and tool cache: all removed."""
    lines: list[Derived] = []
    version = f"version {held.before.summary_version}"
    if held.before.summary.strip():
        lines.append(Derived(SUMMARY, version, REMOVED, why))
    if not is_empty(held.before.important_data):
        lines.append(Derived(IMPORTANT_DATA, version, REMOVED, why))
    if held.agent:
        lines.append(Derived(AGENT_STATE, "every entry", REMOVED, why))
    if held.cache:
        lines.append(Derived(TOOL_CACHE, "every entry", REMOVED, why))
    return lines


def clear(runtime: Runtime, scope: str, session: str, *, rebuild: bool = False) -> Receipt:
    """Delete every message and state of a session (kept, empty, with its policy); the receipt.

    The session's memories (those made from it) go too; there is nothing left
    to rebuild them from.
    """
    store = runtime.store
    info = store.get_session(scope, session)
    if info is None:
        return Receipt("clear", scope, session)
    held = _held(runtime, scope, session)
    runtime.prompts.drop(scope, session)
    edits.clear_session(store, scope, session, info.policy, audit=False)
    lines = _state_lines(held, "the session was cleared")
    memories = runtime.memories(scope)
    lines += memory_lines(
        memories, session, held.made_from, rebuild=False, total=len(held.existing)
    )
    lines += vector_lines(held.had)
    lines += index_lines(len(held.ids))
    receipt = Receipt("clear", scope, session, tuple(held.ids), ordered(lines), rebuild)
    count = len(held.ids)
    event = {"event": edits.AUDIT_EVENT, "action": "clear", "session": session, "count": count}
    _audit(runtime, receipt, event)
    log.info("session %s/%s cleared", scope, session)
    return receipt


def delete_session(runtime: Runtime, scope: str, session: str) -> Receipt:
    """Delete a session with everything it holds (admin); the receipt.

    Memories made from it stay (memories outlive their conversations): the
    receipt names them as unchanged, for :meth:`Memories.delete` if they must go.
    ``counts`` says how many ``sessions`` (0 or 1) and ``messages`` went.
    """
    store = runtime.store
    if store.get_session(scope, session) is None:
        return Receipt(DELETE_SESSION, scope, session, counts={"sessions": 0, "messages": 0})
    held = _held(runtime, scope, session)
    runtime.prompts.drop(scope, session)  # a turn waiting to be logged would recreate it
    existed = store.delete_session(scope, session)
    why = "the session was deleted"
    lines = _state_lines(held, why)
    kept = "with its policy, recorded prompts and older summary versions"
    lines.append(Derived(SESSION, session, REMOVED, kept))
    lines += [
        Derived(MEMORY, f"memory {m.id}", UNCHANGED, "made from it; memories outlive sessions")
        for m in held.made_from
    ]
    if others := len(held.existing) - len(held.made_from):
        lines.append(Derived(MEMORY, f"{others} other memories", UNCHANGED, "not made from it"))
    lines += vector_lines(held.had)
    lines += index_lines(len(held.ids))
    ids = tuple(held.ids) if existed else ()  # deleted meanwhile by another caller
    counts = {"sessions": int(existed), "messages": len(ids)}
    receipt = Receipt(DELETE_SESSION, scope, session, ids, ordered(lines), counts=counts)
    event = {"event": edits.AUDIT_EVENT, "action": DELETE_SESSION, "session": session}
    _audit(runtime, receipt, event | {"count": counts["messages"]})
    log.info("session %s/%s deleted", scope, session)
    return receipt


def _pages(runtime: Runtime, scope: str, session: str) -> Iterator[list[Message]]:
    after: int | None = None
    while page := runtime.store.page(scope, session, after_id=after, limit=MAX_PAGE):
        yield page
        if len(page) < MAX_PAGE:
            return
        after = page[-1].id


def forget_scope(runtime: Runtime, scope: str) -> Receipt:
    """Delete everything of a scope; one audit entry with the counts and the receipt stays."""
    store = runtime.store
    runtime.prompts.drop(scope)  # turns waiting to be logged would recreate sessions
    counts = edits.forget_scope(store, scope, audit=False)
    every = f"every session ({counts['sessions']})"
    lines = [
        Derived(SESSION, every, REMOVED, _WITH_STATE),
        Derived(MEMORY, f"{counts['memories']} memories", REMOVED, "the scope was forgotten"),
        Derived(VECTORS, "every vector", REMOVED, "removed with the messages"),
        Derived(SEARCH_INDEX, f"{counts['messages']} rows", REMOVED, "removed with the messages"),
    ]
    receipt = Receipt("forget_scope", scope, None, (), ordered(lines), counts=dict(counts))
    _audit(runtime, receipt, {"event": edits.FORGOTTEN_EVENT, **counts})
    return receipt


def purge_scope(runtime: Runtime, scope: str) -> Receipt:
    """Delete every session and memory of a scope (admin); the audit trail stays, without text.

    ``counts`` says how many ``sessions``, ``messages`` and ``memories`` went.
    """
    runtime.prompts.drop(scope)  # turns waiting to be logged would recreate sessions
    sessions, messages = scope_ops.delete_sessions(runtime.store, scope)
    memories = runtime.memories(scope).clear()
    counts = {"sessions": sessions, "messages": messages, "memories": memories.counts["memories"]}
    lines = [
        Derived(SESSION, f"every session ({sessions})", REMOVED, _WITH_STATE),
        *memories.derived,
        Derived(VECTORS, "every vector", REMOVED, "removed with the messages"),
        Derived(SEARCH_INDEX, f"{messages} rows", REMOVED, "removed with the messages"),
    ]
    receipt = Receipt(PURGE_SCOPE, scope, None, (), ordered(lines), counts=counts)
    _audit(runtime, receipt, {"event": PURGED_EVENT, **counts})
    log.info("scope %s purged: %s", scope, counts)
    return receipt


def _audit(runtime: Runtime, receipt: Receipt, event: dict[str, object]) -> None:
    runtime.store.add_audit(receipt.scope, {**event, "receipt": receipt.to_dict()})


__all__ = [
    "DELETE_SESSION",
    "PURGED_EVENT",
    "PURGE_SCOPE",
    "clear",
    "delete_session",
    "forget_messages",
    "forget_scope",
    "purge_scope",
    "quotes",
]
