"""Forgetting with a receipt: delete messages, then follow everything made from them.

:func:`forget_messages` (one message with its tool group, an edit, a regenerate),
:func:`clear` (a session's every message) and :func:`forget_scope` (a whole
scope) delete through :mod:`engram.edits`, then visit every derived thing
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

from engram import edits
from engram.compaction.cycle import load_compaction_state
from engram.compaction.important import is_empty
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
from engram.models import Message
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


def clear(runtime: Runtime, scope: str, session: str, *, rebuild: bool = False) -> Receipt:
    """Delete every message and state of a session (kept, empty, with its policy); the receipt.

    The session's memories (those made from it) go too; there is nothing left
    to rebuild them from.
    """
    store = runtime.store
    info = store.get_session(scope, session)
    if info is None:
        return Receipt("clear", scope, session)
    ids: list[int] = []
    memories = runtime.memories(scope)
    existing = memories.list()
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
    before, _ = load_compaction_state(store, scope, session)
    agent = load_agent_state(store, scope, session)[1] > 0
    cache = bool(load_exchange_state(store, scope, session)[0].entries)
    runtime.prompts.drop(scope, session)
    edits.clear_session(store, scope, session, info.policy, audit=False)
    lines: list[Derived] = []
    version = f"version {before.summary_version}"
    if before.summary.strip():
        lines.append(Derived(SUMMARY, version, REMOVED, "the session was cleared"))
    if not is_empty(before.important_data):
        lines.append(Derived(IMPORTANT_DATA, version, REMOVED, "the session was cleared"))
    if agent:
        lines.append(Derived(AGENT_STATE, "every entry", REMOVED, "the session was cleared"))
    if cache:
        lines.append(Derived(TOOL_CACHE, "every entry", REMOVED, "the session was cleared"))
    doomed = [m for m in existing if used[m.id]]
    lines += memory_lines(memories, session, doomed, rebuild=False, total=len(existing))
    lines += vector_lines(had)
    lines += index_lines(len(ids))
    receipt = Receipt("clear", scope, session, tuple(ids), ordered(lines), rebuild)
    event = {"event": edits.AUDIT_EVENT, "action": "clear", "session": session, "count": len(ids)}
    _audit(runtime, receipt, event)
    log.info("session %s/%s cleared", scope, session)
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
        Derived(SESSION, every, REMOVED, "with its summary, important data, agent state and cache"),
        Derived(MEMORY, f"{counts['memories']} memories", REMOVED, "the scope was forgotten"),
        Derived(VECTORS, "every vector", REMOVED, "removed with the messages"),
        Derived(SEARCH_INDEX, f"{counts['messages']} rows", REMOVED, "removed with the messages"),
    ]
    receipt = Receipt("forget_scope", scope, None, (), ordered(lines), counts=dict(counts))
    _audit(runtime, receipt, {"event": edits.FORGOTTEN_EVENT, **counts})
    return receipt


def _audit(runtime: Runtime, receipt: Receipt, event: dict[str, object]) -> None:
    runtime.store.add_audit(receipt.scope, {**event, "receipt": receipt.to_dict()})


__all__ = ["clear", "forget_messages", "forget_scope", "quotes"]
